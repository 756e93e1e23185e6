"""WireGuard interfaces inside existing network namespaces.

Two back ends, chosen per call with ``mode``:

``"kernel"``
    ``ip -n NS link add IFNAME type wireguard`` and ``wg set``
    (:mod:`~hoplab.lab.wireguard.kernel`). Nothing to keep running, so
    :func:`start` returns ``None``.

``"userspace"``
    One ``wireguard-go -f IFNAME`` per interface, started through
    ``ip netns exec NS`` so its TUN device and UDP socket live in the node's
    namespace (:mod:`~hoplab.lab.wireguard.userspace`, which also explains the
    private per-node control sockets). :func:`start` returns its PID so the
    engine can record it.

The daemon is configured by speaking the UAPI text protocol
(https://www.wireguard.com/xplatform/) directly on that socket
(:mod:`~hoplab.lab.wireguard.uapi`), so ``wg`` is not needed in userspace
mode. Addresses and routes are the caller's job.
"""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Callable, Sequence

from hoplab.errors import LabError
from hoplab.held_stops import stops_held
from hoplab.lab.wireguard import kernel, uapi, userspace
from hoplab.lab.wireguard.config import (
    MODES,
    Mode,
    PeerStats,
    WgInterface,
    WgPeer,
    log_file,
    node_of,
    uapi_socket,
    validate,
    where,
)
from hoplab.lab.wireguard.keys import KeyPair, generate_keypair
from hoplab.lab.wireguard.uapi import UAPI_TIMEOUT_S
from hoplab.lab.wireguard.userspace import START_TIMEOUT_S, STOP_GRACE_S
from hoplab.nodes.each import in_each
from hoplab.nodes.executor import ExecutorError

__all__ = [
    "MODES",
    "START_TIMEOUT_S",
    "STOP_GRACE_S",
    "UAPI_TIMEOUT_S",
    "KeyPair",
    "Mode",
    "PeerStats",
    "WgInterface",
    "WgPeer",
    "generate_keypair",
    "log_file",
    "show",
    "start",
    "start_many",
    "stop",
    "uapi_socket",
]


def start(iface: WgInterface, mode: Mode, *,
          on_started: Callable[[WgInterface, int], None] | None = None) -> int | None:
    """Create, configure and bring up one WireGuard interface.

    Returns the wireguard-go PID in userspace mode and None in kernel mode.
    ``on_started(iface, pid)`` is called as soon as the daemon exists, before
    any waiting, so that a caller which records PIDs for crash clean-up does
    not lose one if this function fails or is interrupted. The daemon's
    command line is then exactly ``wireguard-go -f IFNAME``.
    """
    return start_many([iface], mode, on_started=on_started)[0]


def start_many(ifaces: Sequence[WgInterface], mode: Mode, *,
               on_started: Callable[[WgInterface, int], None] | None = None,
               ) -> list[int | None]:
    """Like :func:`start` for many interfaces, in parallel where it matters.

    Userspace: launch every daemon, then wait for all, then configure all, so
    the start-up latencies overlap instead of adding up. On any failure the
    daemons started here are stopped before the error propagates.
    """
    if mode not in MODES:
        raise LabError(f"unknown WireGuard mode {mode!r}; expected one of {', '.join(MODES)}")
    for iface in ifaces:
        validate(iface)
    seen: set[tuple[str, str]] = set()
    for iface in ifaces:
        key = (iface.netns, iface.ifname)
        if key in seen:
            raise LabError(f"WireGuard {where(iface)} is listed twice")
        seen.add(key)

    if mode == "kernel":
        done: list[WgInterface] = []
        try:
            for iface in ifaces:
                kernel.start(iface)
                done.append(iface)
        except BaseException:
            for iface in done:
                _quietly(stop, iface, None)
            raise
        return [None] * len(ifaces)

    procs: list[subprocess.Popen[bytes]] = []
    try:
        for iface in ifaces:
            # Started, listed and recorded as one: a stop that lands in between is
            # delivered once the daemon is in `procs`, which the unwinding stops.
            with stops_held():
                proc = userspace.spawn(iface)
                procs.append(proc)
                if on_started is not None:
                    on_started(iface, proc.pid)
        deadline = time.monotonic() + START_TIMEOUT_S
        for iface, proc in zip(ifaces, procs, strict=True):
            userspace.wait_ready(iface, proc, deadline)
        for iface in ifaces:
            uapi.configure(iface)
        _run_all([(iface, kernel.link_up_argv(iface), f"setting MTU and up on {where(iface)}")
                  for iface in ifaces])
    except BaseException:
        for iface, proc in zip(ifaces, procs, strict=False):
            _quietly(stop, iface, proc.pid)
        raise
    return [proc.pid for proc in procs]


def stop(iface: WgInterface, pid: int | None) -> None:
    """Tear down what :func:`start` built; safe to call twice.

    Userspace: SIGTERM to ``pid`` only (never by name), SIGKILL after
    :data:`STOP_GRACE_S`, then remove the socket file. A PID we did not start
    ourselves (say, read back from the engine's state file after a crash) is
    signalled only if it still is a wireguard-go for this interface, so a
    recycled PID is never hit. Kernel (``pid`` None): delete the link.
    """
    if pid is None:
        kernel.stop(iface)
    else:
        userspace.stop(iface, pid)


def show(iface: WgInterface) -> dict[str, PeerStats]:
    """Per-peer counters, keyed by the peer's public key in hex.

    Asks the daemon over its UAPI socket when there is one (userspace), or the
    kernel via ``wg show IFNAME dump`` otherwise.
    """
    if uapi_socket(iface).exists():
        return uapi.get(iface)
    return kernel.show(iface)


def _run_all(jobs: list[tuple[WgInterface, list[str], str]]) -> None:
    """Run independent commands, each in its interface's namespace, a few at a time;
    fail with every error."""
    def one(job: tuple[WgInterface, list[str], str]) -> str | None:
        iface, argv, what = job
        try:
            done = node_of(iface).run(argv)
        except ExecutorError as exc:
            return f"{what} failed: {exc}"
        if done.returncode == 0:
            return None
        return f"{what} failed: {done.stderr.strip() or f'exit status {done.returncode}'}"

    errors = [e for e in in_each(jobs, one) if e is not None]
    if errors:
        raise LabError("; ".join(errors))


def _quietly(fn: Callable[[WgInterface, int | None], None], iface: WgInterface,
             pid: int | None) -> None:
    # Clean-up on an error path must not hide the error that got us here.
    with contextlib.suppress(Exception):
        fn(iface, pid)
