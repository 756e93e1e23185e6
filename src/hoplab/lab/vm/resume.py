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
import signal
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace

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


# Starts a VM's QEMU again, with this boot: the new QEMU, or a LabError.
Again = Callable[[qemu.Boot], qemu.Started]


class Unloadable(LabError):
    """A snapshot QEMU could not resume from (it is removed)."""


def release(vms: list[Starting], deadline: float, again: Again | None = None) -> list[str]:
    """Every VM past its checkpoint, or a LabError with the console of the one that
    failed (QEMU exited, or the deadline passed). With `again`, two failures start a
    VM's QEMU once more, and what was started again is said in the list returned:
    - a snapshot QEMU could not load (a full disk cut it short, QEMU was upgraded in
      place): it is removed, and the VM boots;
    - a booted VM whose kernel oopsed or panicked, or whose QEMU crashed, before its
      checkpoint: it boots again. Under multi-threaded TCG a vCPU can run a stale int3
      the kernel has just patched out, and the guest dies before anything of the lab
      has run in it (docs/vm.md)."""
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
    b = v.boot
    try:
        await _one(v, deadline)
        return
    except Unloadable:
        if again is None:
            raise
        kept = qemu.keep_log(b.dir, qemu.QEMU_LOG)
        notes.append(f"VM {b.node}: QEMU could not resume from {b.restore} (it is "
                     f"removed: QEMU's messages are in {kept}), and the VM booted instead")
        v.boot = replace(b, restore=None)
    except LabError:
        said = _died_before_checkpoint(v)
        if again is None or not said:
            raise
        console = qemu.keep_log(b.dir, qemu.SERIAL_LOG)
        messages = qemu.keep_log(b.dir, qemu.QEMU_LOG)
        notes.append(f"VM {b.node}: {said} before its checkpoint, and it was booted "
                     f"again; the first boot's console and QEMU's messages are "
                     f"{console.name} and {messages.name} in {b.dir}")
    assert v.started.handles is not None
    v.started.handles.close()
    v.started = again(v.boot)
    await _one(v, deadline)


# How QEMU itself dies of a fault of its own (TCG: seen once, a SIGSEGV at load 17).
CRASHES = (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGABRT)


def _died_before_checkpoint(v: Starting) -> str:
    """How a booted VM died before its checkpoint: its kernel's oops, or QEMU's crash;
    "" if it did not (it is running, was restored, or exited otherwise)."""
    b, code = v.boot, v.started.proc.poll()
    if b.restore is not None or code is None or qemu.said(b.dir, CHECKPOINT):
        return ""
    if -code in CRASHES:
        return f"QEMU crashed ({signal.Signals(-code).name})"
    said = qemu.oopsed(b.dir)
    return f"its kernel oopsed ({said[0]})" if said else ""


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


def _unloadable(b: qemu.Boot) -> Unloadable:
    """A snapshot QEMU could not load, forgotten: the next VM of its kind boots."""
    assert b.restore is not None
    snapshot.forget(b.restore)
    return Unloadable(f"VM {b.node}: QEMU could not resume from {b.restore} (it is "
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
