"""Which nodes a test's traffic crosses, from the routes the planner installed
(hoplab.lab.plan.route_path): samplers watch these routers, profiles record them."""

from __future__ import annotations

from hoplab.lab.plan import Plan
from hoplab.spec.experiment import Test


def routers_crossed(test: Test, plan: Plan) -> list[str]:
    """Every node that forwards some of the test's packets, in the order first met:
    each flow's path from its client to its server and back (data one way, ACKs and
    replies the other, which may take other routers), without the flow's own ends."""
    out: dict[str, None] = {}
    for f in test.flows:
        for a, b in ((f.src, f.dst), (f.dst, f.src)):
            out.update(dict.fromkeys(plan.path(a, b, f.family)[1:-1]))
    return list(out)


def flow_ends(test: Test) -> list[str]:
    """The nodes that send or receive the test's traffic."""
    return list(dict.fromkeys(n for f in test.flows for n in (f.src, f.dst)))
