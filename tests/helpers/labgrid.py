"""A real labgrid coordinator and exporter for tests, as a lab team runs them.

`grid(tmp)` starts labgrid-coordinator on 127.0.0.1 with a port the kernel picks (it
prints the one it bound), in a directory of its own (it keeps places.yaml there), and
stops it and every exporter started from it at the end. Places are made with
labgrid-client, as a person makes them. Readiness is waited for by reading what the
coordinator prints and by polling what it knows, never by sleeping.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from tests.helpers.reaping import held

BIN = Path(sys.executable).parent
START_TIMEOUT_S = 30.0


class Grid:
    """A coordinator (`address`), its exporters, and labgrid-client against it."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.procs: list[subprocess.Popen[str]] = []
        self.address = ""

    def start(self) -> None:
        log = self._spawn("labgrid-coordinator", "-l", "127.0.0.1:0")
        bound = _line(log, re.compile(r"listening on \S+:(\d+)"), START_TIMEOUT_S)
        self.address = f"127.0.0.1:{bound.group(1)}"

    def _spawn(self, tool: str, *args: str) -> Path:
        """Start a labgrid daemon; its output goes to a file (it prints every request:
        a pipe nobody reads would fill and stop it), whose path is returned."""
        log = self.base / f"{tool}-{len(self.procs)}.log"
        with log.open("w") as out:
            proc = subprocess.Popen([str(BIN / tool), *args], cwd=self.base, text=True,
                                    stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        held(proc.pid)
        self.procs.append(proc)
        return log

    def exporter(self, group: str, **service: object) -> str:
        """An exporter of one NetworkService (address, username, port) in `group`; its
        resource's path, once the coordinator has it."""
        name = f"hlx{secrets.token_hex(3)}"
        config = self.base / f"{name}.yaml"
        config.write_text(f"{group}:\n  NetworkService:\n" + "".join(
            f"    {key}: {value}\n" for key, value in service.items()))
        self._spawn("labgrid-exporter", "-c", self.address, "-n", name,
                    "--hostname", "127.0.0.1", str(config))
        path = f"{name}/{group}/NetworkService"
        asyncio.run(_until_resource(self.address, path.split("/"), START_TIMEOUT_S))
        return path

    def client(self, *args: str, user: str | None = None,
               check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "LG_COORDINATOR": self.address}
        if user is not None:
            env["LG_USERNAME"] = user
        done = subprocess.run([str(BIN / "labgrid-client"), *args], env=env, text=True,
                              capture_output=True, stdin=subprocess.DEVNULL, timeout=60,
                              check=False)
        if check:
            assert done.returncode == 0, f"labgrid-client {args}: {done.stdout}{done.stderr}"
        return done

    def place(self, *matches: str) -> str:
        """A new place matching these resources."""
        name = f"hl-{secrets.token_hex(3)}"
        self.client("-p", name, "create")
        for match in matches:
            self.client("-p", name, "add-match", match)
        return name

    def acquired(self, place: str) -> str | None:
        """Who holds the place, as labgrid-client shows it."""
        shown = self.client("-p", place, "show").stdout
        found = re.search(r"^\s*acquired: (\S+)$", shown, re.M)
        assert found is not None, shown
        return None if found.group(1) == "None" else found.group(1)

    def holder(self, place: str) -> tuple[str | None, int]:
        """Who holds the place, and how many reservations there are, as a client session
        sees them (what acquired() reads, without a labgrid-client's start-up)."""
        return asyncio.run(_holder(self.address, place))

    def close(self) -> None:
        for proc in reversed(self.procs):
            with suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self.procs):
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def _line(log: Path, pattern: re.Pattern[str], timeout: float) -> re.Match[str]:
    """The first match of `pattern` in a daemon's output, polled until it is there."""
    deadline = time.monotonic() + timeout
    while True:
        found = pattern.search(log.read_text())
        if found is not None:
            return found
        assert time.monotonic() < deadline, f"{log.name} never said {pattern.pattern!r}: " \
                                            f"{log.read_text()[-2000:]}"
        time.sleep(0.02)


async def _until_resource(address: str, path: list[str], timeout: float) -> None:
    """Poll a client session's view until the coordinator has the exporter's resource."""
    from labgrid.remote.client import ClientSession

    session: Any = ClientSession(address, asyncio.get_running_loop())
    await session.start()
    try:
        deadline = time.monotonic() + timeout
        exporter, group, _cls = path
        while group not in session.resources.get(exporter, {}):
            assert time.monotonic() < deadline, f"no resource {path} at {address}"
            await asyncio.sleep(0.02)
            await session.sync_with_coordinator()
    finally:
        await session.stop()
        await session.close()


async def _holder(address: str, place: str) -> tuple[str | None, int]:
    from labgrid.remote.client import ClientSession
    from labgrid.remote.generated import labgrid_coordinator_pb2 as pb

    session: Any = ClientSession(address, asyncio.get_running_loop())
    await session.start()
    try:
        got = await session.stub.GetReservations(pb.GetReservationsRequest())
        return session.places[place].acquired, len(got.reservations)
    finally:
        await session.stop()
        await session.close()


@contextmanager
def grid(base: Path) -> Iterator[Grid]:
    g = Grid(base)
    try:
        g.start()
        yield g
    finally:
        g.close()
