"""WireGuard interfaces inside existing network namespaces.

Two back ends, chosen per call with ``mode``:

``"kernel"``
    ``ip -n NS link add IFNAME type wireguard`` and ``wg set``. Nothing to keep
    running, so :func:`start` returns ``None``.

``"userspace"``
    One ``wireguard-go -f IFNAME`` per interface, started through
    ``ip netns exec NS`` so its TUN device and UDP socket live in the node's
    namespace. :func:`start` returns its PID so the engine can record it.

Control sockets. wireguard-go normally listens on
``/var/run/wireguard/IFNAME.sock``, one path for the whole machine, so two
namespaces that both have a ``wg0`` would fight over it. We therefore bind the
socket ourselves at ``RUNDIR/IFNAME.sock`` (``RUNDIR`` is private to the node)
and hand the listening fd over with ``WG_UAPI_FD``. That alone is not enough:
on Linux wireguard-go's ``ipc.UAPIListen`` also puts an inotify watch on the
hard-coded ``/var/run/wireguard/IFNAME.sock`` (to exit when the socket is
deleted) and fails with "Failed to listen on uapi socket: no such file or
directory" when that path is absent. So the daemon is exec'd through a small
helper (:data:`_PRIVATE_RUN_HELPER`, run by this Python with ``-c``) that
gives it a private mount namespace in which ``/var/run/wireguard`` *is*
``RUNDIR``: the watch then lands on our socket, and nothing is created under
the real ``/var/run/wireguard``. Every exec in the chain
``ip netns exec`` -> helper -> ``wireguard-go`` keeps the PID, so the PID we
get from :class:`subprocess.Popen` is the daemon's.

The daemon is configured by speaking the UAPI text protocol
(https://www.wireguard.com/xplatform/) directly on that socket, so ``wg`` is
not needed in userspace mode. Addresses and routes are the caller's job.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import ipaddress
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TypedDict

from hoplab.errors import LabError

Mode = Literal["kernel", "userspace"]
MODES: tuple[Mode, ...] = ("kernel", "userspace")

#: How long a freshly started wireguard-go may take to answer on its socket.
START_TIMEOUT_S = 5.0
#: Grace between SIGTERM and SIGKILL in :func:`stop`.
STOP_GRACE_S = 2.0
#: Timeout of one UAPI exchange with a running daemon.
UAPI_TIMEOUT_S = 2.0

_WG_GO = "wireguard-go"
# sockaddr_un.sun_path is 108 bytes including the terminating NUL.
_SUN_PATH_MAX = 107
_IFNAMSIZ = 15
_LOG_TAIL_LINES = 12

# Daemons started by this process, kept so that stop() can reap them (no
# zombies) and so that Popen never warns about a child dropped while running.
_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}


# --------------------------------------------------------------------- keys


@dataclass(frozen=True)
class KeyPair:
    """A Curve25519 key pair, both halves as 64 lowercase hex digits (UAPI form)."""

    # repr=False: a key pair must not leak its secret into logs or tracebacks.
    private_hex: str = field(repr=False)
    public_hex: str

    def public_b64(self) -> str:
        """The public key as ``wg`` and configuration files show it."""
        return _hex_to_b64(self.public_hex)

    def private_b64(self) -> str:
        """The private key in ``wg`` form (for ``wg set ... private-key FILE``)."""
        return _hex_to_b64(self.private_hex)


def generate_keypair() -> KeyPair:
    """A fresh X25519 key pair."""
    # Imported here: the OpenSSL bindings are only needed when making keys.
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    private = X25519PrivateKey.generate()
    return KeyPair(
        private_hex=private.private_bytes_raw().hex(),
        public_hex=private.public_key().public_bytes_raw().hex(),
    )


def _hex_to_b64(key_hex: str) -> str:
    return base64.b64encode(bytes.fromhex(key_hex)).decode("ascii")


def _b64_to_hex(key_b64: str) -> str:
    return base64.b64decode(key_b64, validate=True).hex()


# --------------------------------------------------------------- interfaces


@dataclass(frozen=True)
class WgPeer:
    public_hex: str
    endpoint: str | None  # "ip:port" or "[v6]:port"; None: wait for the peer
    allowed_ips: tuple[str, ...]
    keepalive: int | None = None  # persistent keepalive in seconds


@dataclass(frozen=True)
class WgInterface:
    netns: str  # name under /run/netns
    ifname: str
    keys: KeyPair
    listen_port: int  # 0: let the system choose
    peers: tuple[WgPeer, ...]
    rundir: Path  # private to the node: control socket, log, key file
    mtu: int = 1420


class PeerStats(TypedDict):
    rx_bytes: int
    tx_bytes: int
    last_handshake_time_sec: int  # 0: never
    endpoint: str | None


def uapi_socket(iface: WgInterface) -> Path:
    """Where the userspace daemon of ``iface`` takes UAPI requests."""
    return iface.rundir / f"{iface.ifname}.sock"


def log_file(iface: WgInterface) -> Path:
    """Where the userspace daemon of ``iface`` writes its stdout and stderr."""
    return iface.rundir / f"{iface.ifname}.log"


def _where(iface: WgInterface) -> str:
    return f"interface {iface.ifname} in namespace {iface.netns}"


# ------------------------------------------------------------------ public


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
        _validate(iface)
    seen: set[tuple[str, str]] = set()
    for iface in ifaces:
        key = (iface.netns, iface.ifname)
        if key in seen:
            raise LabError(f"WireGuard {_where(iface)} is listed twice")
        seen.add(key)

    if mode == "kernel":
        done: list[WgInterface] = []
        try:
            for iface in ifaces:
                _start_kernel(iface)
                done.append(iface)
        except BaseException:
            for iface in done:
                _quietly(stop, iface, None)
            raise
        return [None] * len(ifaces)

    procs: list[subprocess.Popen[bytes]] = []
    try:
        for iface in ifaces:
            proc = _spawn(iface)
            procs.append(proc)
            if on_started is not None:
                on_started(iface, proc.pid)
        deadline = time.monotonic() + START_TIMEOUT_S
        for iface, proc in zip(ifaces, procs, strict=True):
            _wait_ready(iface, proc, deadline)
        for iface in ifaces:
            _configure_uapi(iface)
        _run_all([_link_up_argv(iface) for iface in ifaces],
                 [f"setting MTU and up on {_where(iface)}" for iface in ifaces])
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
        # Deleting a link that is already gone (namespace removed) is fine.
        subprocess.run(["ip", "-n", iface.netns, "link", "del", "dev", iface.ifname],
                       stdin=subprocess.DEVNULL, capture_output=True, check=False)
    else:
        _terminate(pid, iface.ifname)
    with contextlib.suppress(FileNotFoundError):
        uapi_socket(iface).unlink()


def show(iface: WgInterface) -> dict[str, PeerStats]:
    """Per-peer counters, keyed by the peer's public key in hex.

    Asks the daemon over its UAPI socket when there is one (userspace), or the
    kernel via ``wg show IFNAME dump`` otherwise.
    """
    if uapi_socket(iface).exists():
        return _parse_uapi_get(_uapi(iface, "get=1\n\n"))
    res = subprocess.run(["ip", "netns", "exec", iface.netns, "wg", "show", iface.ifname, "dump"],
                         stdin=subprocess.DEVNULL, capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise LabError(f"cannot read WireGuard state of {_where(iface)}: "
                       f"{res.stderr.strip() or f'wg exited with {res.returncode}'}")
    return _parse_wg_dump(res.stdout)


# ------------------------------------------------------------------ checks


def _validate(iface: WgInterface) -> None:
    where = _where(iface)
    name = iface.ifname
    if not 0 < len(name.encode()) <= _IFNAMSIZ or any(c in name for c in "/:% \t\n"):
        raise LabError(f"WireGuard {where}: bad interface name (1-15 characters, no '/', ':', "
                       "'%' or spaces)")
    if not 0 <= iface.listen_port <= 65535:
        raise LabError(f"WireGuard {where}: listen port {iface.listen_port} out of range")
    if not 68 <= iface.mtu <= 65535:
        raise LabError(f"WireGuard {where}: MTU {iface.mtu} out of range")
    _check_key(iface.keys.private_hex, f"WireGuard {where}: private key")
    _check_key(iface.keys.public_hex, f"WireGuard {where}: public key")
    sock = str(uapi_socket(iface))
    if len(os.fsencode(sock)) > _SUN_PATH_MAX:
        raise LabError(f"WireGuard {where}: control socket path {sock} is longer than the "
                       f"{_SUN_PATH_MAX} bytes a unix socket allows; use a shorter run directory")
    for peer in iface.peers:
        _check_key(peer.public_hex, f"WireGuard {where}: peer key")
        if peer.endpoint is not None:
            _format_endpoint(peer.endpoint, where)
        for net in peer.allowed_ips:
            _format_network(net, where)
        if peer.keepalive is not None and not 0 <= peer.keepalive <= 65535:
            raise LabError(f"WireGuard {where}: keepalive {peer.keepalive} out of range")


def _check_key(key_hex: str, what: str) -> None:
    try:
        ok = len(bytes.fromhex(key_hex)) == 32 and len(key_hex) == 64
    except ValueError:
        ok = False
    if not ok:
        raise LabError(f"{what} is not 64 hex digits")


def _format_endpoint(endpoint: str, where: str) -> str:
    """``ip:port`` or ``[v6]:port`` in canonical form; names are refused.

    wireguard-go's UAPI only takes literal addresses, and a bare IPv6 address
    without brackets is ambiguous with the port.
    """
    host, sep, port_s = endpoint.rpartition(":")
    try:
        if not sep:
            raise ValueError
        port = int(port_s)
        if not 0 < port <= 65535:
            raise ValueError
        if host.startswith("[") and host.endswith("]"):
            return f"[{ipaddress.IPv6Address(host[1:-1])}]:{port}"
        return f"{ipaddress.IPv4Address(host)}:{port}"
    except ValueError:
        raise LabError(f"WireGuard {where}: endpoint {endpoint!r} is not 'ip:port' or "
                       "'[ipv6]:port'") from None


def _format_network(net: str, where: str) -> str:
    try:
        return str(ipaddress.ip_network(net, strict=False))
    except ValueError:
        raise LabError(f"WireGuard {where}: allowed IP {net!r} is not a network") from None


# ----------------------------------------------------------------- kernel


def _start_kernel(iface: WgInterface) -> None:
    where = _where(iface)
    _run(["ip", "-n", iface.netns, "link", "add", "dev", iface.ifname, "type", "wireguard"],
         f"creating kernel WireGuard {where} (does this kernel have the wireguard module?)")
    try:
        _make_rundir(iface)
        key_file = iface.rundir / f"{iface.ifname}.key"
        # `wg set` reads the private key from a file so it never appears in
        # argv (visible to every user in /proc); 0600 from the first byte.
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            os.fchmod(fd, 0o600)  # an older file may have had looser bits
            os.write(fd, (iface.keys.private_b64() + "\n").encode("ascii"))
        finally:
            os.close(fd)
        try:
            _run(_wg_set_argv(iface, key_file), f"configuring {where}")
        finally:
            # The kernel holds the key now; keep no secret lying on disk.
            key_file.unlink(missing_ok=True)
        _run(_link_up_argv(iface), f"setting MTU and up on {where}")
    except BaseException:
        _quietly(stop, iface, None)
        raise


def _wg_set_argv(iface: WgInterface, key_file: Path) -> list[str]:
    where = _where(iface)
    argv = ["ip", "netns", "exec", iface.netns, "wg", "set", iface.ifname,
            "private-key", str(key_file), "listen-port", str(iface.listen_port)]
    for peer in iface.peers:
        argv += ["peer", _hex_to_b64(peer.public_hex)]
        if peer.endpoint is not None:
            argv += ["endpoint", _format_endpoint(peer.endpoint, where)]
        if peer.allowed_ips:
            argv += ["allowed-ips", ",".join(_format_network(n, where) for n in peer.allowed_ips)]
        if peer.keepalive is not None:
            argv += ["persistent-keepalive", str(peer.keepalive) if peer.keepalive else "off"]
    return argv


def _link_up_argv(iface: WgInterface) -> list[str]:
    return ["ip", "-n", iface.netns, "link", "set", "dev", iface.ifname,
            "mtu", str(iface.mtu), "up"]


# -------------------------------------------------------------- userspace


def _spawn(iface: WgInterface) -> subprocess.Popen[bytes]:
    """Bind the control socket and start wireguard-go on it; no waiting."""
    _make_rundir(iface)
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
        argv = ["ip", "netns", "exec", iface.netns,
                sys.executable, "-I", "-S", "-c", _PRIVATE_RUN_HELPER, str(iface.rundir),
                _WG_GO, "-f", iface.ifname]
        with open(log_file(iface), "ab") as log:
            proc = subprocess.Popen(
                argv, env=env, pass_fds=(fd,), stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT,
                # Own session: a Ctrl-C meant for the engine must not reach the
                # daemons directly; the engine stops them in order.
                start_new_session=True)
    except OSError as exc:
        with contextlib.suppress(FileNotFoundError):
            sock_path.unlink()
        raise LabError(f"cannot start wireguard-go for {_where(iface)}: {exc}") from exc
    finally:
        # The daemon holds its own copy; once ours is closed, a daemon that
        # dies makes our pending connection fail at once instead of hanging.
        listener.close()
    _CHILDREN[proc.pid] = proc
    return proc


def _make_rundir(iface: WgInterface) -> None:
    iface.rundir.mkdir(parents=True, exist_ok=True)
    # Private to root: it holds control sockets and, briefly, a private key.
    os.chmod(iface.rundir, 0o700)


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
    raise LabError(f"a WireGuard daemon already answers on {sock_path} for {_where(iface)}")


def _wait_ready(iface: WgInterface, proc: subprocess.Popen[bytes], deadline: float) -> None:
    """Wait until the daemon answers ``get=1`` and its TUN device exists."""
    where = _where(iface)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        reply = b""
        try:
            # The socket was bound before the daemon started, so this connect
            # succeeds at once; the answer comes when the daemon accepts.
            conn.connect(str(uapi_socket(iface)))
            conn.sendall(b"get=1\n\n")
        except OSError as exc:
            raise LabError(f"cannot reach the control socket of wireguard-go for {where}: "
                           f"{exc}{_log_tail(iface)}") from exc
        while not reply.endswith(b"\n\n"):
            if proc.poll() is not None:
                raise LabError(f"wireguard-go for {where} exited with status {proc.returncode} "
                               f"while starting{_log_tail(iface)}")
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise LabError(f"wireguard-go for {where} did not answer on {uapi_socket(iface)} "
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
        raise LabError(f"wireguard-go for {where} closed its control socket but kept "
                       f"running{_log_tail(iface)}") from None
    finally:
        conn.close()
    _errno_of(reply.decode(errors="replace"), where, "get")
    res = subprocess.run(["ip", "-n", iface.netns, "link", "show", "dev", iface.ifname],
                         stdin=subprocess.DEVNULL, capture_output=True, check=False)
    if res.returncode != 0:
        raise LabError(f"wireguard-go for {where} answers but the device is missing from the "
                       f"namespace{_log_tail(iface)}")


def _configure_uapi(iface: WgInterface) -> None:
    where = _where(iface)
    lines = [
        "set=1",
        f"private_key={iface.keys.private_hex}",
        f"listen_port={iface.listen_port}",
        "replace_peers=true",
    ]
    for peer in iface.peers:
        lines.append(f"public_key={peer.public_hex}")
        if peer.endpoint is not None:
            lines.append(f"endpoint={_format_endpoint(peer.endpoint, where)}")
        if peer.keepalive is not None:
            lines.append(f"persistent_keepalive_interval={peer.keepalive}")
        lines.append("replace_allowed_ips=true")
        lines += [f"allowed_ip={_format_network(n, where)}" for n in peer.allowed_ips]
    _errno_of(_uapi(iface, "\n".join(lines) + "\n\n"), where, "set")


def _uapi(iface: WgInterface, request: str) -> str:
    """One request/response exchange on the control socket of ``iface``."""
    where = _where(iface)
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.settimeout(UAPI_TIMEOUT_S)
    reply = b""
    try:
        conn.connect(str(uapi_socket(iface)))
        conn.sendall(request.encode("ascii"))
        # A reply ends with an empty line; the daemon keeps the connection
        # open for further requests, so EOF is not the end marker.
        while not reply.endswith(b"\n\n"):
            chunk = conn.recv(65536)
            if not chunk:
                break
            reply += chunk
    except OSError as exc:
        raise LabError(f"cannot talk to wireguard-go for {where} on {uapi_socket(iface)}: "
                       f"{exc}") from exc
    finally:
        conn.close()
    text = reply.decode(errors="replace")
    if request.startswith("get="):
        _errno_of(text, where, "get")
    return text


def _errno_of(reply: str, where: str, op: str) -> None:
    for line in reply.splitlines():
        if line.startswith("errno="):
            if line != "errno=0":
                raise LabError(f"wireguard-go for {where} refused the {op} request ({line})")
            return
    raise LabError(f"wireguard-go for {where} sent no status for the {op} request")


def _parse_uapi_get(reply: str) -> dict[str, PeerStats]:
    peers: dict[str, PeerStats] = {}
    current: PeerStats | None = None
    for line in reply.splitlines():
        key, _, value = line.partition("=")
        if key == "public_key":
            current = peers[value] = PeerStats(rx_bytes=0, tx_bytes=0,
                                               last_handshake_time_sec=0, endpoint=None)
        elif current is None:
            continue  # interface-level keys
        elif key == "rx_bytes":
            current["rx_bytes"] = int(value)
        elif key == "tx_bytes":
            current["tx_bytes"] = int(value)
        elif key == "last_handshake_time_sec":
            current["last_handshake_time_sec"] = int(value)
        elif key == "endpoint":
            current["endpoint"] = value
    return peers


def _parse_wg_dump(dump: str) -> dict[str, PeerStats]:
    """``wg show IFNAME dump``: one interface line, then one tab-separated line per peer
    (public-key preshared-key endpoint allowed-ips latest-handshake rx tx keepalive)."""
    peers: dict[str, PeerStats] = {}
    for line in dump.splitlines()[1:]:
        cols = line.split("\t")
        if len(cols) < 8:
            continue
        try:
            public_hex = _b64_to_hex(cols[0])
        except (ValueError, binascii.Error):
            continue
        peers[public_hex] = PeerStats(
            rx_bytes=int(cols[5]), tx_bytes=int(cols[6]),
            last_handshake_time_sec=int(cols[4]),
            endpoint=None if cols[2] == "(none)" else cols[2])
    return peers


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
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while time.monotonic() < deadline:
        if not _is_our_daemon(pid, ifname):
            return
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline and _is_our_daemon(pid, ifname):
        time.sleep(0.02)


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


# ------------------------------------------------------------------ helpers


def _run(argv: list[str], what: str) -> None:
    res = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                         check=False)
    if res.returncode != 0:
        raise LabError(f"{what} failed: "
                       f"{res.stderr.strip() or f'{argv[0]} exited with {res.returncode}'}")


def _run_all(argvs: list[list[str]], whats: list[str]) -> None:
    """Run independent commands concurrently; fail with the first error."""
    procs = [subprocess.Popen(a, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for a in argvs]
    errors = []
    for proc, what in zip(procs, whats, strict=True):
        _, err = proc.communicate()
        if proc.returncode != 0:
            errors.append(f"{what} failed: {err.strip() or f'exit status {proc.returncode}'}")
    if errors:
        raise LabError("; ".join(errors))


def _quietly(fn: Callable[[WgInterface, int | None], None], iface: WgInterface,
             pid: int | None) -> None:
    # Clean-up on an error path must not hide the error that got us here.
    with contextlib.suppress(Exception):
        fn(iface, pid)


# ----------------------------------------------------- private /var/run helper

# Runs as `python -I -S -c HELPER RUNDIR PROGRAM ARGS...` in the place of the
# would-be wireguard-go, already inside the node's network namespace, and
# execs PROGRAM (keeping the PID) in a mount namespace of its own where a small
# tmpfs covers /var/run (so nothing is created on the host) and RUNDIR is bound
# at /var/run/wireguard. Inline source with only os/ctypes/sys, under -S,
# because importing this package (importlib.metadata etc.) would cost ~50 ms
# of CPU per daemon instead of ~10 ms; numbers are <sched.h>/<sys/mount.h>.
_PRIVATE_RUN_HELPER = """\
import ctypes, os, sys
rundir, argv = sys.argv[1], sys.argv[2:]
libc = ctypes.CDLL(None, use_errno=True)
libc.mount.argtypes = (ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p,
                       ctypes.c_ulong, ctypes.c_char_p)
def check(rc, what):
    if rc != 0:
        raise OSError(ctypes.get_errno(), what)
try:
    check(libc.unshare(0x20000), "unshare(CLONE_NEWNS)")
    # MS_REC|MS_PRIVATE: none of the mounts below propagate back to the host.
    check(libc.mount(b"none", b"/", None, 0x4000 | 0x40000, None), "make / private")
    # Opened after unshare (a bind source must be a mount of this namespace)
    # and before /var/run is covered (RUNDIR usually lives under /run).
    dir_fd = os.open(rundir, os.O_PATH | os.O_DIRECTORY)
    var_run = os.path.realpath("/var/run").encode()
    # MS_NOSUID|MS_NODEV|MS_NOEXEC
    check(libc.mount(b"tmpfs", var_run, b"tmpfs", 0x2 | 0x4 | 0x8, b"size=64k,mode=0755"),
          "tmpfs on /var/run")
    os.mkdir(var_run + b"/wireguard", 0o700)
    # MS_BIND
    check(libc.mount(b"/proc/self/fd/%d" % dir_fd, var_run + b"/wireguard", None, 0x1000, None),
          "bind " + rundir + " on /var/run/wireguard")
    os.close(dir_fd)
    os.execvp(argv[0], argv)
except OSError as exc:
    sys.exit("hoplab wireguard helper: %s" % exc)
"""
