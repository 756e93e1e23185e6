"""iperf3 (3.12) client/server argv and a parser for its ``-J`` output.

Semantics, checked against the real 3.12 output in tests/data/iperf3:

* Main direction: client -> server, or server -> client with ``-R``. ``sent_*`` are the data
  sender's counters (``end.sum_sent``), ``received_*`` the receiver's (``end.sum_received``):
  received bytes are the goodput. With ``--bidir`` the main direction is client -> server and
  :attr:`Result.bidir_reverse` holds server -> client (``end.sum_*_bidir_reverse``).
* ``sender`` flags are iperf3's: True when the reporting host sends on the stream, so its
  intervals are sender-side counts. The client measures only its own side; receiver-side upload
  intervals need ``--get-server-output`` with a ``-J`` server and land in :attr:`Result.server`.
* UDP: ``sent_packets`` is the sender's count of datagrams (``sum_sent``); ``packets``,
  ``lost_packets``, jitter and out-of-order are the receiver's (``sum_received``), where
  ``packets`` is the highest sequence number it saw and ``lost_packets`` the gaps below it, so
  it received ``packets - lost_packets``. Datagrams sent after the last one it saw (still queued
  or in flight when it stopped counting) are in neither. iperf3's ``lost_percent`` is
  ``lost_packets`` over the sender's count. A UDP stream's one ``udp`` summary has sent bytes
  only: ``bytes_received`` None.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hoplab.tools import ToolOutputError, check_family, load_json

Obj = dict[str, Any]


@dataclass(frozen=True)
class Client:
    """One iperf3 client run. Address literals must match ``ipv6``; names resolve per ``-4/-6``."""

    host: str
    port: int = 5201
    duration_s: float | None = None
    bytes: int | None = None
    udp: bool = False
    rate_bps: int | None = None
    length: int | None = None
    reverse: bool = False
    bidir: bool = False
    parallel: int = 1
    cport: int | None = None
    congestion: str | None = None
    affinity: str | None = None
    tos: int | None = None
    interval_s: float = 0.2
    omit_s: float = 0
    bind: str | None = None
    connect_timeout_ms: int | None = 3000
    ipv6: bool = False
    get_server_output: bool = False


def _whole(name: str, value: float) -> str:
    if value != int(value) or value < 0:  # iperf3 3.12 reads -t/-O with atoi(): 1.5 -> 1
        raise ValueError(f"iperf3: {name} must be a whole number of seconds, got {value}")
    return str(int(value))


def client_argv(c: Client) -> list[str]:
    """The argv for ``c``: always ``-J`` and an explicit ``-4``/``-6``."""
    if (c.duration_s is None) == (c.bytes is None):
        raise ValueError("iperf3: give exactly one of duration_s and bytes")
    if c.reverse and c.bidir:
        raise ValueError("iperf3: reverse and bidir exclude each other")
    if c.parallel < 1 or c.interval_s <= 0 or (c.bytes is not None and c.bytes <= 0):
        raise ValueError(f"iperf3: parallel, interval_s and bytes must be > 0 ({c})")
    if c.cport is not None and not 1 <= c.cport <= 65536 - c.parallel:
        raise ValueError(f"iperf3: cport {c.cport}..{c.cport + c.parallel - 1} is out of range")
    check_family("iperf3", c.host, c.ipv6)
    argv = ["iperf3", "-c", c.host, "-p", str(c.port), "-J", "-6" if c.ipv6 else "-4"]
    flag_on = ""  # a flag without a value
    opts: list[tuple[str, object | None]] = [
        ("-t", None if c.duration_s is None else _whole("duration_s", c.duration_s)),
        ("-n", c.bytes), ("-i", f"{c.interval_s:g}"),
        ("-O", _whole("omit_s", c.omit_s) if c.omit_s else None),
        ("-u", flag_on if c.udp else None), ("-b", c.rate_bps), ("-l", c.length),
        ("-R", flag_on if c.reverse else None), ("--bidir", flag_on if c.bidir else None),
        ("-P", c.parallel if c.parallel != 1 else None), ("--cport", c.cport),
        ("-C", c.congestion), ("-A", c.affinity), ("-S", c.tos), ("-B", c.bind),
        ("--connect-timeout", c.connect_timeout_ms),
        ("--get-server-output", flag_on if c.get_server_output else None),
    ]
    for flag, v in opts:
        if v is not None:
            argv += [flag] if v is flag_on else [flag, str(v)]
    return argv


def server_argv(port: int, *, bind: str | None = None, affinity: str | None = None,
                interval_s: float = 0.2) -> list[str]:
    """A one-off (``-1``) server. ``-J`` and ``-i`` make ``--get-server-output`` return JSON
    intervals at the client's step, which give receiver-side series for uploads."""
    argv = ["iperf3", "-s", "-1", "-p", str(port), "-J", "-i", f"{interval_s:g}"]
    for flag, v in (("-B", bind), ("-A", affinity)):
        argv += [] if v is None else [flag, v]
    return argv


@dataclass(frozen=True)
class Interval:
    """One reporting step of one stream, measured on the reporting host (see ``sender``)."""

    start: float
    end: float
    bytes: int
    bits_per_second: float
    retransmits: int | None = None
    snd_cwnd: int | None = None
    rtt_s: float | None = None
    packets: int | None = None
    lost_packets: int | None = None
    jitter_s: float | None = None
    sender: bool = True


@dataclass(frozen=True)
class Stream:
    """One connection. ``id`` is iperf3's socket number and ``sender`` is True when the
    reporting host (the client, or the server in :attr:`Result.server`) sends on it."""

    id: int
    local_port: int
    remote_port: int
    sender: bool
    intervals: tuple[Interval, ...]
    bytes_sent: int | None
    bytes_received: int | None
    seconds: float
    sent_bps: float | None
    received_bps: float | None
    retransmits: int | None
    jitter_s: float | None
    lost_packets: int | None
    packets: int | None
    lost_percent: float | None
    out_of_order: int | None


@dataclass(frozen=True)
class Totals:
    """Sums for one direction of the test (see the module docstring)."""

    sent_bytes: int
    received_bytes: int
    sent_bps: float
    received_bps: float
    retransmits: int | None
    lost_packets: int | None
    packets: int | None
    lost_percent: float | None
    jitter_s: float | None
    out_of_order: int | None
    sent_packets: int | None = None


@dataclass(frozen=True)
class Result:
    """A parsed run. ``version`` is e.g. "3.12"; ``protocol`` is "" if iperf3 failed before
    the test started. A failed run has ``error`` set and keeps whatever was measured."""

    version: str
    protocol: str
    reverse: bool
    bidir: bool
    start_unix: float | None
    streams: tuple[Stream, ...]
    sent_bytes: int
    received_bytes: int
    sent_bps: float
    received_bps: float
    retransmits: int | None
    lost_packets: int | None
    packets: int | None
    lost_percent: float | None
    jitter_s: float | None
    out_of_order: int | None
    cpu_host_pct: float | None
    cpu_remote_pct: float | None
    error: str | None
    bidir_reverse: Totals | None = None
    server: Result | None = None
    sent_packets: int | None = None

    @property
    def reverse_received_bps(self) -> float | None:
        """Goodput server -> client of a ``--bidir`` run, else None."""
        return self.bidir_reverse.received_bps if self.bidir_reverse else None


def _num(d: Obj, key: str, scale: float = 1.0) -> float | None:
    return None if d.get(key) is None else float(d[key]) * scale


def _int(d: Obj, key: str) -> int | None:
    return None if d.get(key) is None else int(d[key])


def _interval(d: Obj) -> Interval:
    return Interval(
        start=float(d["start"]), end=float(d["end"]), bytes=int(d["bytes"]),
        bits_per_second=float(d["bits_per_second"]), retransmits=_int(d, "retransmits"),
        snd_cwnd=_int(d, "snd_cwnd"), rtt_s=_num(d, "rtt", 1e-6),  # iperf3 reports rtt in µs
        packets=_int(d, "packets"), lost_packets=_int(d, "lost_packets"),
        jitter_s=_num(d, "jitter_ms", 1e-3), sender=bool(d.get("sender", True)))


def _stream(sock: int, ports: tuple[int, int], ivs: list[Interval], end: Obj | None,
            default_sender: bool) -> Stream:
    udp = (end or {}).get("udp")
    snd: Obj = (end or {}).get("sender") or udp or {}
    rcv: Obj = (end or {}).get("receiver") or {}
    sender = bool(snd.get("sender", ivs[0].sender if ivs else default_sender))
    return Stream(
        id=sock, local_port=ports[0], remote_port=ports[1], sender=sender, intervals=tuple(ivs),
        bytes_sent=_int(snd, "bytes"), bytes_received=_int(rcv, "bytes"),
        seconds=float(snd.get("seconds", ivs[-1].end if ivs else 0.0)),
        sent_bps=_num(snd, "bits_per_second"), received_bps=_num(rcv, "bits_per_second"),
        retransmits=_int(snd, "retransmits"),
        jitter_s=_num(snd, "jitter_ms", 1e-3) if udp else None,
        lost_packets=_int(snd, "lost_packets"), packets=_int(snd, "packets"),
        lost_percent=_num(snd, "lost_percent"), out_of_order=_int(snd, "out_of_order"))


def _totals(end: Obj, suffix: str, streams: list[Stream], sender: bool) -> Totals | None:
    sent = end.get("sum_sent" + suffix) or end.get("sum" + suffix)
    rcvd = end.get("sum_received" + suffix) or end.get("sum" + suffix)
    if sent is None or rcvd is None:
        return None
    ooo = [s.out_of_order for s in streams if s.sender == sender and s.out_of_order is not None]
    return Totals(
        sent_bytes=int(sent["bytes"]), received_bytes=int(rcvd["bytes"]),
        sent_bps=float(sent["bits_per_second"]), received_bps=float(rcvd["bits_per_second"]),
        retransmits=_int(sent, "retransmits"), lost_packets=_int(rcvd, "lost_packets"),
        packets=_int(rcvd, "packets"), lost_percent=_num(rcvd, "lost_percent"),
        jitter_s=_num(rcvd, "jitter_ms", 1e-3), out_of_order=sum(ooo) if ooo else None,
        sent_packets=_int(sent, "packets"))


def _result(doc: Obj) -> Result:
    start: Obj = doc.get("start") or {}
    end: Obj = doc.get("end") or {}
    ts: Obj = start.get("test_start") or {}
    reverse = bool(ts.get("reverse", 0))
    ports = {int(c["socket"]): (int(c["local_port"]), int(c["remote_port"]))
             for c in start.get("connected", [])}
    ivs: dict[int, list[Interval]] = {s: [] for s in ports}
    for step in doc.get("intervals", []):
        for d in step["streams"]:
            ivs.setdefault(int(d["socket"]), []).append(_interval(d))
    ends: dict[int, Obj] = {}
    for e in end.get("streams", []):
        one = e.get("udp") or e.get("sender") or e.get("receiver")
        ends[int(one["socket"])] = e
    streams = [_stream(s, ports.get(s, (0, 0)), ivs[s], ends.get(s), not reverse) for s in ivs]
    # test_start has no bidir flag in 3.12; the reverse sums or mixed stream sides show it.
    bidir = "sum_sent_bidir_reverse" in end or len({s.sender for s in streams}) > 1
    main = _totals(end, "", streams, not reverse) or Totals(0, 0, 0.0, 0.0, *[None] * 6)
    cpu: Obj = end.get("cpu_utilization_percent") or {}
    server = doc.get("server_output_json")
    return Result(
        version=str(start.get("version", "")).removeprefix("iperf "),
        protocol=str(ts.get("protocol", "")), reverse=reverse, bidir=bidir,
        start_unix=_num(start.get("timestamp") or {}, "timesecs"), streams=tuple(streams),
        sent_bytes=main.sent_bytes, received_bytes=main.received_bytes, sent_bps=main.sent_bps,
        received_bps=main.received_bps, retransmits=main.retransmits,
        lost_packets=main.lost_packets, packets=main.packets, lost_percent=main.lost_percent,
        jitter_s=main.jitter_s, out_of_order=main.out_of_order,
        cpu_host_pct=_num(cpu, "host_total"), cpu_remote_pct=_num(cpu, "remote_total"),
        error=doc.get("error"),
        bidir_reverse=_totals(end, "_bidir_reverse", streams, False) if bidir else None,
        server=_result(server) if isinstance(server, dict) else None,
        sent_packets=main.sent_packets)


def parse(text: str) -> Result:
    """Parse one ``iperf3 -J`` document (client or server)."""
    doc = load_json("iperf3", text)
    if "start" not in doc:
        raise ToolOutputError("iperf3: output is JSON but not an iperf3 -J report (no 'start')")
    try:
        return _result(doc)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ToolOutputError(f"iperf3: unexpected JSON layout ({type(e).__name__}: {e})") from None


def datagrams(t: Result | Totals) -> tuple[int, int] | None:
    """(sent, received): a UDP direction's datagrams by its sender's count, and those its
    receiver saw (its highest sequence number less the gaps below it). None when the
    report has no counts (TCP, or a test that failed before it started)."""
    if t.packets is None or t.lost_packets is None:
        return None
    received = max(0, t.packets - t.lost_packets)
    return (t.packets if t.sent_packets is None else t.sent_packets), received


def received_steps(result: Result, *, upward: bool) -> list[tuple[float, float, int]]:
    """One direction's receiver-side report intervals, added over its streams: (start,
    end, bytes) on the receiver's clock. `upward` (client -> server) is received by the
    server, so it needs the server's report (``--get-server-output``); empty where the
    output has no receiver-side intervals for that direction."""
    source = result.server if upward else result
    if source is None:
        return []
    steps: list[tuple[float, float, int]] = []
    for s in source.streams:
        if s.sender:
            continue
        for i, iv in enumerate(s.intervals):
            if i == len(steps):
                steps.append((iv.start, iv.end, 0))
            start, end, nbytes = steps[i]
            # The streams of one process report on one schedule, their ends microseconds
            # apart.
            steps[i] = (min(start, iv.start), max(end, iv.end), nbytes + iv.bytes)
    return steps


def throughput_series(result: Result, *, received: bool = True
                      ) -> dict[int, tuple[list[float], list[float]]]:
    """Per stream id: (interval end in seconds since the test start, bits/s).

    ``received=True`` keeps streams whose intervals were measured at the receiver (the client's
    ``-R``/``--bidir`` reverse streams, and the server's upload streams if ``result.server`` is
    set, keyed by the client's stream id); ``received=False`` the sender-measured ones.
    """
    out: dict[int, tuple[list[float], list[float]]] = {}
    by_port = {s.local_port: s.id for s in result.streams}
    sources = [(result, False)] + ([(result.server, True)] if result.server else [])
    for res, from_server in sources:
        for s in res.streams:
            if s.sender == received or not s.intervals:
                continue
            sid = by_port.get(s.remote_port, s.id) if from_server else s.id
            out.setdefault(sid, ([i.end for i in s.intervals],
                                 [i.bits_per_second for i in s.intervals]))
    return out
