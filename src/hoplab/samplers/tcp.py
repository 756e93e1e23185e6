"""TCP retransmission counters of a namespace, cumulative.

`Tcp: RetransSegs` comes from /proc/thread-self/net/snmp (segments sent again),
`TcpExt: TCPLostRetransmit` from /proc/thread-self/net/netstat (retransmissions
that were lost in turn). Both are per network namespace, and read through
thread-self for the reason given in hoplab.samplers.ifaces.
"""

from __future__ import annotations

SNMP = "/proc/thread-self/net/snmp"
NETSTAT = "/proc/thread-self/net/netstat"


def parse_snmp(text: str) -> dict[str, dict[str, int]]:
    """/proc/net/snmp or /proc/net/netstat text to {section: {field: value}}: each
    section is a header line of names followed by a line of values."""
    out: dict[str, dict[str, int]] = {}
    lines = text.splitlines()
    for head, values in zip(lines[::2], lines[1::2], strict=False):
        section, _, names = head.partition(":")
        section2, _, nums = values.partition(":")
        if section != section2:
            raise ValueError(f"snmp: header {section!r} followed by {section2!r}")
        out[section] = dict(zip(names.split(), (int(v) for v in nums.split()), strict=True))
    return out


def tcp_counters(snmp: str, netstat: str | None) -> dict[str, int]:
    """The values the sampler records, keyed by series name."""
    out = {"tcp.retrans_segs": parse_snmp(snmp)["Tcp"]["RetransSegs"]}
    if netstat is not None:
        lost = parse_snmp(netstat).get("TcpExt", {}).get("TCPLostRetransmit")
        if lost is not None:
            out["tcp.lost_retransmit"] = lost
    return out


def read_tcp() -> dict[str, int]:
    with open(SNMP) as f:
        snmp = f.read()
    try:
        with open(NETSTAT) as f:
            netstat: str | None = f.read()
    except FileNotFoundError:
        netstat = None
    return tcp_counters(snmp, netstat)
