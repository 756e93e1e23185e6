"""tc's queueing discipline counters: backlog, drops, overlimits, requeues, sent.

Three sources give the same `QdiscStats`: `parse_tc_json` reads the output of
`tc -s -j qdisc show` (the reference, and what the captured test data is),
`from_netlink` converts pyroute2's RTM_NEWQDISC messages, and `parse_tc_text` reads
`tc -s qdisc show` for devices whose tc has no JSON output (older iproute2 builds,
BusyBox-era firmware; tested against parse_tc_json on captures of one state).

A text qdisc is a header line ("qdisc KIND HANDLE [dev DEV] (root | parent P) ...")
followed by indented statistics lines:
    " Sent B bytes P pkt (dropped D, overlimits O requeues R) "
    " backlog Xb Yp requeues R"
tc prints backlog bytes with a size suffix (b, Kb, Mb, Gb; 1024-based) when the
figure is near a multiple; that rounding is tc's own and is kept.

`lo` and `noqueue` qdiscs are skipped: they never queue, so their counters are
always zero and would only add series.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

_ROOT = 0xFFFFFFFF
_SKIP_KINDS = frozenset({"noqueue"})


@dataclass(frozen=True)
class QdiscStats:
    dev: str
    handle: str          # as tc prints it: "1:", "10:", "8001:"
    kind: str            # htb, pfifo, tbf, fq_codel, ...
    parent: str | None   # None for a root qdisc, else e.g. "1:1"
    sent_bytes: int
    sent_packets: int
    drops: int
    overlimits: int
    requeues: int
    backlog_bytes: int
    backlog_packets: int

    @property
    def key(self) -> str:
        """The series key: "IFACE HANDLE KIND", e.g. "eth1 1: htb"."""
        return f"{self.dev} {self.handle} {self.kind}"


def format_handle(handle: int) -> str:
    """A 32-bit tc handle the way tc prints it: major and minor in hex."""
    if handle == _ROOT:
        return "root"
    major, minor = handle >> 16, handle & 0xFFFF
    return f"{major:x}:" if minor == 0 else f"{major:x}:{minor:x}"


def _wanted(dev: str, kind: str) -> bool:
    return dev != "lo" and kind not in _SKIP_KINDS


def parse_tc_json(text: str) -> list[QdiscStats]:
    """`tc -s -j qdisc show` output to stats, in tc's order."""
    out = []
    for q in json.loads(text):
        if not _wanted(q["dev"], q["kind"]):
            continue
        out.append(QdiscStats(
            dev=q["dev"], handle=q["handle"], kind=q["kind"],
            parent=None if q.get("root") else q.get("parent"),
            sent_bytes=int(q.get("bytes", 0)), sent_packets=int(q.get("packets", 0)),
            drops=int(q.get("drops", 0)), overlimits=int(q.get("overlimits", 0)),
            requeues=int(q.get("requeues", 0)), backlog_bytes=int(q.get("backlog", 0)),
            backlog_packets=int(q.get("qlen", 0))))
    return out


def from_netlink(msgs: Iterable[Any], names: Mapping[int, str]) -> list[QdiscStats]:
    """pyroute2 tcmsg messages to stats; `names` maps ifindex to interface name.
    A qdisc on an index missing from `names` raises KeyError (the caller refreshes)."""
    out = []
    for m in msgs:
        kind = m.get_attr("TCA_KIND")
        dev = names[m["index"]]
        if kind is None or not _wanted(dev, kind):
            continue
        stats2 = m.get_attr("TCA_STATS2")
        basic = stats2.get_attr("TCA_STATS_BASIC") if stats2 is not None else None
        queue = stats2.get_attr("TCA_STATS_QUEUE") if stats2 is not None else None
        basic = basic or {}
        queue = queue or {}
        # TCA_STATS_BASIC carries packets as u32; tc prefers TCA_STATS_PKT64 if sent.
        pkt64 = stats2.get_attr("TCA_STATS_PKT64") if stats2 is not None else None
        out.append(QdiscStats(
            dev=dev, handle=format_handle(m["handle"]), kind=kind,
            parent=None if m["parent"] == _ROOT else format_handle(m["parent"]),
            sent_bytes=int(basic.get("bytes", 0)),
            sent_packets=int(pkt64 if pkt64 is not None else basic.get("packets", 0)),
            drops=int(queue.get("drops", 0)), overlimits=int(queue.get("overlimits", 0)),
            requeues=int(queue.get("requeues", 0)), backlog_bytes=int(queue.get("backlog", 0)),
            backlog_packets=int(queue.get("qlen", 0))))
    return out


_SENT = re.compile(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+) "
                   r"requeues (\d+)\)")
_BACKLOG = re.compile(r"backlog (\d+(?:\.\d+)?)([KMG]?)b (\d+)p")
_SCALE = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}


def parse_tc_text(text: str, dev: str | None = None) -> list[QdiscStats]:
    """Qdiscs in tc's order; `dev` names the interface when tc was asked for one
    device (its lines then carry no "dev")."""
    out: list[QdiscStats] = []
    cur: dict[str, object] | None = None

    def flush() -> None:
        if cur is not None and "sent" in cur:
            qd = str(cur["dev"])
            if _wanted(qd, str(cur["kind"])):
                sent = cur["sent"]
                back = cur.get("backlog", (0, 0))
                assert isinstance(sent, tuple) and isinstance(back, tuple)
                out.append(QdiscStats(
                    dev=qd, handle=str(cur["handle"]), kind=str(cur["kind"]),
                    parent=cur["parent"] if isinstance(cur["parent"], str) else None,
                    sent_bytes=sent[0], sent_packets=sent[1], drops=sent[2],
                    overlimits=sent[3], requeues=sent[4],
                    backlog_bytes=back[0], backlog_packets=back[1]))

    for line in text.splitlines():
        if line.startswith("qdisc "):
            flush()
            words = line.split()
            cur = {"kind": words[1], "handle": words[2], "dev": dev, "parent": None}
            for i, w in enumerate(words[3:-1], start=3):
                if w == "dev":
                    cur["dev"] = words[i + 1]
                elif w == "parent":
                    cur["parent"] = words[i + 1]
            if cur["dev"] is None:
                raise ValueError(f"tc line names no device: {line!r}")
            continue
        if cur is None:
            continue
        if m := _SENT.search(line):
            cur["sent"] = tuple(int(g) for g in m.groups())
        elif m := _BACKLOG.search(line):
            cur["backlog"] = (round(float(m.group(1)) * _SCALE[m.group(2)]), int(m.group(3)))
    flush()
    return out
