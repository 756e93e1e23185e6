"""One run in the terminal: what ran where, its figures, per flow, and the routers' view."""

from __future__ import annotations

import time
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from hoplab.render.units import value
from hoplab.run.record import Metric, RunRecord

_CPU_STATES = ("user", "system", "irq", "softirq", "idle")


def _header(rec: RunRecord, store: str) -> Table:
    md = rec.metadata
    t = Table.grid(padding=(0, 2))
    t.add_column(style="bold")
    t.add_column()
    variant = " ".join(f"{k}={v}" for k, v in rec.variant.items()) or "-"
    labels = " ".join(f"{k}={v}" for k, v in rec.labels.items()) or "-"
    status = rec.status if rec.status == "ok" else f"[red]{rec.status}[/]: {rec.error}"
    tools = md.get("tools", {})
    rows = [
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
    for k, v in rows:
        t.add_row(k, v)
    return t


def _whole(metrics: Sequence[Metric]) -> Table:
    t = Table(title="figures", title_justify="left")
    t.add_column("metric")
    t.add_column("value", justify="right")
    for m in metrics:
        t.add_row(m.name, value(m.value, m.unit))
    return t


def _matrix(title: str, rows: dict[str, dict[str, Metric]], first: str) -> Table:
    names: list[str] = []
    for cols in rows.values():
        names += [n for n in cols if n not in names]
    t = Table(title=title, title_justify="left")
    t.add_column(first)
    for n in names:
        t.add_column(n, justify="right")
    for row, cols in rows.items():
        t.add_row(row, *[value(cols[n].value, cols[n].unit) if n in cols else "-"
                         for n in names])
    return t


def run_view(rec: RunRecord, store: str) -> RenderableType:
    parts: list[RenderableType] = [_header(rec, store)]
    whole = [m for m in rec.metrics if m.flow is None and m.node is None and m.key is None]
    if whole:
        parts.append(_whole(whole))
    flows: dict[str, dict[str, Metric]] = {}
    for m in rec.metrics:
        if m.flow is not None:
            flows.setdefault(m.flow, {})[m.name] = m
    if flows:
        parts.append(_matrix("per flow", flows, "flow"))
    hosts: dict[str, dict[str, Metric]] = {}
    for m in rec.metrics:
        if m.name in ("host_share", "host_rate") and m.node:
            hosts.setdefault(m.node, {})[m.name] = m
    if hosts:
        parts.append(_matrix("per sending host", hosts, "host"))
    cpu: dict[str, dict[str, Metric]] = {}
    for m in rec.metrics:
        if m.name.startswith("cpu.") and m.key:
            cpu.setdefault(m.key, {})[m.name.split(".", 1)[1]] = m
    if cpu:
        ordered = {k: {s: cpu[k][s] for s in _CPU_STATES if s in cpu[k]}
                   for k in sorted(cpu, key=lambda k: (k == "all", len(k), k))}
        parts.append(_matrix("CPU during the load phase (host-wide: lab nodes share it)",
                             ordered, "core"))
    nodes: dict[str, dict[str, Metric]] = {}
    for m in rec.metrics:
        if m.node and m.key and m.name.startswith(("iface.", "qdisc.", "tcp.")):
            nodes.setdefault(f"{m.node} {m.key}", {})[m.name] = m
        elif m.node and m.name.startswith("tcp."):
            nodes.setdefault(m.node, {})[m.name] = m
    if nodes:
        parts.append(_matrix("nodes (load phase)", nodes, "node / interface / qdisc"))
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
