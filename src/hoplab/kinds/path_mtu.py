"""Whether a frame size fits a path: the path's MTU, as ping with "don't fragment" finds
it (a router on the path answers "Frag needed (mtu = 1420)", and the sender's kernel
then refuses with "message too long, mtu=1420"). RFC 2544 frames that do not fit are
not a rate of 0: they are a size the path does not carry whole (a WireGuard tunnel's
1420-byte MTU under 1518-byte frames), said as such."""

from __future__ import annotations

import re

from hoplab.nodes.executor import Executor

# Bytes of a frame beyond its IP packet: the Ethernet header and the FCS RFC 2544 counts.
FRAME_OVERHEAD = 18
# Bytes of an echo request beyond its payload: the IP header and ICMP's 8.
_ECHO_OVERHEAD = {4: 28, 6: 48}
_MTU = re.compile(r"mtu ?= ?(\d+)")


def parse_mtu(text: str) -> int | None:
    """The MTU ping reported (from a router's "Frag needed" or the kernel's "message too
    long"), the smallest if several; None if it reported none."""
    found = [int(m) for m in _MTU.findall(text)]
    return min(found) if found else None


def argv(dst: str, frame: int, family: int) -> list[str]:
    """Two echoes with "don't fragment" carrying an IP packet of a `frame`-byte frame:
    the first may only teach the sender the path's MTU, the second is refused by it."""
    size = frame - FRAME_OVERHEAD - _ECHO_OVERHEAD[family]
    return ["ping", "-6" if family == 6 else "-4", "-n", "-M", "do", "-s", str(size),
            "-c", "2", "-i", "0.2", "-W", "1", dst]


def probe(ex: Executor, dst: str, frame: int, family: int) -> int | None:
    """The path's MTU where a `frame`-byte frame does not fit it, else None (it fits, or
    ping could not tell: the search then finds out)."""
    done = ex.run(argv(dst, frame, family), timeout=30)
    return parse_mtu(f"{done.stdout}\n{done.stderr}")


def largest_frame(mtu: int) -> int:
    return mtu + FRAME_OVERHEAD
