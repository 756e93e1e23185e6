"""One run in the terminal: what ran where, its figures, per flow, and the routers' view."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from hoplab import kind_registry, metrics
from hoplab.record import Metric, RunRecord
from hoplab.render.spike_text import spike_lines
from hoplab.render.units import figure, notes, pairs

CPU_COLUMNS = tuple(f"cpu.{s}" for s in ("user", "system", "irq", "softirq", "idle"))


def _header(rec: RunRecord, store: str) -> Table:
    md = rec.metadata
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    variant, labels = pairs(rec.variant), pairs(rec.labels)
    # Every value is text from the run (an error is a device's stderr): shown as it is,
    # never read as rich markup.
    status = Text(rec.status) if rec.status == "ok" else \
        Text.assemble((rec.status, "red"), f": {rec.error}")
    tools = md.get("tools", {})
    rows: list[tuple[str, object]] = [
        ("run", f"{rec.id} in {store}"),
        ("experiment", f"{rec.experiment} (id {rec.experiment_id}, seed {rec.seed}, "
                       f"order {rec.order})"),
        ("test", f"{rec.test} ({rec.kind}), repetition {rec.repetition}"),
        ("variant", variant), ("labels", labels), ("status", status),
        ("started", time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(rec.started_at))
         + f", {rec.duration_s:.1f} s"),
        ("host", f"{md.get('host', '?')}, kernel {md.get('kernel', '?')}, "
                 f"{md.get('cpus', '?')} x {md.get('cpu_model', '?')}"),
        ("tools", ", ".join(f"{k} {v}" for k, v in sorted(tools.items()) if v) or "-"),
        ("versions", f"hoplab {md.get('hoplab_version', '?')}, measurement "
                     f"v{rec.measurement_version}"),
    ]
    if "grade" in md:
        rows.append(("bufferbloat grade", str(md["grade"])))
    # What a run could not measure, or measured with a caveat, said where it is seen.
    rows += [(f"one-way, {flow}", said) for flow, said in sorted(md.get("one_way", {}).items())]
    if md.get("samplers_missing"):
        rows.append(("not sampled", str(md["samplers_missing"])))
    rows += [(f"rebooted, {node}", why) for node, why in sorted(md.get("rebooted", {}).items())]
    for k, v in rows:
        t.add_row(escape(k), v if isinstance(v, Text) else escape(str(v)))
    return t


def _whole(found: Sequence[Metric]) -> Table:
    t = Table(title="figures", title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")
    for m in found:
        t.add_row(escape(metrics.label(m.name)), escape(figure(m.value, m.name, m.unit)))
    return t


def _matrix(title: str, rows: dict[str, dict[str, Metric]], first: str,
            columns: Sequence[str]) -> Table | None:
    """Rows of things (flows, interfaces) with the chosen metrics as columns: only the
    columns some row has, so a table stays narrow."""
    present = [(n, metrics.label(n)) for n in columns if any(n in r for r in rows.values())]
    if not rows or not present:
        return None
    t = Table(title=title, title_justify="left")
    t.add_column(first, no_wrap=True)
    for _, label in present:
        t.add_column(label, justify="right")
    for row, cols in rows.items():
        t.add_row(escape(row), *[escape(figure(cols[n].value, n, cols[n].unit))
                                 if n in cols else "-" for n, _ in present])
    return t


# Which figures each table shows, in order; their labels are the registry's.
FLOW_COLUMNS = ("goodput", "sent_rate", "throughput_p5", "retransmits", "loss", "udp_jitter",
                "rtt_min", "rtt_median", "rtt_p99", "rtt_jitter", "spikes", "spike_max",
                "spike_period", "owd_up_median", "owd_down_median", "jitter")
IFACE_COLUMNS = ("iface.rx_bps", "iface.tx_bps", "iface.tx_pps", "iface.rx_drops",
                 "iface.tx_drops")
QDISC_COLUMNS = ("qdisc.sent_bytes", "qdisc.drops", "qdisc.overlimits",
                 "qdisc.backlog_packets_max", "qdisc.backlog_bytes_max")
TCP_STATE_COLUMNS = ("tcp.cwnd", "tcp.srtt", "tcp.rttvar", "tcp.min_rtt", "tcp.delivery_rate",
                     "tcp.pacing_rate", "tcp.retrans", "tcp_efficiency", "buffer_delay_ms",
                     "buffer_delay_pct")
QDISC_PACKETS = ("a qdisc packet is what the kernel queued: with GSO, a super-frame of up to "
                 "64 KiB is one; the bytes say how much it held")


def _grouped(metrics: Sequence[Metric], prefix: str) -> dict[str, dict[str, Metric]]:
    rows: dict[str, dict[str, Metric]] = {}
    for m in metrics:
        if m.name.startswith(prefix) and m.node:
            rows.setdefault(f"{m.node} {m.key}" if m.key else m.node, {})[m.name] = m
    return rows


def _tcp_state(found: Sequence[Metric]) -> dict[str, dict[str, Metric]]:
    """A TCP flow's own state on its sender (tcp_info) by "flow @ node" (and a bidir
    flow's key)."""
    rows: dict[str, dict[str, Metric]] = {}
    for m in found:
        if m.flow is not None and m.node is not None and m.name in TCP_STATE_COLUMNS:
            where = f"{m.node} {m.key}" if m.key else m.node
            rows.setdefault(f"{m.flow} @ {where}", {})[m.name] = m
    return rows


def _keyed(rec: RunRecord) -> dict[str, dict[str, Metric]]:
    """The run's own figures that carry a key (a throughput search's frame size, RPM's
    direction, a bidirectional test's up and down), by key."""
    rows: dict[str, dict[str, Metric]] = {}
    for m in rec.metrics:
        if m.flow is None and m.node is None and m.key and not m.name.startswith("cpu."):
            rows.setdefault(m.key, {})[m.name] = m
    return rows


def _key_name(kind: str) -> str:
    found = kind_registry.find(kind)
    return (found.keyed if found is not None else None) or "key"


def run_view(rec: RunRecord, store: str) -> RenderableType:
    parts: list[RenderableType] = [_header(rec, store)]
    whole = [m for m in rec.metrics if m.flow is None and m.node is None and m.key is None]
    if whole:
        parts.append(_whole(whole))
    flows: dict[str, dict[str, Metric]] = {}
    for m in rec.metrics:
        if m.flow is not None and m.node is None:
            flows.setdefault(m.flow, {})[m.name] = m
    hosts: dict[str, dict[str, Metric]] = {}
    for m in rec.metrics:
        if m.name in ("host_share", "host_rate") and m.node:
            hosts.setdefault(m.node, {})[m.name] = m
    # This machine's cores ("host": the lab's namespaces share them), then each device's
    # own, named by its node: a device's cpu0 is not this machine's.
    cpu: dict[tuple[str, str], dict[str, Metric]] = {}
    for m in rec.metrics:
        if m.name.startswith("cpu.") and m.key:
            cpu.setdefault((m.node or "host", m.key), {})[m.name] = m
    cpu_rows = {(k if node == "host" else f"{node} {k}"): cpu[(node, k)]
                for node, k in sorted(cpu, key=lambda nk: (nk[0] != "host", nk[0],
                                                           nk[1] == "all", len(nk[1]), nk[1]))}
    cost = {m.node: {m.name: m} for m in rec.metrics if m.name == "sampler.cpu" and m.node}
    tcp = {node: {"tcp.retrans_segs": m} for node, row in _grouped(rec.metrics, "tcp.").items()
           for name, m in row.items() if name == "tcp.retrans_segs"}
    keyed, key_name = _keyed(rec), _key_name(rec.kind)
    tables = [
        _matrix(f"figures by {key_name}", keyed, key_name,
                list(dict.fromkeys(n for row in keyed.values() for n in row))),
        _matrix("per flow", flows, "flow", FLOW_COLUMNS),
        _matrix("TCP state per flow on its sender (tcp_info; medians over the load phase)",
                _tcp_state(rec.metrics), "flow", TCP_STATE_COLUMNS),
        _matrix("per sending host", hosts, "host", ("host_rate", "host_share")),
        _matrix("CPU in the load phase (host-wide: the lab's namespaces share the host's "
                "cores; a device's cores are its own)", cpu_rows, "core", CPU_COLUMNS),
        _matrix("sampler cost on each device (% of one of its cores)", cost,
                "device", ("sampler.cpu",)),
        _matrix("interfaces in the load phase", _grouped(rec.metrics, "iface."),
                "node interface", IFACE_COLUMNS),
        _matrix(f"qdiscs in the load phase ({QDISC_PACKETS})", _grouped(rec.metrics, "qdisc."),
                "node qdisc", QDISC_COLUMNS),
        _matrix("TCP retransmitted segments", tcp, "node", ("tcp.retrans_segs",)),
    ]
    parts += [t for t in tables if t is not None]
    parts += [Text(f"note: {n}", style="dim") for n in notes(m.name for m in rec.metrics)]
    spikes = spike_lines(rec)
    if spikes:
        parts.append(Text("latency spikes\n" + "\n".join(f"  {line}" for line in spikes)))
    if rec.series:
        names: dict[str, int] = {}
        for s in rec.series:
            names[s.name] = names.get(s.name, 0) + len(s.t)
        parts.append(Text("series: " + ", ".join(f"{n} ({c} points)"
                                                 for n, c in sorted(names.items())),
                          style="dim"))
    if rec.raw:
        parts.append(Text("raw outputs: " + ", ".join(r.name for r in rec.raw), style="dim"))
    return Group(*parts)
