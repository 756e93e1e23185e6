"""Kernel WireGuard: ``ip link add IFNAME type wireguard`` and ``wg set``, run in the
node's namespace through its executor.

Nothing keeps running, so there is no PID to record.
"""

from __future__ import annotations

import binascii
import contextlib
import os
from pathlib import Path

from hoplab.errors import LabError
from hoplab.lab.wireguard.config import (
    PeerStats,
    WgInterface,
    format_endpoint,
    format_network,
    make_rundir,
    node_of,
    uapi_socket,
    where,
)
from hoplab.lab.wireguard.keys import b64_to_hex, hex_to_b64
from hoplab.nodes.executor import ExecutorError


def start(iface: WgInterface) -> None:
    """Create, configure and bring up ``iface``; on failure, remove it again."""
    here = where(iface)
    _run(iface, ["ip", "link", "add", "dev", iface.ifname, "type", "wireguard"],
         f"creating kernel WireGuard {here} (does this kernel have the wireguard module?)")
    try:
        make_rundir(iface)
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
            _run(iface, _wg_set_argv(iface, key_file), f"configuring {here}")
        finally:
            # The kernel holds the key now; keep no secret lying on disk.
            key_file.unlink(missing_ok=True)
        _run(iface, link_up_argv(iface), f"setting MTU and up on {here}")
    except BaseException:
        # Clean-up on an error path must not hide the error that got us here.
        with contextlib.suppress(Exception):
            stop(iface)
        raise


def stop(iface: WgInterface) -> None:
    """Delete the link (fine if it is already gone) and any stale socket file."""
    # Deleting a link that is already gone (namespace removed) is fine.
    with contextlib.suppress(ExecutorError):
        node_of(iface).run(["ip", "link", "del", "dev", iface.ifname])
    with contextlib.suppress(FileNotFoundError):
        uapi_socket(iface).unlink()


def show(iface: WgInterface) -> dict[str, PeerStats]:
    """Per-peer counters from ``wg show IFNAME dump``, keyed by public key in hex."""
    try:
        res = node_of(iface).run(["wg", "show", iface.ifname, "dump"])
    except ExecutorError as exc:
        raise LabError(f"cannot read WireGuard state of {where(iface)}: {exc}") from None
    if res.returncode != 0:
        raise LabError(f"cannot read WireGuard state of {where(iface)}: "
                       f"{res.stderr.strip() or f'wg exited with {res.returncode}'}")
    return _parse_wg_dump(res.stdout)


def link_up_argv(iface: WgInterface) -> list[str]:
    """Set the MTU of ``iface`` and bring it up (both back ends), in its namespace."""
    return ["ip", "link", "set", "dev", iface.ifname, "mtu", str(iface.mtu), "up"]


def _run(iface: WgInterface, argv: list[str], what: str) -> None:
    try:
        res = node_of(iface).run(argv)
    except ExecutorError as exc:
        raise LabError(f"{what} failed: {exc}") from None
    if res.returncode != 0:
        raise LabError(f"{what} failed: "
                       f"{res.stderr.strip() or f'{argv[0]} exited with {res.returncode}'}")


def _wg_set_argv(iface: WgInterface, key_file: Path) -> list[str]:
    here = where(iface)
    argv = ["wg", "set", iface.ifname,
            "private-key", str(key_file), "listen-port", str(iface.listen_port)]
    for peer in iface.peers:
        argv += ["peer", hex_to_b64(peer.public_hex)]
        if peer.endpoint is not None:
            argv += ["endpoint", format_endpoint(peer.endpoint, here)]
        if peer.allowed_ips:
            argv += ["allowed-ips", ",".join(format_network(n, here) for n in peer.allowed_ips)]
        if peer.keepalive is not None:
            argv += ["persistent-keepalive", str(peer.keepalive) if peer.keepalive else "off"]
    return argv


def _parse_wg_dump(dump: str) -> dict[str, PeerStats]:
    """``wg show IFNAME dump``: one interface line, then one tab-separated line per peer
    (public-key preshared-key endpoint allowed-ips latest-handshake rx tx keepalive)."""
    peers: dict[str, PeerStats] = {}
    for line in dump.splitlines()[1:]:
        cols = line.split("\t")
        if len(cols) < 8:
            continue
        try:
            public_hex = b64_to_hex(cols[0])
        except (ValueError, binascii.Error):
            continue
        peers[public_hex] = PeerStats(
            rx_bytes=int(cols[5]), tx_bytes=int(cols[6]),
            last_handshake_time_sec=int(cols[4]),
            endpoint=None if cols[2] == "(none)" else cols[2])
    return peers
