"""An iperf3 -J output as a run of kind tcp or udp, with the figures `hoplab run` gives.

The run's clock zero is iperf3's test start (start.timestamp): series times are
interval ends as iperf3 printed them. Each stream is one flow
("<test>.1", "<test>.2", ... or just "<test>" for a single stream); the summed
throughput has flow None, and per direction key "up" / "down" when the test
went server -> client (-R) or both ways (--bidir), as in a hoplab run.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hoplab.importers.options import Options
from hoplab.jsonsafe import json_safe
from hoplab.kinds.figures import rate_metrics, udp_metrics
from hoplab.kinds.tcp import received
from hoplab.record import IMPORTED_MEASUREMENT_VERSIONS, Metric, RawOutput, RunRecord, Series
from hoplab.tools import iperf3

_START_KEYS = ("version", "system_info", "timestamp", "connecting_to", "test_start",
               "sock_bufsize", "sndbuf_actual", "rcvbuf_actual")


def _sum(series: Sequence[tuple[list[float], list[float]]]) -> tuple[list[float], list[float]]:
    # The streams of one iperf3 process report on one schedule, but their interval ends
    # differ by microseconds: add the i-th interval of each, at the latest of their ends.
    times: list[float] = []
    total: list[float] = []
    for ts, vs in series:
        for i, (t, v) in enumerate(zip(ts, vs, strict=True)):
            if i == len(times):
                times.append(t)
                total.append(0.0)
            times[i] = max(times[i], t)
            total[i] += v
    return times, total


def _stream_series(res: iperf3.Result) -> dict[int, tuple[list[float], list[float]]]:
    # Receiver-side intervals where the output has them (goodput), else the sender's.
    out = iperf3.throughput_series(res, received=True)
    for sid, pair in iperf3.throughput_series(res, received=False).items():
        out.setdefault(sid, pair)
    return out


def _flow_names(test: str, streams: Sequence[iperf3.Stream]) -> dict[int, str]:
    if len(streams) == 1:
        return {streams[0].id: test}
    return {s.id: f"{test}.{i}" for i, s in enumerate(streams, 1)}


def _direction(res: iperf3.Result, stream: iperf3.Stream) -> str:
    # The client's own view: it sends on upward streams (sender=True).
    if res.bidir:
        return "up" if stream.sender else "down"
    return "down" if res.reverse else "up"


def _stream_metrics(s: iperf3.Stream, flow: str) -> list[Metric]:
    out: list[Metric] = []
    for name, value, unit in (("goodput", s.received_bps, "bit/s"),
                              ("sent_rate", s.sent_bps, "bit/s"),
                              ("retransmits", s.retransmits, "count")):
        if value is not None:
            out.append(Metric(name, float(value), unit, flow=flow))
    return out


def _udp_stream_metrics(res: iperf3.Result, streams: Sequence[iperf3.Stream],
                        names: dict[int, str]) -> list[Metric]:
    """Loss and jitter of a stream that is alone in its direction: that direction's
    (the same counts). iperf3's report of one of several streams has its sender's count
    and the gaps its receiver saw, not what the receiver received, so it gets no loss of
    its own (hoplab's definition needs both counts)."""
    out: list[Metric] = []
    for direction, leg in (("up" if res.bidir else _direction(res, streams[0]), res),
                           ("down", res.bidir_reverse)):
        alone = [s for s in streams if _direction(res, s) == direction]
        if leg is not None and len(alone) == 1:
            out += [m for m in udp_metrics([leg], names[alone[0].id])
                    if m.name in ("loss", "udp_jitter")]
    return out


def _run_metrics(res: iperf3.Result, udp: bool) -> list[Metric]:
    # --bidir: the run's figures count both directions, as a hoplab run's and the summed
    # series do; each direction also has its own goodput.
    rev = res.bidir_reverse
    legs: list[iperf3.Result | iperf3.Totals] = [res] if rev is None else [res, rev]
    # Goodput as a hoplab run's flow has it (a UDP receiver's from its first datagram).
    ways = received(res, "bidir" if rev is not None else "down" if res.reverse else "up")
    goodput = {way: got.goodput for way, got in ways.items()}
    out = [Metric("goodput", math.fsum(goodput.values()), "bit/s"),
           Metric("sent_rate", math.fsum(x.sent_bps for x in legs), "bit/s"),
           Metric("bytes_received", float(sum(x.received_bytes for x in legs)), "bytes")]
    if rev is not None:
        out += [Metric("goodput_up", goodput.get("up", 0.0), "bit/s"),
                Metric("goodput_down", goodput.get("down", 0.0), "bit/s"),
                Metric("goodput_reverse", goodput.get("down", 0.0), "bit/s")]
    elif res.reverse:
        out.append(Metric("goodput_down", goodput.get("down", 0.0), "bit/s"))
    retrans = [x.retransmits for x in legs if x.retransmits is not None]
    if retrans:
        out.append(Metric("retransmits", float(sum(retrans)), "count"))
    if udp:
        out += udp_metrics(legs, None)
    return out


def _started_at(res: iperf3.Result, path: Path) -> float:
    if res.start_unix is not None:
        return res.start_unix
    # iperf3 prints no timestamp when it failed before the test started (connection
    # refused): the file's own time is the closest thing to when it ran.
    return os.stat(path).st_mtime


def _duration(doc: dict[str, Any], res: iperf3.Result) -> float:
    ends = [iv.end for s in res.streams for iv in s.intervals]
    end = doc.get("end") or {}
    seconds = (end.get("sum_sent") or end.get("sum") or {}).get("seconds")
    return float(seconds) if seconds is not None else max(ends, default=0.0)


def to_run(text: str, raw: bytes, path: Path, options: Options) -> RunRecord:
    res = iperf3.parse(text)
    doc: dict[str, Any] = json.loads(text)
    start: dict[str, Any] = doc.get("start") or {}
    test = options.test or path.name.removesuffix(".gz").removesuffix(".json")
    udp = res.protocol.upper() == "UDP"
    streams = sorted(res.streams, key=lambda s: s.id)
    names = _flow_names(test, streams)
    per_stream = _stream_series(res)
    series: list[Series] = []
    by_key: dict[str, list[tuple[list[float], list[float]]]] = {}
    for s in streams:
        if s.id not in per_stream:
            continue
        t, v = per_stream[s.id]
        key = _direction(res, s) if res.bidir else None
        series.append(Series("throughput", "bit/s", list(t), list(v), flow=names[s.id], key=key))
        by_key.setdefault(_direction(res, s), []).append((t, v))
    metrics = [m for s in streams for m in _stream_metrics(s, names[s.id])]
    if udp and streams:
        metrics += _udp_stream_metrics(res, streams, names)
    if per_stream:
        t, v = _sum(list(per_stream.values()))
        series.append(Series("throughput", "bit/s", t, v))
        metrics += rate_metrics(v, None)
        if res.bidir or res.reverse:
            for key in sorted(by_key):
                kt, kv = _sum(by_key[key])
                series.append(Series("throughput", "bit/s", kt, kv, key=key))
                metrics += [Metric(f"{m.name}_{key}", m.value, m.unit)
                            for m in rate_metrics(kv, None)]
    metrics += _run_metrics(res, udp)
    system = str(start.get("system_info") or "")
    meta: dict[str, Any] = {
        "imported_from": {"format": "iperf3", "file": path.name},
        "iperf3": json_safe({k: start[k] for k in _START_KEYS if k in start}
                            | {"cpu_utilization_percent":
                               (doc.get("end") or {}).get("cpu_utilization_percent")}),
        "tools": {"iperf3": res.version},
    }
    if len(system.split()) > 1:
        meta["host"] = system.split()[1]      # uname -a: system, nodename, release, ...
    return RunRecord(
        experiment=options.experiment or "imported", test=test, kind="udp" if udp else "tcp",
        repetition=1, variant={}, labels={"source": "iperf3", **options.labels},
        started_at=_started_at(res, path), duration_s=_duration(doc, res),
        status="failed" if res.error else "ok",
        error=None if res.error is None else f"iperf3: {res.error}",
        measurement_version=IMPORTED_MEASUREMENT_VERSIONS["iperf3"],
        metadata=meta, metrics=metrics,
        series=series, raw=[RawOutput(path.name, raw, "application/json")])
