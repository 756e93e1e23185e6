"""One SSH connection to a device, used from ordinary threads.

The client is asyncssh (bench/ssh_clients.py and docs/devices.md say why): it runs
in one event-loop thread per connection, and `call()` runs a coroutine there with a
timeout. Channels are opened one at a time (a lock around each open): dropbear, the
SSH server of OpenWrt, drops a connection on which two channel opens cross (OpenWrt
issue 11208). Authentication is by key or agent only: password and
keyboard-interactive methods are switched off, so no password is ever asked for,
passed or logged. Host keys are checked against known_hosts; an unknown key is
refused with the way to accept it, a changed key is always refused.

A lost connection raises ExecutorError naming the node; the next call connects
again, retrying for up to the target's connect_timeout while the device refuses
connections (an SSH server restarting, a reboot).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import asyncssh

from hoplab.nodes.executor import ExecutorError, NotReached, NotReachedInTime
from hoplab.nodes.ssh_target import SshTarget, split_destination

T = TypeVar("T")
RETRY_S = 0.25

ACCEPT_HINT = ("accept it with `--accept-new-host-keys` or the lab option "
               "`accept_new_host_keys = true`, or add it to {known_hosts} yourself "
               "(ssh-keyscan, or one ssh login)")


class HostKeyError(NotReached):
    """The device's host key is unknown (and not to be accepted) or changed."""


class SshConnection:
    """A device's connection: connects on first use and again after a loss."""

    def __init__(self, target: SshTarget) -> None:
        self.target = target
        self.node = target.node
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name=f"ssh-{target.node}", daemon=True)
        self._thread.start()
        self._conn: asyncssh.SSHClientConnection | None = None
        self._open_lock: asyncio.Lock | None = None
        self._tunnel: asyncssh.SSHClientConnection | None = None    # to the jump host
        self._closed = False
        self.connects = 0          # how many times it connected (1 + reconnections)

    # --- running coroutines from other threads -----------------------------------------

    def call(self, fn: Callable[[asyncssh.SSHClientConnection], Awaitable[T]],
             timeout: float | None, *, connect: bool = True) -> T:
        """Run fn(connection) in the loop thread, connecting first if needed (with
        connect=False, on the present connection only: for a channel opened on it). Raises
        TimeoutError after `timeout` s (fn cleans up on cancellation), ExecutorError
        when the device cannot be reached or the connection is lost."""
        if self._closed:
            raise ExecutorError(f"node {self.node}: connection already closed")

        connected: list[bool] = []

        async def with_conn() -> T:
            if connect:
                conn = await self._connected()
                connected.append(True)
            elif self._conn is None or self._conn.is_closed():
                # A channel of a connection that is gone: connecting anew would not
                # bring the channel back.
                raise ExecutorError(f"node {self.node} ({self.target.destination}): "
                                    f"connection lost")
            else:
                conn = self._conn
            try:
                return await fn(conn)
            except (asyncssh.Error, OSError, EOFError) as e:
                self._lost(conn)
                raise ExecutorError(f"node {self.node} ({self.target.destination}): "
                                    f"connection lost: {_why(e)}") from e

        fut = asyncio.run_coroutine_threadsafe(asyncio.wait_for(with_conn(), timeout),
                                               self._loop)
        try:
            return fut.result()
        except (TimeoutError, concurrent.futures.TimeoutError):
            if connect and not connected:
                raise NotReachedInTime(f"node {self.node}: cannot connect to "
                                       f"{self.target.destination} within "
                                       f"{timeout or 0:g} s") from None
            raise TimeoutError(f"node {self.node}: no answer within {timeout or 0:g} s") \
                from None

    def submit(self, coro: Awaitable[T]) -> concurrent.futures.Future[T]:
        """Schedule a coroutine in the loop thread (for background readers)."""
        async def run() -> T:
            return await coro
        return asyncio.run_coroutine_threadsafe(run(), self._loop)

    async def open_process(self, conn: asyncssh.SSHClientConnection, command: str,
                           **kw: Any) -> asyncssh.SSHClientProcess[Any]:
        """A new session channel running `command`, opened while no other channel
        opens or closes on this connection (dropbear, OpenWrt issue 11208)."""
        async with self.channel_lock():
            return await conn.create_process(command, **kw)

    @property
    def takes_signals(self) -> bool:
        """Whether the server delivers a channel's "signal" request to its command:
        dropbear does; OpenSSH's sshd 9.2 did not here (nothing happened)."""
        conn = self._conn
        version = str(conn.get_extra_info("server_version", "")) if conn else ""
        return "dropbear" in version.lower()

    def channel_lock(self) -> asyncio.Lock:
        """Held while a channel opens, and for the whole life of a short command, from
        its open to its close: dropbear 2022.8x closes the connection when a channel's
        close crosses another's open or exec request (OpenWrt issue 11208, dropbear
        issue 321); measured here: 8 threads of short commands on one connection lost
        it within 40 commands, never once serialised."""
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        return self._open_lock

    # --- connecting ---------------------------------------------------------------------

    async def _connected(self) -> asyncssh.SSHClientConnection:
        conn = self._conn
        if conn is not None and not conn.is_closed():
            return conn
        if self._open_lock is None:
            self._open_lock = asyncio.Lock()
        async with self._open_lock:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            self._conn = await self._connect()
            self.connects += 1
            return self._conn

    def _options(self, user: str | None, port: int | None) -> dict[str, Any]:
        t = self.target
        kw: dict[str, Any] = {
            # A known_hosts file that does not exist yet trusts nothing.
            "known_hosts": str(kh) if (kh := t.known_hosts_path()).is_file() else b"",
            # Keys or the agent; never a password, never a prompt.
            "password_auth": False, "kbdint_auth": False, "gss_auth": False,
            "connect_timeout": t.connect_timeout,
            # A dead link is noticed within ~15 s even when no command is running.
            "keepalive_interval": 5, "keepalive_count_max": 3,
        }
        if user:
            kw["username"] = user
        if port:
            kw["port"] = port
        if t.identity:
            kw["client_keys"] = [str(t.identity_path())]
        return kw

    async def _connect(self) -> asyncssh.SSHClientConnection:
        t = self.target
        tunnel = None
        if t.jump:
            # The jump host is reached with the same key and known_hosts as the device.
            jump, port = t.jump, None
            head, sep, tail = jump.rpartition(":")
            if sep and tail.isdigit() and "]" not in tail:
                jump, port = head, int(tail)
            user, host = split_destination(jump)
            tunnel = await self._dial(host, port, user, None, what=f"jump host {jump}")
        try:
            conn = await self._dial(t.host, t.port, t.user, tunnel, what=t.destination)
        except BaseException:
            if tunnel is not None:
                tunnel.close()
            raise
        if self._tunnel is not None:
            self._tunnel.close()
        self._tunnel = tunnel
        return conn

    async def _dial(self, host: str, port: int | None, user: str | None,
                    tunnel: asyncssh.SSHClientConnection | None,
                    what: str) -> asyncssh.SSHClientConnection:
        t = self.target
        kh = t.known_hosts_path()
        kw = self._options(user, port)
        if tunnel is not None:
            kw["tunnel"] = tunnel
        try:
            try:
                return await self._retrying(host, kw)
            except asyncssh.HostKeyNotVerifiable as e:
                state = _known_state(kh, host, port)
                if state == "changed":
                    raise HostKeyError(
                        f"node {self.node}: the host key of {host} is not the one in {kh}: "
                        f"refused (a reinstalled device, or someone in between; if the "
                        f"device was reinstalled, remove its old line from {kh})") from e
                if not t.accept_new_host_keys:
                    raise HostKeyError(
                        f"node {self.node}: unknown host key of {host} (not in {kh}); "
                        + ACCEPT_HINT.format(known_hosts=kh)) from e
                await self._accept_new(kh, host, port, tunnel)
                kw = self._options(user, port) | ({"tunnel": tunnel} if tunnel else {})
                return await asyncssh.connect(host, **kw)
        except HostKeyError:
            raise
        except asyncssh.PermissionDenied as e:
            raise NotReached(
                f"node {self.node}: {what} refused our keys (hoplab uses keys or an "
                f"agent only, never a password): {_why(e)}") from e
        except (asyncssh.Error, OSError, TimeoutError) as e:
            raise NotReached(f"node {self.node}: cannot connect to {what}: "
                             f"{_why(e)}") from e

    async def _retrying(self, host: str, kw: dict[str, Any]) -> asyncssh.SSHClientConnection:
        """Connect, trying again while the device refuses TCP connections (its SSH
        server restarting, the device rebooting), until connect_timeout has passed."""
        deadline = time.monotonic() + self.target.connect_timeout
        while True:
            try:
                return await asyncssh.connect(host, **kw)
            except (ConnectionRefusedError, asyncssh.ConnectionLost):
                if time.monotonic() + RETRY_S >= deadline:
                    raise
                await asyncio.sleep(RETRY_S)

    async def _accept_new(self, kh: Path, host: str, port: int | None,
                          tunnel: asyncssh.SSHClientConnection | None) -> None:
        kw: dict[str, Any] = {}
        if port:
            kw["port"] = port
        if tunnel is not None:
            kw["tunnel"] = tunnel
        key = await asyncssh.get_server_host_key(host, **kw)
        if key is None:
            raise HostKeyError(f"node {self.node}: {host} sent no host key")
        name = host if not port or port == 22 else f"[{host}]:{port}"
        kh.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        with kh.open("a") as f:
            f.write(f"{name} {key.export_public_key('openssh').decode().strip()}\n")

    def _lost(self, conn: asyncssh.SSHClientConnection) -> None:
        if self._conn is conn:
            self._conn = None
            if self._tunnel is not None:
                self._tunnel.abort()
                self._tunnel = None
        conn.abort()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True

        async def shut() -> None:
            if self._conn is not None:
                self._conn.close()
                try:
                    await asyncio.wait_for(self._conn.wait_closed(), 2)
                except (TimeoutError, asyncssh.Error, OSError):
                    self._conn.abort()
                self._conn = None
            if self._tunnel is not None:
                self._tunnel.close()
                self._tunnel = None

        with contextlib.suppress(TimeoutError, concurrent.futures.TimeoutError):
            asyncio.run_coroutine_threadsafe(shut(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()


def _known_state(kh: Path, host: str, port: int | None) -> str:
    """"changed" when known_hosts holds keys for this host (so the one offered is not
    among them), else "unknown"."""
    if not kh.is_file():
        return "unknown"
    try:
        known = asyncssh.read_known_hosts(str(kh))
    except (asyncssh.Error, OSError, ValueError):
        return "unknown"
    keys = known.match(host, "", None if port in (None, 22) else port)[0]
    return "changed" if keys else "unknown"


def _why(e: BaseException) -> str:
    text = str(e) or type(e).__name__
    return text.splitlines()[0] if text.strip() else type(e).__name__
