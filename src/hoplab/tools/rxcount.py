"""Counting a test stream's frames where they arrive: an nftables counter on the receiving
interface's ingress hook (netdev family), which also drops them.

Counting at ingress, before routing, counts every frame the path delivered, whatever the
receiver's stack would do with it; dropping there keeps a stream of a million frames a
second from costing the receiver ICMP port-unreachable replies (and the path a reverse
flow). One named counter per table; one table per test stream.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from hoplab.tools import ToolOutputError, load_json

_NAME = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}$")


def _check(table: str, dev: str) -> None:
    if not _NAME.match(table):
        raise ValueError(f"nft table name {table!r}: letters, digits and _, at most 32")
    if not re.fullmatch(r"[A-Za-z0-9_.@-]{1,15}", dev):
        raise ValueError(f"interface name {dev!r}")


def ruleset(table: str, dev: str, streams: Sequence[tuple[int, int]]) -> str:
    """nft input that counts (and drops) the test's UDP datagrams arriving on `dev`, both
    families: each stream is (destination port, UDP length). Only datagrams of the test's
    length count, so a generator's handshake (iperf3's 4-byte UDP connect message) still
    reaches its server."""
    _check(table, dev)
    rules = ""
    for dport, length in streams:
        if not 1 <= dport <= 65535 or not 8 <= length <= 65535:
            raise ValueError(f"port {dport}, UDP length {length}")
        rules += f"    udp dport {dport} udp length {length} counter name \"frames\" drop\n"
    if not rules:
        raise ValueError("a counter needs at least one stream")
    return (f"table netdev {table} {{\n"
            f"  counter frames {{ }}\n"
            f"  chain ingress {{\n"
            f"    type filter hook ingress device \"{dev}\" priority 0; policy accept;\n"
            f"{rules}"
            f"  }}\n"
            f"}}\n")


def load_argv() -> list[str]:
    """Reads the ruleset on stdin."""
    return ["nft", "-f", "-"]


def read_argv(table: str) -> list[str]:
    return ["nft", "-j", "list", "counter", "netdev", table, "frames"]


def delete_argv(table: str) -> list[str]:
    return ["nft", "delete", "table", "netdev", table]


def frames(text: str) -> int:
    """The frames counted, from `nft -j list counter` output."""
    doc = load_json("nft", text)
    for item in doc.get("nftables", []):
        counter = item.get("counter") if isinstance(item, dict) else None
        if isinstance(counter, dict) and counter.get("name") == "frames":
            packets = counter.get("packets")
            if isinstance(packets, int) and packets >= 0:
                return packets
    raise ToolOutputError(f"nft: no 'frames' counter in {text[:200]!r}")
