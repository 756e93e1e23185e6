"""Every plot kind draws the right data: checked on matplotlib's artists, not just files."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle

from hoplab.errors import UsageError
from hoplab.export import from_json
from hoplab.record import Metric, RunRecord, Series
from hoplab.render import plot_parts
from hoplab.render.plot_kinds import KINDS, SINGLE_RUN
from hoplab.render.plot_parts import decimate
from hoplab.render.plots import figure, save

DATA = Path(__file__).resolve().parents[1] / "data"

PHASES = [{"name": "idle", "start_s": 0.0, "end_s": 2.0},
          {"name": "load", "start_s": 2.0, "end_s": 8.0},
          {"name": "idle-after", "start_s": 8.0, "end_s": 10.0}]


def make_run(run_id: int = 1, hops: int = 1, rep: int = 1, goodput: float = 90e6,
             rtt: tuple[float, ...] = (1.0, 2.0, 3.0, 10.0)) -> RunRecord:
    t = [0.2 * i for i in range(1, 51)]
    f1 = [40e6 + 1e5 * i for i in range(50)]
    f2 = [50e6 - 1e5 * i for i in range(50)]
    cpu = [Series(f"cpu.{part}", "%", t, [base + (i % 3) for i in range(50)], node="r1",
                  key=core)
           for core in ("all", "cpu0", "cpu1")
           for part, base in (("user", 5.0), ("system", 10.0), ("irq", 1.0), ("softirq", 30.0),
                              ("idle", 50.0))]
    return RunRecord(
        experiment="exp", test="tcp-up", kind="tcp", repetition=rep, variant={"hops": hops},
        labels={}, started_at=1.7e9, duration_s=10.0, id=run_id,
        metadata={"test": {"phases": PHASES,
                           "flows": [{"name": "ping.be", "dst": "server", "tos": 0},
                                     {"name": "ping.ef", "dst": "server", "tos": 0xB8}]}},
        metrics=[Metric("goodput", goodput, "bit/s"), Metric("rtt_median", 2.5, "ms")],
        series=[Series("throughput", "bit/s", t, f1, flow="tcp-up.1"),
                Series("throughput", "bit/s", t, f2, flow="tcp-up.2"),
                Series("throughput", "bit/s", t, [a + b for a, b in zip(f1, f2, strict=True)]),
                Series("rtt", "ms", [0.5 * i for i in range(len(rtt))], list(rtt),
                       flow="ping.be"),
                Series("rtt", "ms", [0.5 * i for i in range(len(rtt))], [r * 2 for r in rtt],
                       flow="ping.ef"),
                Series("lost", "count", [0.7], [1.0], flow="ping.ef"), *cpu])


def lines(fig: Figure) -> list[Line2D]:
    return [ln for ax in fig.axes for ln in ax.get_lines()]


def label(line: Line2D) -> str:
    return str(line.get_label())


def xs(line: Line2D) -> np.ndarray:
    return np.asarray(line.get_xdata())


def ys(line: Line2D) -> np.ndarray:
    return np.asarray(line.get_ydata())


@pytest.mark.parametrize("suffix", [".png", ".svg", ".pdf"])
@pytest.mark.parametrize("kind", KINDS)
def test_every_kind_renders_to_every_format(kind: str, suffix: str, tmp_path: Path) -> None:
    runs = [_throughput_run()] if kind == "throughput" else [_tcp_run()] \
        if kind == "tcpinfo" else [make_run()] if kind in SINGLE_RUN else [
        make_run(i, hops=h, rep=r, goodput=80e6 + i * 1e6)
        for i, (h, r) in enumerate([(1, 1), (1, 2), (2, 1), (2, 2)], 1)]
    out = save(figure(kind, runs), tmp_path / f"x{suffix}")
    head = out.read_bytes()[:8]
    assert {".png": head.startswith(b"\x89PNG"), ".pdf": head.startswith(b"%PDF"),
            ".svg": b"<svg" in out.read_bytes()[:2000]}[suffix]


def _throughput_run() -> RunRecord:
    """A real RFC 2544 run: 64, 512 and 1518-byte frames through 50 Mbit/s."""
    doc = json.loads(gzip.decompress((DATA / "throughput_runs" / "ndr-50mbit.json.gz")
                                     .read_bytes()))
    return from_json(doc)


def test_throughput_draws_the_stored_ndr_and_the_generator_ceiling() -> None:
    run = _throughput_run()
    fig = figure("throughput", [run])
    fps_ax, bps_ax = fig.axes
    ndr, ceiling = fps_ax.get_lines()[:2]
    sizes = ["64", "512", "1518"]
    assert [t.get_text() for t in fps_ax.get_xticklabels()] == sizes
    assert list(ys(ndr)) == [run.metric("ndr_fps", key=k) for k in sizes]
    assert list(ys(ceiling)) == [run.metric("generator_fps", key=k) for k in sizes]
    (mbit,) = bps_ax.get_lines()
    assert list(ys(mbit)) == pytest.approx([(run.metric("ndr_bps", key=k) or 0) / 1e6
                                            for k in sizes])
    with pytest.raises(UsageError, match="no run has RFC 2544 throughput figures"):
        figure("throughput", [make_run()])


def test_the_ndr_axes_are_linear_from_zero_and_the_ceiling_shows_under_the_result() -> None:
    # Issue 27: a log axis over 2.2-2.34 x 10^5 made 6 % look like a cliff, and a
    # generator-limited answer hid its ceiling line exactly.
    run = _throughput_run()
    fig = figure("throughput", [run])
    for ax in fig.axes:
        assert ax.get_yscale() == "linear" and ax.get_ylim()[0] == 0
    ndr, ceiling = fig.axes[0].get_lines()[:2]
    assert ceiling.get_linewidth() >= 4 * ndr.get_linewidth()
    assert ceiling.get_zorder() < ndr.get_zorder() and (ceiling.get_alpha() or 1) < 0.5


def test_throughput_draws_the_frame_loss_curve_where_a_run_has_one() -> None:
    run = _throughput_run()
    for pct, loss in [(100, 97.9), (90, 97.7), (80, 97.4)]:
        run.metrics.append(Metric("frame_loss", loss, "%", key=f"1518 {pct}%"))
    fig = figure("throughput", [run])
    assert len(fig.axes) == 3
    (curve,) = fig.axes[2].get_lines()
    assert list(xs(curve)) == [80, 90, 100] and list(ys(curve)) == [97.4, 97.7, 97.9]
    assert "1518 B" in label(curve) and "frame loss" in fig.axes[2].get_ylabel()
    assert len(figure("throughput", [_throughput_run()]).axes) == 2


def test_timeseries_total_is_the_summed_series_and_phases_are_marked() -> None:
    run = make_run()
    fig = figure("timeseries", [run])
    total = next(ln for ln in lines(fig) if label(ln).startswith("total"))
    summed = np.asarray(run.series[0].v) + np.asarray(run.series[1].v)
    assert np.allclose(ys(total) * 1e6, summed)   # drawn in Mbit/s
    assert "Mbit/s" in fig.axes[0].get_ylabel() and fig.axes[1].get_ylabel() == "RTT (ms)"
    flows = {label(ln) for ln in lines(fig)}
    assert {"tcp-up.1", "tcp-up.2", "ping.be", "ping.ef"} <= flows
    boundaries = [xs(ln)[0] for ln in lines(fig) if label(ln) == "_phase"]
    assert sorted(set(boundaries)) == [2.0, 8.0]


def test_decimation_keeps_extremes_and_the_legend_stays_exact() -> None:
    n = 100_000
    v = np.ones(n)
    v[31_337] = 1000.0
    v[77_777] = -5.0
    t, d = decimate(np.arange(n, dtype=float), v)
    assert len(d) <= plot_parts.MAX_POINTS + 2
    assert d.max() == 1000.0 and d.min() == -5.0 and t[0] == 0 and t[-1] == n - 1
    assert list(t) == sorted(t)
    run = make_run(rtt=tuple(float(x) for x in range(20_000)))
    run.metadata["test"]["phases"] = []             # one phase: one curve of the run
    fig = figure("cdf", [run])
    (line,) = lines(fig)
    assert len(xs(line)) <= plot_parts.MAX_POINTS + 2
    every = np.concatenate([range(20_000), np.arange(20_000) * 2.0])
    assert f"n={len(every)}" in label(line)
    # The legend quotes the run's stored median (what show prints), not the drawn points'.
    assert "median 2.500 ms" in label(line)


def test_cdf_ends_at_one_per_run() -> None:
    runs = [make_run(1, rtt=(5.0, 1.0, 3.0)), make_run(2, rtt=(2.0, 2.0, 9.0, 4.0))]
    for run in runs:
        run.metadata["test"]["phases"] = []
    fig = figure("cdf", runs)
    drawn = lines(fig)
    assert len(drawn) == 2
    for ln, run in zip(drawn, runs, strict=True):
        x, y = xs(ln), ys(ln)
        values = sorted(v for s in run.series if s.name == "rtt" for v in s.v)
        assert y[-1] == 1.0 and x[-1] == values[-1] and x[0] == values[0]
        assert np.all(np.diff(y) > 0) and y[0] == pytest.approx(1 / len(values))
        assert f"#{run.id}" in label(ln)


def _variant_runs() -> list[RunRecord]:
    values = {1: [90e6, 95e6, 70e6], 2: [40e6, 45e6, 44e6], 4: [20e6, 22e6, 21e6]}
    return [make_run(10 * h + r, hops=h, rep=r, goodput=g)
            for h, gs in values.items() for r, g in enumerate(gs, 1)]


def test_bar_heights_are_medians_with_min_max_error_bars() -> None:
    runs = _variant_runs()
    runs.append(make_run(99, hops=4, rep=4, goodput=1e9))
    runs[-1].status = "failed"          # a failed run is left out, not averaged in
    fig = figure("bars", runs)
    ax = fig.axes[0]
    heights = [p.get_height() for p in ax.patches if isinstance(p, Rectangle)]
    assert heights == pytest.approx([90.0, 44.0, 21.0])   # Mbit/s
    assert [t.get_text() for t in ax.get_xticklabels()] == ["hops=1", "hops=2", "hops=4"]
    caps = sorted(float(y) for ln in ax.get_lines() for y in ys(ln))
    assert min(caps) == pytest.approx(20.0) and max(caps) == pytest.approx(95.0)
    assert "1 run(s) without it or not ok left out" in fig.texts[0].get_text()


def test_bars_colour_the_second_matrix_key() -> None:
    runs = [make_run(i, hops=h, goodput=g) for i, (h, g) in enumerate(
        [(1, 10e6), (2, 20e6)], 1)]
    for run, wg in zip(runs, (False, True), strict=True):
        run.variant["wireguard"] = wg
    runs += [make_run(3, hops=1, goodput=30e6), make_run(4, hops=2, goodput=40e6)]
    runs[2].variant["wireguard"] = True
    runs[3].variant["wireguard"] = False
    ax = figure("bars", runs).axes[0]
    legend = ax.get_legend()
    assert legend is not None
    assert [t.get_text() for t in legend.get_texts()] == ["wireguard=false", "wireguard=true"]
    assert len(ax.patches) == 4


def test_box_medians_per_variant_over_repetitions() -> None:
    fig = figure("box", _variant_runs(), metric="goodput")
    medians = {ln.get_gid(): float(ys(ln)[0]) for ln in lines(fig)
               if (ln.get_gid() or "").startswith("median")}
    assert medians == pytest.approx({"median hops=1": 90.0, "median hops=2": 44.0,
                                     "median hops=4": 21.0})
    assert fig.axes[0].get_ylabel() == "goodput (Mbit/s)"


def test_cpu_stack_tops_at_user_system_irq_softirq() -> None:
    run = make_run()
    fig = figure("cpu", [run])
    assert len(fig.axes) == 2            # cpu0, cpu1; "all" left out beside them
    top = next(ln for ln in fig.axes[0].get_lines() if label(ln) == "busy (sum)")
    parts = [s for s in run.series if s.key == "cpu0" and s.name in (
        "cpu.user", "cpu.system", "cpu.irq", "cpu.softirq")]
    assert np.allclose(ys(top), np.sum([s.v for s in parts], axis=0))
    assert len(fig.axes[0].collections) == 4      # one stacked layer per part


@pytest.mark.parametrize("style", ["lines", "points"])
def test_ping_streams_named_by_tos_and_destination(style: str) -> None:
    fig = figure("ping", [make_run()], style=style)
    labels = [label(ln) for ln in lines(fig) if not label(ln).startswith("_")]
    assert labels[0].startswith("ping.be (to server, TOS 0x00)")
    assert labels[1].startswith("ping.ef (to server, TOS 0xb8)")
    assert labels[2] == "lost (1)"
    stream = lines(fig)[0]
    assert (stream.get_linestyle() == "None") == (style == "points")


def test_refusals_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="draws one run"):
        figure("timeseries", [make_run(1), make_run(2)])
    empty = make_run()
    empty.series = []
    for kind in ("timeseries", "ping", "cpu", "cdf"):
        with pytest.raises(UsageError):
            figure(kind, [empty])
    with pytest.raises(UsageError, match="metric 'nope'"):
        figure("bars", [make_run()], metric="nope")
    with pytest.raises(UsageError, match=r"\.png"):
        save(figure("cdf", [make_run()]), tmp_path / "x.jpg")


def test_timeline_lays_runs_end_to_end() -> None:
    a, b = make_run(run_id=3, hops=1), make_run(run_id=1, hops=2)
    fig = figure("timeline", [a, b], flow="tcp-up")
    drawn = lines(fig)
    assert len(drawn) == 2
    # Runs in the order given; the second starts where the first ended (its first
    # sample at 0.2 s, its last at 10 s: 9.8 s measured each).
    assert xs(drawn[0])[0] == pytest.approx(0.0) and xs(drawn[0])[-1] == pytest.approx(9.8)
    assert xs(drawn[1])[0] == pytest.approx(9.8) and xs(drawn[1])[-1] == pytest.approx(19.6)
    # A flow's streams are summed: 90 Mbit/s at every sample.
    assert np.allclose(ys(drawn[0]), 90.0)
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts[0].startswith("tcp-up\nhops=1") and "(run 1)" in texts[1]
    assert figure("timeline", [a, b]).axes[0].get_ylabel().startswith("tcp-up")
    # A custom test's flows carry its name: the timeline takes the file's flow names.
    c = make_run(run_id=5)
    c.test = "bulk"
    c.series = [Series("throughput", "bit/s", [1.0, 2.0], [1e6, 2e6], flow="bulk.scp-b"),
                Series("throughput", "bit/s", [1.0, 2.0], [5e6, 5e6], flow="bulk.scp-a.1")]
    (line,) = lines(figure("timeline", [c], flow="scp-b"))
    assert np.allclose(ys(line), [1.0, 2.0])
    with pytest.raises(UsageError, match="no throughput series of flow 'scp'"):
        figure("timeline", [a], flow="scp")


def _tcp_run() -> RunRecord:
    """make_run() with a --bidir flow's tcp_info series, as the sampler records them."""
    run = make_run()
    t = [0.1 * i for i in range(1, 41)]
    for flow, node, key, scale in (("bulk", "client", "up", 1.0), ("bulk", "server", "down", 2.0)):
        run.series += [
            Series("tcp.cwnd", "segments", t, [10.0 * scale + i for i in range(40)],
                   node=node, flow=flow, key=key),
            Series("tcp.srtt", "ms", t, [40.0 + i for i in range(40)], node=node, flow=flow,
                   key=key),
            Series("tcp.min_rtt", "ms", t, [40.0] * 40, node=node, flow=flow, key=key),
            Series("tcp.delivery_rate", "bit/s", t, [19.1e6 * scale] * 40, node=node,
                   flow=flow, key=key)]
    run.metrics.append(Metric("tcp.delivery_rate", 19.1e6, "bit/s", flow="bulk",
                              node="client", key="up"))
    return run


def test_tcpinfo_draws_each_flows_cwnd_rtt_and_delivery_rate() -> None:
    fig = figure("tcpinfo", [_tcp_run()])
    cwnd, srtt, rate = fig.axes

    def named(ax: Axes) -> list[str]:
        return [label(ln) for ln in ax.get_lines() if not label(ln).startswith("_")]

    assert named(cwnd) == ["bulk @ client, up", "bulk @ server, down"]
    assert ys(cwnd.get_lines()[1])[0] == 20.0
    assert named(srtt)[2:] == ["bulk @ client, up: least RTT", "bulk @ server, down: least RTT"]
    # Rates in Mbit/s; the legend quotes the stored median over the load phase.
    assert rate.get_ylabel() == "delivery rate (Mbit/s)"
    assert ys(rate.get_lines()[1])[0] == pytest.approx(38.2)
    assert label(rate.get_lines()[0]) == "bulk @ client, up: median 19.1 Mbit/s (load phase)"
    with pytest.raises(UsageError, match="no tcp_info series"):
        figure("tcpinfo", [make_run()])
