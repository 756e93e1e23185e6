"""Helpers of the fleet tests: benches as processes, and polls of the store and queue
(readiness is waited for by asking, never by sleeping)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import psycopg
import pytest

from hoplab.cli.main import main
from hoplab.lab.where import netns_prefix
from hoplab.store import open_store
from tests.helpers.lab import HOPLAB, namespaces, pids_in

T = TypeVar("T")


def until(what: str, check: Callable[[], T | None], timeout: float = 60) -> T:
    """Poll `check` until it answers something true; fail after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.05)


@contextmanager
def bench(db: str, name: str, *extra: str) -> Iterator[subprocess.Popen[str]]:
    """`hoplab worker` as bench `name` (1 s heartbeats); killed and reaped at the end.
    With faulthandler on, so that `stopped` can show where a bench that did not stop is."""
    proc = subprocess.Popen([*HOPLAB, "worker", "--db", db, "--bench", name,
                             "--heartbeat", "1", *extra], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env={**os.environ, "PYTHONFAULTHANDLER": "1"})
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=60)


def all_idle(db: str, names: tuple[str, ...] | list[str],
             procs: list[subprocess.Popen[str]], timeout: float = 60) -> None:
    """Wait until every bench of `names` (started as `procs`) is idle; one that is not
    within `timeout` fails the test with what each bench said, and where each still
    running is (faulthandler's stacks): b238389's fresh-clone run timed out here with
    nothing to show why."""
    deadline = time.monotonic() + timeout
    while not all(bench_state(db, n) == "idle" for n in names):
        if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    else:
        return
    said = []
    for name, proc in zip(names, procs, strict=True):
        state = bench_state(db, name)
        if proc.poll() is None:
            proc.send_signal(signal.SIGABRT)
        out = proc.communicate(timeout=30)[0]
        said.append(f"bench {name}: state {state}, exit {proc.returncode}:\n{out}")
    pytest.fail("not every bench idle within {:.0f} s:\n{}".format(timeout, "\n".join(said)))


def stopped(proc: subprocess.Popen[str], timeout: float = 60) -> str:
    """What bench `proc` said, once it has exited. One that has not within `timeout` fails
    the test with every thread's stack (faulthandler's, on SIGABRT): where it hangs. A
    pool run once had a drained bench not stop in 60 s, with nothing said (2026-11-30)."""
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        said = proc.communicate(timeout=30)[0]
        pytest.fail(f"bench pid {proc.pid} did not exit within {timeout} s; it said, and "
                    f"its threads' stacks:\n{said}")


def query(db: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Rows of `sql`; none while no bench has made the fleet's tables yet."""
    with psycopg.connect(db) as conn:
        try:
            return conn.execute(sql, args).fetchall()
        except psycopg.errors.UndefinedTable:
            return []


def bench_state(db: str, name: str) -> str | None:
    rows = query(db, "SELECT state FROM hoplab_fleet_benches WHERE name = %s", name)
    return str(rows[0][0]) if rows else None


def ok_runs(db: str, name: str) -> int:
    with open_store(db, read_only=True) as store:
        return len(store.list_runs({"bench": name, "status": "ok"}, figures=False))


def lab_namespaces(lab: str) -> set[str]:
    return {n for n in namespaces() if n.startswith(netns_prefix(lab))}


def measuring(lab: str) -> bool:
    """A tool runs in the lab: a run is under way."""
    return bool(pids_in(lab_namespaces(lab)))


def fleet_said(capsys: pytest.CaptureFixture[str], db: str, *args: str) -> str:
    """What `hoplab fleet` prints, run in this process: the command's start-up costs
    seconds on a busy machine, and a state it must see (a wait for a device) may last
    only a lock timeout."""
    capsys.readouterr()
    assert main(["fleet", "--db", db, *args]) == 0
    return capsys.readouterr().out
