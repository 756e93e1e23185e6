"""trafgen (netsniff-ng 0.6.8): argv, the packet configuration of one RFC 2544 test frame,
and a parser for its summary.

RFC 2544 names a frame by its size on the wire including the 4-byte FCS (64 .. 1518);
Linux hands the NIC (and the qdiscs count) the frame without it. A 64-byte frame is
therefore 60 bytes here: Ethernet 14 + IPv4 20 + UDP 8 + 18 bytes of payload. Over IPv6
the headers take 62 bytes, so the smallest frame that carries a UDP datagram with a
payload is 78 (RFC 5180 section 5.1.1, which also asks for 78 so a test tag fits).

trafgen writes frames into a memory-mapped ring; `-q` makes them take the kernel's qdisc
path (trafgen bypasses it by default since Linux 3.14): a lab's shaping of the sender's
own link is part of the path under test. One packet block per flow, sent round robin,
each with its own UDP source port, so a device's RSS spreads the flows over its cores.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass

from hoplab.tools import ToolOutputError

FCS = 4
ETH_HLEN = 14
UDP_HLEN = 8
IP_HLEN = {4: 20, 6: 40}
# RFC 2544 section 9.1's sizes for Ethernet; RFC 5180's smallest over IPv6.
RFC2544_SIZES = (64, 128, 256, 512, 1024, 1280, 1518)
MIN_FRAME = {4: 64, 6: 78}
MAX_FRAME = 1518
# "imix": 7:4:1 of 64, 594 and 1518 bytes (the simple IMIX of RFC 6985's references).
IMIX = ((64, 7), (594, 4), (1518, 1))


@dataclass(frozen=True)
class Stream:
    """One test stream: frames of `frame_size` bytes (FCS included) from src to dst."""

    src_mac: str
    dst_mac: str
    src_ip: str
    dst_ip: str
    frame_size: int
    dport: int
    sport: int = 49152
    flows: int = 1

    @property
    def family(self) -> int:
        return ipaddress.ip_address(self.src_ip).version


def l2_bytes(frame_size: int) -> int:
    """The bytes Linux sends (and a qdisc counts) for an RFC 2544 frame size."""
    return frame_size - FCS


def payload_bytes(frame_size: int, family: int) -> int:
    return l2_bytes(frame_size) - ETH_HLEN - IP_HLEN[family] - UDP_HLEN


def check_size(frame_size: int, family: int) -> None:
    if not MIN_FRAME[family] <= frame_size <= MAX_FRAME:
        raise ValueError(f"a frame over IPv{family} is {MIN_FRAME[family]} to {MAX_FRAME} "
                         f"bytes (FCS included), not {frame_size}")


def _bytes(values: bytes) -> str:
    return ", ".join(f"0x{b:02x}" for b in values)


def _mac(mac: str) -> str:
    return _bytes(bytes(int(x, 16) for x in mac.split(":")))


def _block(s: Stream, sport: int, frame_size: int) -> str:
    payload = payload_bytes(frame_size, s.family)
    udp_len = UDP_HLEN + payload
    src = ipaddress.ip_address(s.src_ip).packed
    dst = ipaddress.ip_address(s.dst_ip).packed
    l4 = ETH_HLEN + IP_HLEN[s.family]
    if s.family == 4:
        ip = (f"0x45, 0x00, c16({IP_HLEN[4] + udp_len}), drnd(2), c16(0x4000), 64, 17, "
              f"csumip({ETH_HLEN}, {l4 - 1}), {_bytes(src)}, {_bytes(dst)}")
        ethertype, csum = "0x0800", f"csumudp({ETH_HLEN}, {l4})"
    else:
        ip = (f"0x60, 0x00, 0x00, 0x00, c16({udp_len}), 17, 64, "
              f"{_bytes(src)}, {_bytes(dst)}")
        ethertype, csum = "0x86dd", f"csumudp6({ETH_HLEN}, {l4})"
    return (f"{{ {_mac(s.dst_mac)}, {_mac(s.src_mac)}, c16({ethertype}), {ip}, "
            f"c16({sport}), c16({s.dport}), c16({udp_len}), {csum}, "
            f"fill(0x55, {payload}) }}")


def config(s: Stream, mix: Sequence[int] = ()) -> str:
    """trafgen's packet configuration: one block per flow (source ports sport, sport+1...)
    and frame size; `mix` gives the sizes of a mixture in their proportions (imix: seven
    64s, four 594s and one 1518), sent round robin; without it, the stream's one size."""
    sizes = tuple(mix) or (s.frame_size,)
    for size in set(sizes):
        check_size(size, s.family)
    if s.flows < 1 or s.sport + s.flows - 1 > 65535:
        raise ValueError(f"flows {s.flows} from source port {s.sport} pass port 65535")
    return "\n".join(_block(s, s.sport + i, size)
                     for size in sizes for i in range(s.flows)) + "\n"


def imix_sizes() -> tuple[int, ...]:
    """The simple IMIX as the sizes of its round-robin cycle."""
    return tuple(size for size, count in IMIX for _ in range(count))


def argv(dev: str, conf: str, frames: int, fps: float | None) -> list[str]:
    """Send `frames` frames through `dev` at `fps` frames/s (None: as fast as it can),
    one sending process, through the qdisc path."""
    if frames < 1:
        raise ValueError(f"trafgen: frames must be at least 1, not {frames}")
    out = ["trafgen", "--dev", dev, "--conf", conf, "--num", str(frames), "--cpus", "1",
           "--qdisc-path", "--no-sock-mem"]
    if fps is not None:
        if fps <= 0:
            raise ValueError(f"trafgen: a rate is above 0 frames/s, not {fps}")
        out += ["--rate", f"{round(fps)}pps"]
    return out


_SENT = re.compile(r"^\s*(\d+) packets outgoing\s*$", re.M)


def frames_sent(text: str) -> int:
    """The frames trafgen says it sent, from its summary."""
    m = _SENT.search(text)
    if m is None:
        raise ToolOutputError(f"trafgen printed no 'packets outgoing' line: {text[-300:]!r}")
    return int(m.group(1))
