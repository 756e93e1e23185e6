"""`tc -s qdisc show` text to QdiscStats, for devices whose tc has no JSON output
(older iproute2 builds, BusyBox-era firmware). The same fields and skips as
hoplab.samplers.qdisc.parse_tc_json; tested against it on captures of one state.

A qdisc is a header line ("qdisc KIND HANDLE [dev DEV] (root | parent P) ...")
followed by indented statistics lines:
    " Sent B bytes P pkt (dropped D, overlimits O requeues R) "
    " backlog Xb Yp requeues R"
tc prints backlog bytes with a size suffix (b, Kb, Mb, Gb; 1024-based) when the
figure is near a multiple; that rounding is tc's own and is kept.
"""

from __future__ import annotations

import re

from hoplab.samplers.qdisc import QdiscStats

_SENT = re.compile(r"Sent (\d+) bytes (\d+) pkt \(dropped (\d+), overlimits (\d+) "
                   r"requeues (\d+)\)")
_BACKLOG = re.compile(r"backlog (\d+(?:\.\d+)?)([KMG]?)b (\d+)p")
_SCALE = {"": 1, "K": 1024, "M": 1024 ** 2, "G": 1024 ** 3}
_SKIP_KINDS = frozenset({"noqueue"})


def parse_tc_text(text: str, dev: str | None = None) -> list[QdiscStats]:
    """Qdiscs in tc's order; `dev` names the interface when tc was asked for one
    device (its lines then carry no "dev")."""
    out: list[QdiscStats] = []
    cur: dict[str, object] | None = None

    def flush() -> None:
        if cur is not None and "sent" in cur:
            qd = str(cur["dev"])
            if qd != "lo" and cur["kind"] not in _SKIP_KINDS:
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
