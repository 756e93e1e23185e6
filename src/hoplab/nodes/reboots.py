"""Whether the machines a run's nodes are on rebooted since the previous run: a
rebooted device lost what lab up set on it, and the run records it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hoplab.nodes.each import in_each
from hoplab.nodes.executor import Executor, ExecutorError


def reboots(nodes: Mapping[str, Executor], settings: Mapping[str, Mapping[str, Any]],
            seen: dict[str, tuple[str, float]]) -> dict[str, str]:
    """Nodes whose machine rebooted since the previous run: its boot id changed or its
    uptime went back, in the facts read when its lab was built (`settings`; a lab is
    built again after a failed run) against those `seen` before, or by its executor's own
    look since. Recorded on the run: a rebooted device lost what was set at lab up."""
    out: dict[str, str] = {}
    for name, facts in settings.items():
        boot, uptime = facts.get("boot_id"), facts.get("uptime_s")
        if boot is None and uptime is None:
            continue
        prev = seen.get(name)
        now = (str(boot or ""), float(uptime or 0.0))
        seen[name] = now
        if prev is not None and ((now[0] and prev[0] and now[0] != prev[0])
                                 or (uptime is not None and now[1] < prev[1])):
            out[name] = "rebooted since the previous run (boot id changed, uptime went back)"

    def look(name: str) -> str | None:
        try:
            if nodes[name].check_rebooted():
                return "rebooted since hoplab last looked (uptime went back)"
        except (ExecutorError, TimeoutError, OSError) as exc:
            return f"could not tell whether it rebooted: {exc}"
        return None

    # Each node at once: one command each, a round trip to a device or a guest.
    names = [n for n in nodes if n not in out]
    for name, said in zip(names, in_each(names, look), strict=True):
        if said is not None:
            out[name] = said
    return out
