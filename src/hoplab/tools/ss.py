"""iproute2's `ss -tinH` (6.1): each TCP socket's own state, the kernel's tcp_info, as text.

One socket is two lines: "Recv-Q Send-Q Local:Port Peer:Port" (no state column when a
state filter is given), then a tab-indented line of `key:value` and `key value` fields.
Only the fields hoplab keeps are read; a field the kernel leaves out (no retransmits yet,
no delivery rate before the first ACK) stays None, never 0.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hoplab.tools import ToolOutputError

# The congestion controls Linux ships; the first word of the detail line is one of them.
_RATE = re.compile(r"^(\d+(?:\.\d+)?)([KMG]?)bps$")
_SCALE = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9}


@dataclass(frozen=True)
class Socket:
    local: str
    peer: str
    send_q: int
    congestion: str | None
    cwnd: int | None                 # segments
    srtt_ms: float | None
    rttvar_ms: float | None
    min_rtt_ms: float | None
    mss: int | None
    pacing_rate_bps: float | None
    delivery_rate_bps: float | None
    bytes_sent: int | None
    bytes_acked: int | None
    bytes_retrans: int | None
    retrans_total: int | None        # segments retransmitted over the connection's life
    notsent: int | None

    @property
    def local_port(self) -> int:
        return int(self.local.rpartition(":")[2])

    @property
    def peer_port(self) -> int:
        return int(self.peer.rpartition(":")[2])


def _rate(v: str) -> float:
    m = _RATE.match(v)
    if m is None:
        raise ToolOutputError(f"ss: not a rate: {v!r}")
    return float(m.group(1)) * _SCALE[m.group(2)]


def _fields(detail: str) -> dict[str, str]:
    """`key:value` and `key value` pairs; bare words (app_limited) map to ''."""
    out: dict[str, str] = {}
    words = detail.split()
    i = 0
    while i < len(words):
        w = words[i]
        if ":" in w and not w.startswith("("):
            k, _, v = w.partition(":")
            out[k] = v
        elif w in ("send", "pacing_rate", "delivery_rate") and i + 1 < len(words):
            out[w] = words[i + 1]
            i += 1
        else:
            out.setdefault(w, "")
        i += 1
    return out


def _int(f: dict[str, str], key: str) -> int | None:
    v = f.get(key)
    return int(v) if v not in (None, "") else None


def _socket(head: str, detail: str) -> Socket:
    cols = head.split()
    if len(cols) < 4:
        raise ToolOutputError(f"ss: a socket line has 4 columns: {head!r}")
    _recv_q, send_q, local, peer = cols[-4:]
    f = _fields(detail)
    first = detail.split()[0] if detail.split() else ""
    rtt = f.get("rtt", "")
    srtt, _, var = rtt.partition("/")
    retrans = f.get("retrans", "")
    return Socket(
        local=local, peer=peer, send_q=int(send_q),
        congestion=first if first and ":" not in first else None,
        cwnd=_int(f, "cwnd"),
        srtt_ms=float(srtt) if srtt else None,
        rttvar_ms=float(var) if var else None,
        min_rtt_ms=float(f["minrtt"]) if f.get("minrtt") else None,
        mss=_int(f, "mss"),
        pacing_rate_bps=_rate(f["pacing_rate"]) if f.get("pacing_rate") else None,
        delivery_rate_bps=_rate(f["delivery_rate"]) if f.get("delivery_rate") else None,
        bytes_sent=_int(f, "bytes_sent"),
        bytes_acked=_int(f, "bytes_acked"),
        bytes_retrans=_int(f, "bytes_retrans"),
        retrans_total=int(retrans.partition("/")[2]) if "/" in retrans else None,
        notsent=_int(f, "notsent"),
    )


def parse(text: str) -> list[Socket]:
    """Every socket in `ss -tinH` output, in its order."""
    out: list[Socket] = []
    head: str | None = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith(("\t", " ")) and head is not None:
            out.append(_socket(head, line))
            head = None
        elif not line.startswith(("\t", " ")):
            if head is not None:
                out.append(_socket(head, ""))
            head = line
    if head is not None:
        out.append(_socket(head, ""))
    return out


def argv(peer: str | None = None) -> list[str]:
    """Established TCP sockets with their tcp_info, no header; to `peer` only if given."""
    out = ["ss", "-tinH", "state", "established"]
    if peer is not None:
        out += ["dst", peer]
    return out
