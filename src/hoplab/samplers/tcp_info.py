"""Each TCP flow's own state on the node that sends its data: the kernel's tcp_info
(what `ss -tin` prints), at the samplers' interval (10 Hz by default).

A namespace's counter source dumps its established TCP sockets over netlink once per
tick (hoplab.tools.inet_diag: 0.8 ms of CPU per sample with one flow, where a forked
`ss -tinH` costs 3.1 ms: bench/tcp_info.py); this module picks each flow's data socket
among them and names the series. Which socket: on the node of the flow's client, the
one whose peer is the server's port; on the server's node (a download), the one whose
own port it is.
iperf3 makes two connections to that port, its control connection first, so the data
socket is the one that has carried the most (bytes sent and not yet sent), chosen once
it has carried DATA_FLOOR bytes (the control connection's exchange before the test is
a few hundred) and kept while it lives: the control connection's report at the end
never replaces it. A --bidir flow's two data sockets are told apart by their nodes.

Series per flow and node (units in hoplab.metrics): tcp.cwnd, tcp.srtt, tcp.rttvar,
tcp.pacing_rate, tcp.delivery_rate, tcp.retrans (segments retransmitted over the
connection's life), and what RFC 6349's figures are computed from (hoplab.analysis.
rfc6349): tcp.min_rtt, tcp.bytes_sent, tcp.bytes_retrans. A value the kernel has not
got yet (a delivery rate before the first ACK) is left out, never recorded as zero.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from hoplab.tools.ss import Socket

# Bytes a socket must have carried before it is taken for a flow's data socket.
DATA_FLOOR = 4096

# (series, Socket field): the values recorded per flow, gauges then counters.
SERIES: tuple[tuple[str, str], ...] = (
    ("tcp.cwnd", "cwnd"),
    ("tcp.srtt", "srtt_ms"),
    ("tcp.rttvar", "rttvar_ms"),
    ("tcp.pacing_rate", "pacing_rate_bps"),
    ("tcp.delivery_rate", "delivery_rate_bps"),
    ("tcp.min_rtt", "min_rtt_ms"),
    ("tcp.retrans", "retrans_total"),
    ("tcp.bytes_sent", "bytes_sent"),
    ("tcp.bytes_retrans", "bytes_retrans"),
)
NAMES = frozenset(name for name, _ in SERIES)
# Counted over the connection's life (the others are its state at the sample).
COUNTERS = frozenset({"tcp.retrans", "tcp.bytes_sent", "tcp.bytes_retrans"})


@dataclass(frozen=True)
class FlowSocket:
    """Where one flow's data leaves a node: by the server's `port`, the socket's own
    (`local`: the node is the server's, sending a download) or its peer's. `key` tells
    the two senders of a --bidir flow apart ("up", "down"); None otherwise."""

    flow: str
    port: int
    local: bool
    key: str | None = None

    def matches(self, s: Socket) -> bool:
        return (s.local_port if self.local else s.peer_port) == self.port


def _carried(s: Socket) -> int:
    return (s.bytes_sent or 0) + (s.notsent or 0)


class Picker:
    """Each flow's data socket on one node, chosen once and kept (see module doc)."""

    def __init__(self, flows: Sequence[FlowSocket]) -> None:
        self.flows = tuple(flows)
        self._chosen: dict[FlowSocket, tuple[str, str]] = {}

    def pick(self, sockets: Iterable[Socket]) -> Iterator[tuple[FlowSocket, Socket]]:
        socks = list(sockets)
        for f in self.flows:
            chosen = self._chosen.get(f)
            if chosen is None:
                mine = [s for s in socks if f.matches(s) and _carried(s) >= DATA_FLOOR]
                if not mine:
                    continue
                best = max(mine, key=_carried)
                chosen = self._chosen[f] = (best.local, best.peer)
            found = next((s for s in socks if (s.local, s.peer) == chosen), None)
            if found is not None:
                yield f, found


def values(s: Socket) -> Iterator[tuple[str, float]]:
    """(series, value) of one sample of a flow's socket; unknown values left out."""
    for name, field in SERIES:
        v = getattr(s, field)
        if v is not None:
            yield name, float(v)
