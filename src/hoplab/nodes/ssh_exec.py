"""The transport of a device reached over SSH (an OpenWrt router, a Linux board, a VM);
the rest of its Executor is hoplab.nodes.client's.

Every command is an argv quoted once (hoplab.nodes.ssh_quote) and starts by telling
its PID and start ticks, so a process is stopped by PID only while those ticks still
match: never another process that reused the PID, also after a crash
(`stop_recorded`). Every call has a timeout; a command that overruns is killed on the
device. Files come back with `cat` over a channel (dropbear has no SFTP).

The device's uptime and boot id are looked at after each (re)connection (the client's
look_for_reboot): an uptime that went back, or a new boot id, counts as a reboot
(`reboots`, `check_rebooted()`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal as _signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import asyncssh

from hoplab.nodes.client import Client
from hoplab.nodes.executor import (
    Completed,
    CounterSource,
    ExecutorError,
    LineChannel,
    NotReachedInTime,
    Process,
    ProcessId,
)
from hoplab.nodes.ssh_conn import SshConnection
from hoplab.nodes.ssh_counters import DeviceCounterSource
from hoplab.nodes.ssh_quote import SIGNAL_CHECKED, parse_stat, remote_command
from hoplab.nodes.ssh_target import SshTarget

# read_file's exit status for "no such file" (cat's own is 1 for any error).
_MISSING = 97
_READ = '[ -e "$1" ] || exit 97; exec cat -- "$1"'


def _signum(status: Any) -> int | None:
    name = getattr(status, "exit_signal", None)
    if not name:
        return None
    sig = getattr(_signal, f"SIG{name[0]}", None)
    return -int(sig) if sig is not None else -1


async def _header(proc: asyncssh.SSHClientProcess[bytes], node: str) -> tuple[int, int]:
    line = await proc.stdout.readline()
    try:
        return parse_stat(line.decode(errors="replace"))
    except (ValueError, IndexError):
        err = b""
        with contextlib.suppress(asyncio.TimeoutError, asyncssh.Error):
            err = await asyncio.wait_for(proc.stderr.read(4096), 1)
        raise ExecutorError(f"node {node}: the device's shell did not start the command: "
                            f"{(line + err).decode(errors='replace').strip()[:300]}") from None


def _finished(status: Any) -> Any:
    """A completed command has an exit status or a signal; neither means the connection
    went before the command ended (its fate on the device is unknown)."""
    # asyncssh gives -1 (or None) with no signal when the channel closed unanswered.
    if (status.exit_status is None or status.exit_status < 0) and not status.exit_signal:
        raise EOFError("the connection closed before the command ended")
    return status


async def _closed(proc: asyncssh.SSHClientProcess[Any], timeout: float = 5.0) -> None:
    """Wait for the channel's close to complete (bounded: a lost connection never
    answers, nor does a server whose command still runs)."""
    with contextlib.suppress(TimeoutError, asyncssh.Error, OSError):
        await asyncio.wait_for(proc.wait_closed(), timeout)


async def _copy_out(stream: asyncssh.SSHReader[bytes], fd: int) -> None:
    """A remote stream to a local descriptor, as it comes."""
    while chunk := await stream.read(65536):
        view = memoryview(chunk)
        while view:
            view = view[os.write(fd, view):]


async def _feed(proc: asyncssh.SSHClientProcess[bytes], stdin: int, thread: str) -> None:
    """A local descriptor to the remote command's input, as it comes: read by a thread
    of its own (a terminal may never end it), then its end."""
    loop = asyncio.get_running_loop()
    chunks: asyncio.Queue[bytes] = asyncio.Queue()

    def read() -> None:
        while True:
            try:
                chunk = os.read(stdin, 65536)
            except OSError:
                chunk = b""
            loop.call_soon_threadsafe(chunks.put_nowait, chunk)
            if not chunk:
                return

    threading.Thread(target=read, name=thread, daemon=True).start()
    with contextlib.suppress(asyncssh.Error, OSError):
        while chunk := await chunks.get():
            proc.stdin.write(chunk)
        proc.stdin.write_eof()


class SshProcess:
    """A long-lived process on a device; its output is copied into local files."""

    def __init__(self, name: str, argv: list[str], ident: ProcessId, out: Path, err: Path,
                 started: float, conn: SshConnection) -> None:
        self.conn = conn
        self.name = name
        self.argv = argv
        self.ident = ident
        self.out = out
        self.err = err
        self.started = started
        self._done = threading.Event()
        self._status: int | None = None
        self.lost = False       # the connection dropped while it ran: its fate is unknown
        self.pump: asyncio.Task[None] | None = None

    def _finish(self, status: int) -> None:
        self._status = status
        self._done.set()

    def poll(self) -> int | None:
        return self._status if self._done.is_set() else None

    def wait(self, timeout: float) -> int:
        if not self._done.wait(timeout):
            raise TimeoutError(f"{self.name} on {self.ident.node} still running after "
                               f"{timeout:g} s")
        assert self._status is not None
        return self._status


class SshLineChannel:
    """A request/response process on a device (see executor.LineChannel)."""

    def __init__(self, conn: SshConnection, proc: asyncssh.SSHClientProcess[bytes],
                 terminator: str, ident: ProcessId) -> None:
        self._conn = conn
        self._proc = proc
        self._terminator = terminator
        self.ident = ident

    def ask(self, line: str, timeout: float) -> list[str]:
        if "\n" in line:
            raise ValueError("a request is one line")

        async def go(_: asyncssh.SSHClientConnection) -> list[str]:
            self._proc.stdin.write((line + "\n").encode())
            out: list[str] = []
            while True:
                raw = await self._proc.stdout.readline()
                if not raw:
                    raise EOFError("the device's end of the channel exited")
                got = raw.decode(errors="replace").rstrip("\n")
                if got == self._terminator:
                    return out
                out.append(got)

        return self._conn.call(go, timeout, connect=False)

    def close(self) -> None:
        # Its close is ours to start, so no other channel opens meanwhile (dropbear).
        async def shut(_: asyncssh.SSHClientConnection) -> None:
            async with self._conn.channel_lock():
                self._proc.stdin.write_eof()
                try:
                    await asyncio.wait_for(self._proc.wait_closed(), 2)
                except TimeoutError:
                    self._proc.close()
                    await _closed(self._proc)
        with contextlib.suppress(ExecutorError, TimeoutError):
            self._conn.call(shut, 3, connect=False)


class SshExecutor(Client):
    kind = "ssh"

    def __init__(self, target: SshTarget) -> None:
        self.target = target
        self.node = target.node
        port = f":{target.port}" if target.port else ""
        self.machine = f"ssh:{target.destination}{port}"
        self.conn = SshConnection(target)
        self._procs: dict[int, SshProcess] = {}
        self._seen_connects = 0     # connections made when the device was last looked at

    # --- commands -----------------------------------------------------------------------

    def _run_bytes(self, argv: Sequence[str], stdin: bytes | None, timeout: float,
                   env: Mapping[str, str] | None = None,
                   cwd: str | None = None) -> tuple[int, bytes, bytes]:
        command = remote_command(argv, env, cwd)
        ident: list[tuple[int, int]] = []

        async def go(conn: asyncssh.SSHClientConnection) -> tuple[int, bytes, bytes]:
            async with self.conn.channel_lock():
                proc = await conn.create_process(command, encoding=None)
                try:
                    ident.append(await _header(proc, self.node))
                    if stdin:
                        proc.stdin.write(stdin)
                    proc.stdin.write_eof()
                    out, err = await asyncio.gather(proc.stdout.read(), proc.stderr.read())
                    status = _finished(await proc.wait(check=False))
                except asyncio.CancelledError:
                    # Timed out: end it on the device through its own channel where the
                    # server takes signals (dropbear), so the channel closes before
                    # another opens; run() then kills it by PID and start ticks anyway.
                    if ident and self.conn.takes_signals:
                        with contextlib.suppress(asyncssh.Error, OSError):
                            proc.send_signal("KILL")
                            await _closed(proc, 1.0)
                    raise
                finally:
                    proc.close()
                    await _closed(proc, 0.2 if ident else 5)
            rc = status.exit_status
            if rc is None or rc < 0:
                rc = _signum(status) or 255
            return rc, out, err

        self._note_connection()
        try:
            return self.conn.call(go, timeout)
        except NotReachedInTime:
            raise       # nothing ran: nothing to stop
        except TimeoutError:
            # Stop the overrunning command on the device, by PID and start ticks.
            if ident:
                pid, ticks = ident[0]
                with contextlib.suppress(ExecutorError, TimeoutError):
                    self.signal_recorded(_signal.SIGKILL, [ProcessId(self.node, pid, ticks)])
            raise TimeoutError(f"node {self.node}: {argv[0]} did not finish within "
                               f"{timeout:g} s (stopped)") from None

    def run(self, argv: Sequence[str], *, input: str | None = None,
            timeout: float = 60.0, env: Mapping[str, str] | None = None,
            cwd: str | None = None) -> Completed:
        rc, out, err = self._run_bytes(argv, input.encode() if input is not None else None,
                                       timeout, env, cwd)
        return Completed(tuple(argv), rc, out.decode(errors="replace"),
                         err.decode(errors="replace"))

    def interact(self, argv: Sequence[str], *, stdin: int, stdout: int, stderr: int,
                 timeout: float | None = None) -> int:
        """argv on the device, its input and output streamed (`hoplab lab exec`). Local
        input is read by a thread of its own (a terminal may never end it) and sent as it
        comes; output is written here as it comes. Interrupted, the command is stopped
        by PID and start ticks over a fresh connection (without a terminal, sshd leaves
        a command running when its channel goes), then this one is closed."""
        command = remote_command(argv)
        ident: list[tuple[int, int]] = []

        async def go(conn: asyncssh.SSHClientConnection) -> int:
            async with self.conn.channel_lock():
                proc = await conn.create_process(command, encoding=None)
                feeder: asyncio.Task[None] | None = None
                try:
                    ident.append(await _header(proc, self.node))
                    feeder = asyncio.get_running_loop().create_task(
                        _feed(proc, stdin, f"stdin-{self.node}"))
                    await asyncio.gather(_copy_out(proc.stdout, stdout),
                                         _copy_out(proc.stderr, stderr))
                    status = _finished(await proc.wait(check=False))
                finally:
                    if feeder is not None:
                        feeder.cancel()
                    proc.close()
                    await _closed(proc, 0.2 if ident else 5)
            rc = status.exit_status
            if rc is None or rc < 0:
                return 128 - (_signum(status) or -127)
            return int(rc)

        self._note_connection()
        try:
            return self.conn.call(go, timeout)
        except (KeyboardInterrupt, TimeoutError):
            # Over a connection of its own: this one's channel lock is the command's.
            if ident:
                pid, ticks = ident[0]
                with contextlib.suppress(ExecutorError, TimeoutError, OSError):
                    stop_recorded(self.target, [ProcessId(self.node, pid, ticks)], 1.0)
            self.conn.close()
            raise

    def start(self, name: str, argv: Sequence[str], *, out: Path, err: Path,
              noted: Callable[[Process], None] | None = None) -> SshProcess:
        """A long-lived process on a connection of its own: on dropbear, a channel that
        closes when its process exits must not cross another channel's open, and only
        short commands (serialised on the main connection) can be kept from that. The
        tool runs only once `noted` has its PID (the command waits for "go")."""
        command = remote_command(argv, gated=True)
        self._note_connection()
        pconn = SshConnection(self.target)

        async def go(conn: asyncssh.SSHClientConnection) -> SshProcess:
            # Connected: the time is taken just before the exec request.
            started = time.time()
            proc = await pconn.open_process(conn, command, encoding=None)
            pid, ticks = await _header(proc, self.node)
            p = SshProcess(name, list(argv), ProcessId(self.node, pid, ticks), out, err,
                           started, pconn)
            if noted is not None:
                noted(p)
            proc.stdin.write(b"go\n")
            proc.stdin.write_eof()
            # Kept on the process: the loop holds only a weak reference to a task.
            p.pump = asyncio.get_running_loop().create_task(self._pump(proc, p, conn))
            return p

        try:
            p = pconn.call(go, self.target.connect_timeout + 10)
        except BaseException:
            pconn.close()
            raise
        self._procs[p.ident.pid] = p
        return p

    async def _pump(self, proc: asyncssh.SSHClientProcess[bytes], p: SshProcess,
                    conn: asyncssh.SSHClientConnection) -> None:
        async def copy(stream: asyncssh.SSHReader[bytes], path: Path) -> None:
            with path.open("wb") as f:
                while chunk := await stream.read(65536):
                    f.write(chunk)
                    f.flush()
        status = 255
        try:
            await asyncio.gather(copy(proc.stdout, p.out), copy(proc.stderr, p.err))
            res = await proc.wait(check=False)
            status = res.exit_status if res.exit_status is not None and \
                res.exit_status >= 0 else (_signum(res) or 255)
        except (asyncssh.Error, OSError, EOFError):
            p.lost = True
        finally:
            if proc.exit_status is None and proc.exit_signal is None:
                p.lost = True
            p._finish(status)
            conn.close()

    def signal_recorded(self, signum: int, idents: Sequence[ProcessId]) -> set[ProcessId]:
        # Looked at and signalled by one shell on the device (SIGNAL_CHECKED).
        args = [str(int(signum))] + [str(x) for i in idents for x in (i.pid, i.start_ticks)]
        rc, out, err = self._run_bytes(["sh", "-c", SIGNAL_CHECKED, "sh", *args], None, 10)
        if rc != 0:
            raise ExecutorError(f"node {self.node}: signalling processes failed: "
                                f"{err.decode(errors='replace').strip()}")
        alive = set()
        for line in out.decode().split("\n"):
            if line.strip():
                pid, ticks = line.split()
                alive.add(ProcessId(self.node, int(pid), int(ticks)))
        return alive

    def signal(self, proc: Process, signum: int) -> None:
        self.signal_recorded(signum, [proc.ident])

    def release(self, proc: Process) -> None:
        if isinstance(proc, SshProcess):
            # The channel closes once the device's end exits; give it a moment.
            with contextlib.suppress(TimeoutError):
                proc.wait(2.0)
            proc.conn.close()
        self._procs.pop(proc.ident.pid, None)

    def channel(self, argv: Sequence[str], terminator: str) -> LineChannel:
        command = remote_command(argv)

        async def go(conn: asyncssh.SSHClientConnection) -> SshLineChannel:
            proc = await self.conn.open_process(conn, command, encoding=None)
            pid, ticks = await _header(proc, self.node)
            return SshLineChannel(self.conn, proc, terminator,
                                  ProcessId(self.node, pid, ticks))

        self._note_connection()
        return self.conn.call(go, self.target.connect_timeout + 10)

    def read_file(self, path: str, timeout: float = 10.0) -> bytes | None:
        rc, out, err = self._run_bytes(["sh", "-c", _READ, "sh", path], None, timeout)
        if rc == _MISSING:
            return None
        if rc != 0:
            raise ExecutorError(f"node {self.node}: reading {path} failed: "
                                f"{err.decode(errors='replace').strip()}")
        return out

    def copy_back(self, remote: str, local: Path, timeout: float = 600.0) -> None:
        command = remote_command(["sh", "-c", _READ, "sh", remote])
        part = local.with_name(local.name + ".part")

        async def go(conn: asyncssh.SSHClientConnection) -> tuple[int, bytes]:
            async with self.conn.channel_lock():
                proc = await conn.create_process(command, encoding=None)
                try:
                    await _header(proc, self.node)
                    proc.stdin.write_eof()
                    with part.open("wb") as f:
                        while chunk := await proc.stdout.read(1 << 20):
                            f.write(chunk)
                    err = await proc.stderr.read()
                    status = _finished(await proc.wait(check=False))
                finally:
                    proc.close()
                    await _closed(proc)
            return (status.exit_status if status.exit_status is not None else 255), err

        self._note_connection()
        try:
            rc, err = self.conn.call(go, timeout)
        except BaseException:
            part.unlink(missing_ok=True)
            raise
        if rc != 0:
            part.unlink(missing_ok=True)
            what = "no such file" if rc == _MISSING else err.decode(errors="replace").strip()
            raise ExecutorError(f"node {self.node}: copying {remote} back failed: {what}")
        part.replace(local)

    def counters(self, kinds: frozenset[str]) -> CounterSource:
        # A connection of its own: the SSH server process that serves it serves nothing
        # else, so its CPU time is the sampler's cost (see hoplab.nodes.ssh_counters).
        return DeviceCounterSource(SshExecutor(self.target), kinds)

    def _note_connection(self) -> None:
        """After each new connection, read the device's uptime and boot id once."""
        if self.conn.connects == self._seen_connects and self._boot is not None:
            return
        self.look_for_reboot()
        self._seen_connects = self.conn.connects

    def close(self) -> None:
        try:
            # Also those whose channel was lost: they may still run on the device. None
            # live, the device is not asked (it may be gone: no connection attempt).
            live = [p for p in self._procs.values() if p.poll() is None or p.lost]
            with contextlib.suppress(ExecutorError, TimeoutError):
                self.stop_all(live)
        finally:
            for p in self._procs.values():
                p.conn.close()
            self._procs.clear()
            self.conn.close()


def stop_recorded(target: SshTarget, idents: Sequence[ProcessId], grace: float = 2.0) -> None:
    """Stop processes recorded in a state file after a crash (`hoplab clean`): connect
    again and stop each PID whose start ticks still match. Raises ExecutorError when the
    device cannot be reached."""
    mine = [i for i in idents if i.node == target.node]
    if not mine:
        return
    ex = SshExecutor(target)
    try:
        ex.stop_recorded_all(mine, grace)
    finally:
        ex.close()
