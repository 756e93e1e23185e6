"""Per-hop WireGuard on a VM: the guest kernel's own module, configured over SSH
(`ip link add ... type wireguard`, `wg set`), its private key handed over on stdin into
the guest's memory and removed once the kernel holds it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from hoplab.errors import LabError
from hoplab.lab.wireguard.config import format_endpoint, format_network
from hoplab.lab.wireguard.keys import KeyPair, hex_to_b64

if TYPE_CHECKING:
    from hoplab.lab.plan import WgEnd
    from hoplab.nodes.executor import Executor

KEY_FILE = "/run/hoplab-wg.key"


def _run(ex: Executor, argv: list[str], what: str, input: str | None = None) -> None:
    done = ex.run(argv, input=input, timeout=60)
    if done.returncode != 0:
        raise LabError(f"{what}: {' '.join(argv[:4])}: exit {done.returncode}: "
                       f"{(done.stderr or done.stdout).strip()[:300]}")


def start(ex: Executor, end: WgEnd, keys: KeyPair, peer: KeyPair) -> None:
    what = f"VM {end.node}: WireGuard {end.ifname}"
    _run(ex, ["ip", "link", "add", "dev", end.ifname, "type", "wireguard"],
         f"{what} (does its kernel have the wireguard module?)")
    _run(ex, ["sh", "-c", f"umask 077 && cat > {KEY_FILE}"], what,
         input=keys.private_b64() + "\n")
    try:
        _run(ex, ["wg", "set", end.ifname, "private-key", KEY_FILE,
                  "listen-port", str(end.listen_port), "peer", hex_to_b64(peer.public_hex),
                  "endpoint", format_endpoint(end.endpoint, what),
                  "allowed-ips", ",".join(format_network(n, what) for n in end.allowed)], what)
    finally:
        ex.run(["rm", "-f", KEY_FILE], timeout=30)
    _run(ex, ["ip", "link", "set", "dev", end.ifname, "up"], what)
