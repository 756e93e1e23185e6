"""Run directories on devices (perf's data, a server's files): written down when made,
and removed by `lab down` / `hoplab clean` once the hoplab process they are named after
has exited, never while it runs, never outside /tmp."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hoplab.lab.state import LabState
from hoplab.nodes import registry
from hoplab.nodes.fake import FakeExecutor
from hoplab.nodes.procs import proc_start_time
from hoplab.nodes.tracking import LOG_NAME, ProcessRecord, recorded_dirs

GONE = "/tmp/hoplab-run-4194999-5-ab12-server-0"          # no such PID (over pid_max)
LIVE = f"/tmp/hoplab-run-{os.getpid()}-{proc_start_time(os.getpid())}-cd34"
DONE = "/tmp/hoplab-run-4194999-5-ef56"
ELSEWHERE = "/etc/hoplab-run-4194999-5-gh78"
PERF = "/tmp/hoplab-run-4194998-7-ij90"


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> LabState:
    st = LabState(name="dirs", source="lab.toml", namespaces=[])
    monkeypatch.setattr(LabState, "path", property(lambda _s: tmp_path / "state.json"))
    monkeypatch.setattr(LabState, "rundir", property(lambda _s: tmp_path / "run"))
    (tmp_path / "run").mkdir()
    return st


def _log(state: LabState, *entries: dict[str, object]) -> None:
    with (state.rundir / LOG_NAME).open("a") as f:
        for e in entries:
            f.write(json.dumps(e) + "\n")


def test_the_log_keeps_the_directories_not_seen_removed(state: LabState) -> None:
    _log(state, {"op": "dir", "node": "router", "path": GONE},
         {"op": "dir", "node": "router", "path": DONE},
         {"op": "dir_removed", "node": "router", "path": DONE},
         {"op": "started", "node": "router", "pid": 1, "start": 2, "argv": [], "role": "x"})
    with (state.rundir / LOG_NAME).open("a") as f:
        f.write('{"op": "dir", "node": "rou')   # cut short by a SIGKILL
    assert recorded_dirs(state) == [("router", GONE)]


def test_process_record_writes_them(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    rec = ProcessRecord("dirs")
    rec.active, rec.path = True, tmp_path / LOG_NAME
    rec.made_dir("router", GONE)
    rec.removed_dir("router", GONE)
    lines = [json.loads(x) for x in rec.path.read_text().splitlines()]
    assert lines == [{"op": "dir", "node": "router", "path": GONE},
                     {"op": "dir_removed", "node": "router", "path": GONE}]


def test_teardown_removes_only_what_an_exited_run_left_in_tmp(
        monkeypatch: pytest.MonkeyPatch, state: LabState) -> None:
    made: dict[str, FakeExecutor] = {}

    def fake(node: str, info: object) -> FakeExecutor:
        return made.setdefault(node, FakeExecutor(node))

    monkeypatch.setitem(registry.KINDS, "fake", registry.NodeKind(fake))
    from hoplab.lab import teardown as td

    state.summary = {"nodes": {"router": {"kind": "fake"}, "board": {"kind": "fake"}}}
    dirs: list[dict[str, object]] = [{"op": "dir", "node": n, "path": p} for n, p in (
        ("router", GONE), ("router", LIVE), ("router", DONE), ("router", ELSEWHERE),
        ("board", PERF), ("vanished", GONE))]
    _log(state, *dirs, {"op": "dir_removed", "node": "router", "path": DONE})
    fake("router", {}).reply(["rm", "-rf", GONE], returncode=1, stderr="rm: busy")
    warnings = td.teardown(state)
    assert made["router"].calls == [["rm", "-rf", GONE]]
    assert made["board"].calls == [["rm", "-rf", PERF]]
    assert warnings == [f"node router: cannot remove {GONE}: rm: busy"]
