"""custom: flows of any flow kind composed by hand, each with its own ends, start and
duration (seed 004: an interactive flow and a ping while other hosts load the link).
Its summary has a row per flow; hosts that send are compared for fairness."""

from __future__ import annotations

from typing import Any

from hoplab import kind_registry as registry
from hoplab.kind_registry import Kind, Option, Reader, register
from hoplab.kinds.figures import fairness, figures
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import Flow, Phase
from hoplab.spec.locate import Path
from hoplab.spec.units import choice

OPTIONS: dict[str, Option] = {
    "flows": Option(lambda v: v, "the flows, `[[tests.flows]]` entries: each a `kind` of "
                                 "flow and that kind's keys (below)", "required"),
    "duration": Option(ov.duration, "each flow's `duration`, unless it gives its own (or "
                                    "`bytes`)"),
}


def _expand(r: Reader, name: str, src: str | None, dst: str | None, o: dict[str, Any],
            path: Path) -> tuple[list[Flow], list[Phase]]:
    raw_flows = r.ctx.array(o.get("flows"), (*path, "flows"))
    if not raw_flows:
        r.ctx.fail((*path, "flows"), "a custom test needs at least one [[tests.flows]] entry")
    kinds = registry.flow_names()
    flows: list[Flow] = []
    for i, raw in enumerate(raw_flows):
        where = (*path, "flows", i)
        table = r.ctx.table(raw, where, None)
        if "kind" not in table:
            r.ctx.fail(where, f"each flow needs kind = one of {', '.join(kinds)}")
        kind = registry.get(r.ctx.conv((*where, "kind"), choice(kinds), table["kind"]))
        fo = r.options(table, where, r.flow_options(kind.name))
        fsrc = r.node((*where, "from"), fo["from"]) if "from" in fo else src
        fdst = r.node((*where, "to"), fo["to"]) if "to" in fo else dst
        if fsrc is None or fdst is None:
            r.ctx.fail(where, "a flow needs from and to (or the test's from and to)")
        if "duration" not in fo and "bytes" not in fo and "duration" in o:
            # The test's duration must suit each flow it is given to (iperf3: whole
            # seconds), as the flow's own would.
            try:
                fo["duration"] = kind.options["duration"](f"{o['duration']!r}s")
            except ValueError as e:
                r.ctx.fail((*path, "duration"), f"{e}; this duration is given to the "
                                                f"test's {kind.name} flows")
        fname = fo.get("name", f"{kind.name}{i + 1}")
        more, _ = kind.expand(r, f"{name}.{fname}", fsrc, fdst, fo, where)
        flows += more
        if len(flows) > registry.MAX_TEST_FLOWS:
            # Checked as they come: a file of many entries must not build them all first.
            r.ctx.fail(where, f"the flows so far are {len(flows)}; a test has at most "
                              f"{registry.MAX_TEST_FLOWS}: they run together, each a "
                              f"tool's process, most with a server of its own")
    return flows, []


KIND = register(Kind(
    name="custom", options=OPTIONS, expand=_expand,
    # RTTs to different targets do not pool: the run's latency only with one probe flow.
    # Hosts competing for a link get a fairness figure (in rrul the "hosts" would be
    # the two ends of one path).
    figures=figures(pool="single", steps=(fairness,)),
    headline=("goodput", "jain_index", "rtt_median", "rtt_jitter", "udp_jitter", "loss"),
    # Its own; its flows' kinds give theirs (kind_registry.metrics_of).
    metrics=("jain_index", "host_rate", "host_share"),
    composes=True,
    needs_ends=False,
    flow_headline=("goodput", "loss", "udp_jitter", "rtt_median", "rtt_p95", "rtt_jitter",
                   "web_load", "web_failed")))
