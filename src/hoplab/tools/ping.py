"""iputils ping (20221126) argv and a parser for its ``-D -n -O`` text output.

``-O`` prints "no answer yet for icmp_seq=N" when probe N+1 is sent without a reply to N; a reply
to N may still arrive later and then counts (once). "(DUP!)" replies are ignored.

icmp_seq is 16 bits: probe 65536 is printed as icmp_seq=0, 65537 as 1 (past 3.6 h at 0.2 s).
Each printed number is read as the probe nearest the latest one sent so far, which is right
as long as no reply is more than 32,768 probes late.

A stream that lasts a time is sent as a count of probes (``-c``), never with a deadline
(``-w``): at a deadline ping stops and counts every probe still in flight as lost (an 800 ms
round trip at 0.2 s "loses" the last 4 of 25), and with both ``-c`` and ``-w`` it does not stop
sending at the count. With ``-c`` alone ping sends the probes, then waits for the stragglers:
twice the largest RTT it has seen when the last probe leaves (at least one interval), or
LINGER_S (``-W``) when no reply has come back yet. A probe is lost when its reply has not
come by then; every probe gets at least that long.
"""

from __future__ import annotations

import bisect
import itertools
import math
import re
from dataclasses import dataclass

from hoplab.tools import ToolOutputError, check_family

# iputils allows root any interval but users no less than 2 ms; -s < 16 drops the timing.
MIN_SIZE = 16
# How long ping waits after its last probe when no reply at all has come back (-W).
LINGER_S = 5.0


@dataclass(frozen=True)
class Stream:
    host: str
    interval_s: float = 0.2
    count: int | None = None
    # Send for this long: the probes that leave in [0, duration_s), as a count.
    duration_s: float | None = None
    size: int = 56
    tos: int | None = None
    ipv6: bool = False


def probes_in(duration_s: float, interval_s: float) -> int:
    """How many probes leave in [0, duration_s) at one per interval_s (at least one)."""
    return max(1, math.ceil(duration_s / interval_s - 1e-9))


def argv(s: Stream) -> list[str]:
    """``ping -D -n -O -c N -W LINGER_S`` with an explicit ``-4``/``-6``; TOS (traffic class
    for IPv6) via -Q. N is ``count``, or the probes sent in ``duration_s``."""
    if s.interval_s <= 0 or s.size < MIN_SIZE:
        raise ValueError(f"ping: interval_s must be > 0 and size >= {MIN_SIZE} ({s})")
    if (s.count is None) == (s.duration_s is None):
        raise ValueError("ping: give one of count and duration_s")
    if s.duration_s is not None and s.duration_s <= 0:
        raise ValueError(f"ping: duration_s must be > 0, not {s.duration_s}")
    check_family("ping", s.host, s.ipv6)
    count = s.count if s.count is not None else probes_in(s.duration_s or 0.0, s.interval_s)
    out = ["ping", "-6" if s.ipv6 else "-4", "-D", "-n", "-O", "-i", f"{s.interval_s:g}",
           "-s", str(s.size), "-c", str(count), "-W", f"{LINGER_S:g}"]
    if s.tos is not None:
        out += ["-Q", f"0x{s.tos:02x}"]
    return [*out, s.host]


@dataclass(frozen=True)
class Reply:
    """One probe. ``t_unix`` is its send time: for an answered probe the ``-D`` stamp of the
    reply minus the rtt; otherwise interpolated from its neighbours (``t_estimated``)."""

    seq: int
    t_unix: float
    rtt_s: float | None
    ttl: int | None
    t_estimated: bool = False


@dataclass(frozen=True)
class Result:
    host: str
    replies: tuple[Reply, ...]
    sent: int
    received: int
    loss_pct: float
    rtt_min_s: float | None
    rtt_avg_s: float | None
    rtt_max_s: float | None
    rtt_mdev_s: float | None
    duplicates: int = 0


_REPLY = re.compile(r"^\[(\d+\.\d+)\] \d+ bytes from \S+ icmp_seq=(\d+)(?: ttl=(\d+))?"
                    r"(?: time=([\d.]+) ms)?(?P<dup> \(DUP!\))?")
_NO_ANSWER = re.compile(r"^\[(\d+\.\d+)\] no answer yet for icmp_seq=(\d+)")
_HEADER = re.compile(r"^--- (\S+) ping statistics ---$")
_COUNTS = re.compile(r"^(\d+) packets transmitted, (\d+) received(?:, \+(\d+) duplicates)?"
                     r".*?, ([\d.]+)% packet loss")
_RTT = re.compile(r"^rtt min/avg/max/mdev = ([\d.]+)/([\d.]+)/([\d.]+)/([\d.]+) ms")


SEQ_MODULUS = 2**16


def _unwrap(printed: int, latest: int) -> int:
    """The probe number (1, 2, ... unbounded) printed as icmp_seq `printed`: the one
    nearest `latest`, the highest probe known to have been sent."""
    return printed + SEQ_MODULUS * round((latest - printed) / SEQ_MODULUS)


def _send_times(sent: int, anchors: dict[int, float], default_step: float) -> dict[int, float]:
    known = sorted(anchors)
    steps = [(anchors[b] - anchors[a]) / (b - a) for a, b in itertools.pairwise(known)]
    step = sum(steps) / len(steps) if steps else default_step
    out: dict[int, float] = {}
    for seq in range(1, sent + 1):
        at = bisect.bisect_left(known, seq)
        lo = known[at - 1] if at > 0 else None
        hi = known[at] if at < len(known) else None
        if hi == seq:
            out[seq] = anchors[seq]
        elif lo is not None and hi is not None:
            out[seq] = anchors[lo] + (anchors[hi] - anchors[lo]) * (seq - lo) / (hi - lo)
        elif lo is not None:
            out[seq] = anchors[lo] + step * (seq - lo)
        elif hi is not None:
            out[seq] = anchors[hi] - step * (hi - seq)
    return out


def parse(text: str, *, interval_s: float = 1.0) -> Result:
    """Parse one run. ``interval_s`` is only used to place lost probes when fewer than two send
    times are known (1.0 s is ping's default). ``sent``/``received``/``loss_pct`` come from
    the summary and are checked against the reply lines."""
    answers: dict[int, tuple[float, float | None, int | None]] = {}
    anchors: dict[int, float] = {}
    host, counts, rtt = None, None, None
    latest = 1
    for line in text.splitlines():
        if m := _REPLY.match(line):
            seq = _unwrap(int(m[2]), latest)
            latest = max(latest, seq)
            if m["dup"] or seq in answers:
                continue
            rtt_s = None if m[4] is None else float(m[4]) / 1000
            answers[seq] = (float(m[1]), rtt_s, None if m[3] is None else int(m[3]))
            if rtt_s is not None:
                anchors[seq] = float(m[1]) - rtt_s
        elif m := _NO_ANSWER.match(line):
            # printed as probe N+1 leaves: a send time for N+1 unless its reply gave a better one
            seq = _unwrap(int(m[2]), latest) + 1
            latest = max(latest, seq)
            anchors.setdefault(seq, float(m[1]))
        elif m := _HEADER.match(line):
            host = m[1]
        elif m := _COUNTS.match(line):
            counts = m
        elif m := _RTT.match(line):
            rtt = [float(x) / 1000 for x in m.groups()]
    if host is None or counts is None:
        raise ToolOutputError("ping: no statistics summary (output truncated or ping killed?)")
    sent, received = int(counts[1]), int(counts[2])
    outside = sorted(s for s in answers if not 1 <= s <= sent)
    if len(answers) != received or outside:
        raise ToolOutputError(
            f"ping: summary says {received} of {sent} answered but the reply lines answer "
            f"{len(answers)} probes" + (f", some not sent: {outside[:5]}" if outside else ""))
    times = _send_times(sent, {k: v for k, v in anchors.items() if k <= sent}, interval_s)
    replies = []
    for seq in range(1, sent + 1):
        stamp, rtt_s, ttl = answers.get(seq, (0.0, None, None))
        exact = seq in anchors and rtt_s is not None
        replies.append(Reply(seq, stamp - rtt_s if rtt_s is not None else times.get(seq, 0.0),
                             rtt_s, ttl, t_estimated=not exact))
    return Result(host=host, replies=tuple(replies), sent=sent, received=received,
                  loss_pct=float(counts[4]), rtt_min_s=rtt[0] if rtt else None,
                  rtt_avg_s=rtt[1] if rtt else None, rtt_max_s=rtt[2] if rtt else None,
                  rtt_mdev_s=rtt[3] if rtt else None, duplicates=int(counts[3] or 0))
