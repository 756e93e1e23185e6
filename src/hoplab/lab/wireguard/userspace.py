"""Userspace WireGuard: one ``wireguard-go -f IFNAME`` per interface.

Each daemon is started through ``ip netns exec NS`` (the node's executor's
``popen(as_user=True)``) so its TUN device and UDP socket live in the node's
namespace, and its PID is handed back so the engine can record it.

Control sockets. wireguard-go normally listens on
``/var/run/wireguard/IFNAME.sock``, one path for the whole machine, so two
namespaces that both have a ``wg0`` would fight over it. We therefore bind the
socket ourselves at ``RUNDIR/IFNAME.sock`` (``RUNDIR`` is private to the node)
and hand the listening fd over with ``WG_UAPI_FD``. That alone is not enough:
on Linux wireguard-go's ``ipc.UAPIListen`` also puts an inotify watch on the
hard-coded ``/var/run/wireguard/IFNAME.sock`` (to exit when the socket is
deleted) and fails with "Failed to listen on uapi socket: no such file or
directory" when that path is absent. So the daemon is exec'd through a small
helper (:data:`~hoplab.lab.wireguard.private_run.PRIVATE_RUN_HELPER`, run by
this Python with ``-c``) that gives it a private mount namespace in which
``/var/run/wireguard`` *is* ``RUNDIR``: the watch then lands on our socket,
and nothing is created under the real ``/var/run/wireguard``. Every exec in
the chain ``ip netns exec`` -> helper -> ``wireguard-go`` keeps the PID, so
the PID we get from :class:`subprocess.Popen` is the daemon's.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from hoplab.errors import LabError
from hoplab.held_stops import stops_held
from hoplab.lab.wireguard.config import (
    WgInterface,
    log_file,
    make_rundir,
    node_of,
    uapi_socket,
    where,
)
from hoplab.lab.wireguard.private_run import PRIVATE_RUN_HELPER
from hoplab.lab.wireguard.uapi import errno_of
from hoplab.nodes.executor import ExecutorError
from hoplab.nodes.procs import proc_start_time

#: How long a freshly started wireguard-go may take to answer on its socket.
START_TIMEOUT_S = 5.0
#: Grace between SIGTERM and SIGKILL in :func:`stop`.
STOP_GRACE_S = 2.0

_WG_GO = "wireguard-go"
_LOG_TAIL_LINES = 12

# Daemons started by this process, kept so that stop() can reap them (no
# zombies) and so that Popen never warns about a child dropped while running.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


def children() -> set[int]:
    """The PIDs of the daemons this process started and has not stopped."""
    return set(_CHILDREN)


def spawn(iface: WgInterface) -> subprocess.Popen[bytes]:
    """Bind the control socket and start wireguard-go on it; no waiting."""
    make_rundir(iface)
    sock_path = uapi_socket(iface)
    _clear_stale_socket(iface, sock_path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(str(sock_path))
        # Only root may talk to the daemon, as with wireguard-go's own socket
        # (the 0700 directory already guarantees it; this is for `ls`).
        os.chmod(sock_path, 0o600)
        listener.listen()
        fd = listener.fileno()
        env = {k: v for k, v in os.environ.items() if k not in ("WG_TUN_FD", "WG_UAPI_FD")}
        env |= {
            "WG_UAPI_FD": str(fd),
            # Foreground, and (in every wireguard-go version) skips the banner
            # that older versions also turned into a refusal to run on Linux.
            "WG_PROCESS_FOREGROUND": "1",
            "LOG_LEVEL": os.environ.get("HOPLAB_WG_LOG", "error"),
        }
        argv = [sys.executable, "-I", "-S", "-c", PRIVATE_RUN_HELPER, str(iface.rundir),
                _WG_GO, "-f", iface.ifname]
        # A stop that lands while the daemon starts (inside Popen, after its fork) is
        # held until it is known: the one who stops the daemons finds it here.
        with open(log_file(iface), "ab") as log, stops_held():
            proc = node_of(iface).popen(
                argv, as_user=True, env=env, pass_fds=(fd,), stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT,
                # Own session: a Ctrl-C meant for the engine must not reach the
                # daemons directly; the engine stops them in order.
                start_new_session=True)
            _CHILDREN[proc.pid] = proc
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            sock_path.unlink()
        raise LabError(f"cannot start wireguard-go for {where(iface)}: {exc}") from exc
    finally:
        # The daemon holds its own copy; once ours is closed, a daemon that
        # dies makes our pending connection fail at once instead of hanging.
        listener.close()
    return proc


def _clear_stale_socket(iface: WgInterface, sock_path: Path) -> None:
    if not (sock_path.exists() or sock_path.is_symlink()):
        return
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(sock_path))
    except OSError:
        sock_path.unlink()  # left behind by a daemon that is gone
        return
    finally:
        probe.close()
    raise LabError(f"a WireGuard daemon already answers on {sock_path} for {where(iface)}")


def wait_ready(iface: WgInterface, proc: subprocess.Popen[bytes], deadline: float) -> None:
    """Wait until the daemon answers ``get=1`` and its TUN device exists."""
    here = where(iface)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        reply = b""
        try:
            # The socket was bound before the daemon started, so this connect
            # succeeds at once; the answer comes when the daemon accepts.
            conn.connect(str(uapi_socket(iface)))
            conn.sendall(b"get=1\n\n")
        except OSError as exc:
            raise LabError(f"cannot reach the control socket of wireguard-go for {here}: "
                           f"{exc}{_log_tail(iface)}") from exc
        while not reply.endswith(b"\n\n"):
            if proc.poll() is not None:
                raise LabError(f"wireguard-go for {here} exited with status {proc.returncode} "
                               f"while starting{_log_tail(iface)}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LabError(f"wireguard-go for {here} did not answer on {uapi_socket(iface)} "
                               f"within {START_TIMEOUT_S:g} s{_log_tail(iface)}")
            # Short slices so that a dying daemon is noticed promptly.
            conn.settimeout(min(0.05, remaining))
            try:
                chunk = conn.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                chunk = b""
            if not chunk:
                # Reset or closed: only a dead daemon does that; poll it above.
                time.sleep(0.01)
                proc.wait(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
                continue
            reply += chunk
    except subprocess.TimeoutExpired:
        raise LabError(f"wireguard-go for {here} closed its control socket but kept "
                       f"running{_log_tail(iface)}") from None
    finally:
        conn.close()
    errno_of(reply.decode(errors="replace"), here, "get")
    try:
        shown = node_of(iface).run(["ip", "link", "show", "dev", iface.ifname]).returncode == 0
    except ExecutorError:
        shown = False   # its namespace is gone
    if not shown:
        raise LabError(f"wireguard-go for {here} answers but the device is missing from the "
                       f"namespace{_log_tail(iface)}")


def _log_tail(iface: WgInterface) -> str:
    try:
        lines = log_file(iface).read_text(errors="replace").splitlines()
    except OSError:
        return ""
    tail = [line for line in lines if line.strip()][-_LOG_TAIL_LINES:]
    if not tail:
        return f" (log {log_file(iface)} is empty)"
    return f"; last lines of {log_file(iface)}:\n" + "\n".join("  " + line for line in tail)


# ------------------------------------------------------------------ stopping


def stop(iface: WgInterface, pid: int) -> None:
    """Stop the daemon ``pid`` of ``iface`` and remove its socket file."""
    _terminate(pid, iface.ifname)
    with contextlib.suppress(FileNotFoundError):
        uapi_socket(iface).unlink()


def _terminate(pid: int, ifname: str) -> None:
    proc = _CHILDREN.pop(pid, None)
    if proc is not None:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        return
    # Not our child: check it is still the daemon we mean before each signal.
    if not _is_our_daemon(pid, ifname):
        return
    start = proc_start_time(pid)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline:
        if not _running(pid, start):
            return
        time.sleep(0.02)
    if _is_our_daemon(pid, ifname):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and _running(pid, start):
        time.sleep(0.02)


def _running(pid: int, start: int | None) -> bool:
    """Still that process (same start time), and not yet a zombie (proc_start_time has
    none for one). An exiting process loses its command line before it becomes a
    zombie: waiting on the command line (`_is_our_daemon`) returned while it still ran
    (CI saw it alive just after)."""
    return start is not None and proc_start_time(pid) == start


def _is_our_daemon(pid: int, ifname: str) -> bool:
    """True if ``pid`` is a live (not zombie) ``wireguard-go -f IFNAME``."""
    proc_dir = Path(f"/proc/{pid}")
    try:
        stat = (proc_dir / "stat").read_text()
        argv = (proc_dir / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    state = stat.rpartition(")")[2].split()[0]  # comm may contain spaces
    return (state not in ("Z", "X") and len(argv) >= 2
            and os.path.basename(os.fsdecode(argv[0])) == _WG_GO
            and os.fsencode(ifname) in argv[1:])
