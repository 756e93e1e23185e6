"""Letting a lab's VMs go on from their checkpoint (initramfs.INIT), all at once.

A VM that booted stops at the checkpoint; the first of its kind in this call is
snapshotted there (hoplab.lab.vm.snapshot) for the next lab to resume from. A VM
restored from a snapshot comes up paused at that point. Either way hoplab writes one line
to its console, the wall clock and whether it was restored, and the guest goes on to
mount its root, take its lab's settings and start its SSH server."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

from qemu.qmp import QMPClient
from qemu.qmp.error import QMPError

from hoplab.errors import LabError
from hoplab.lab.vm import qemu, snapshot
from hoplab.lab.vm.initramfs import CHECKPOINT, RESUMED

POLL_S = 0.02


@dataclass
class Starting:
    boot: qemu.Boot
    started: qemu.Started
    # The snapshot this VM makes at its checkpoint (its kind has none yet), if any.
    make: str | None = None


def plan(vms: Sequence[tuple[qemu.Boot, qemu.Started]], exe: str) -> list[Starting]:
    """Which VM of each kind without a snapshot makes it: the first."""
    out, claimed = [], set()
    for b, started in vms:
        make = None
        if b.restore is None and b.firmware is None and snapshot.enabled():
            k = snapshot.key(b, exe)
            if k not in claimed:
                claimed.add(k)
                make = k
        out.append(Starting(b, started, make))
    return out


# Starts a VM's QEMU again, with the same boot: the new QEMU, or a LabError.
Again = Callable[[Starting], qemu.Started]


def release(vms: list[Starting], deadline: float, again: Again | None = None) -> list[str]:
    """Every VM past its checkpoint, or a LabError with the console of the one that
    failed (QEMU exited, or the deadline passed). A VM that booted (not restored) and
    whose kernel oopsed or panicked before its checkpoint is started again once by
    `again`, if given: under multi-threaded TCG a vCPU can run a stale int3 the kernel
    has just patched out, and the guest dies before anything of the lab has run in it
    (docs/vm.md). What was started again is said in the list returned."""
    todo = [v for v in vms if v.started.handles is not None]
    notes: list[str] = []
    if todo:
        asyncio.run(_all(todo, deadline, again, notes))
    return notes


async def _all(vms: list[Starting], deadline: float, again: Again | None,
               notes: list[str]) -> None:
    try:
        await asyncio.gather(*(_once_more(v, deadline, again, notes) for v in vms))
    finally:
        for v in vms:
            assert v.started.handles is not None
            v.started.handles.close()


async def _once_more(v: Starting, deadline: float, again: Again | None,
                     notes: list[str]) -> None:
    try:
        await _one(v, deadline)
    except LabError:
        said = _oopsed_before_checkpoint(v)
        if again is None or not said:
            raise
        kept = qemu.keep_console(v.boot.dir)
        notes.append(f"VM {v.boot.node}: its kernel oopsed before its checkpoint "
                     f"({said[0]}) and it was booted again; the first boot's console is "
                     f"{kept}")
        assert v.started.handles is not None
        v.started.handles.close()
        v.started = again(v)
        await _one(v, deadline)


def _oopsed_before_checkpoint(v: Starting) -> list[str]:
    """The oops of a booted VM's kernel that exited before its checkpoint; [] if not."""
    b = v.boot
    if b.restore is not None or v.started.proc.poll() is None or \
            qemu.said(b.dir, CHECKPOINT):
        return []
    return qemu.oopsed(b.dir)


async def _one(v: Starting, deadline: float) -> None:
    b, proc, handles = v.boot, v.started.proc, v.started.handles
    assert handles is not None
    client = QMPClient(f"hoplab-{b.node}")
    drain = asyncio.create_task(_drain(handles.console))
    try:
        await asyncio.wait_for(client.connect(handles.monitor), _left(deadline))
        if b.restore is not None:
            await _restored(client, b, proc, deadline)
        else:
            await _wait(b, proc, deadline, _console(b, CHECKPOINT), "its checkpoint")
            if v.make is not None:
                await _save(client, v.make)
        if (await client.execute("query-status"))["status"] != "running":  # type: ignore[index]
            await client.execute("cont")
        restored = 1 if b.restore is not None else 0
        await asyncio.get_running_loop().sock_sendall(
            handles.console, f"go {int(time.time())} {restored}\n".encode())
        # QEMU reads the console's input as the guest's UART takes it, a few bytes at a
        # time, and drops what is unread when hoplab's end closes: the end stays open
        # until the guest has read the line and gone on.
        await _wait(b, proc, deadline, _console(b, RESUMED), "going on")
    except (TimeoutError, QMPError, OSError) as exc:
        # A QEMU that cannot load its snapshot exits before its monitor greets.
        if b.restore is not None and _exits(proc):
            raise _unloadable(b) from None
        raise LabError(f"VM {b.node}: QEMU's monitor failed while it started ({exc})"
                       f"{qemu.console_tail(b.dir)}") from None
    finally:
        drain.cancel()
        # An error of the connection is raised again here: the one above is the news.
        with contextlib.suppress(QMPError, OSError, EOFError):
            await client.disconnect()


async def _drain(console: socket.socket) -> None:
    """Read and drop what the guest writes to its console (QEMU's logfile has it) while
    hoplab holds the console's end. Unread, the socket is full after some 270 bytes (a
    socket buffer's worth of one-byte writes), and the guest's UART then waits 10 ms for
    each character: a kernel's oops took 15 s to reach its panic, cut off before the line
    that says where it was."""
    console.setblocking(False)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(OSError):
        while await loop.sock_recv(console, 4096):
            pass


async def _restored(client: QMPClient, b: qemu.Boot, proc: subprocess.Popen[bytes],
                    deadline: float) -> None:
    """Until QEMU has loaded the snapshot."""
    async def loaded() -> bool:
        try:
            status = (await client.execute("query-status"))["status"]  # type: ignore[index]
        except (QMPError, OSError, EOFError):
            return False
        return bool(status != "inmigrate")

    try:
        await _wait(b, proc, deadline, loaded, f"resume from {b.restore}")
    except LabError:
        if proc.poll() is None:
            raise
        raise _unloadable(b) from None


def _exits(proc: subprocess.Popen[bytes]) -> bool:
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return False
    return True


def _unloadable(b: qemu.Boot) -> LabError:
    """A snapshot QEMU could not load, forgotten: the next VM of its kind boots."""
    assert b.restore is not None
    snapshot.forget(b.restore)
    return LabError(f"VM {b.node}: QEMU could not resume from {b.restore} (it is "
                    f"removed: the next lab up boots this VM){qemu.console_tail(b.dir)}")


async def _save(client: QMPClient, k: str) -> None:
    """Snapshot the stopped guest into the cache (the VM goes on either way: a snapshot
    that fails is only not made)."""
    snapshot.snapshot_dir().mkdir(parents=True, exist_ok=True)
    tmp = snapshot.partial(k)
    await client.execute("stop")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        client.send_fd_scm(fd)
        await client.execute("getfd", {"fdname": "snapshot"})
    finally:
        os.close(fd)
    try:
        await client.execute("migrate", {"uri": "fd:snapshot"})
        while True:
            info = await client.execute("query-migrate")
            status = info.get("status") if isinstance(info, dict) else None
            if status == "completed":
                os.replace(tmp, snapshot.path(k))
                snapshot.prune()
                return
            if status in ("failed", "cancelled"):
                return
            await asyncio.sleep(POLL_S)
    finally:
        snapshot.forget(tmp)


def _console(b: qemu.Boot, text: str) -> Callable[[], Awaitable[bool]]:
    async def said() -> bool:
        return qemu.said(b.dir, text)
    return said


def _left(deadline: float) -> float:
    return max(0.1, deadline - time.monotonic())


async def _wait(b: qemu.Boot, proc: subprocess.Popen[bytes], deadline: float,
                done: Callable[[], Awaitable[bool]], what: str) -> None:
    """Until done(); a LabError with the console if QEMU exits or the deadline passes."""
    while not await done():
        if proc.poll() is not None:
            raise LabError(f"VM {b.node}: QEMU exited with {proc.returncode} before "
                           f"{what}{qemu.console_tail(b.dir)}")
        if time.monotonic() > deadline:
            raise LabError(f"VM {b.node}: no {what} after {qemu.BOOT_TIMEOUT_S:.0f} s"
                           f"{qemu.console_tail(b.dir)}")
        await asyncio.sleep(POLL_S)
