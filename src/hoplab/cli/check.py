"""`hoplab check FILE...`: validate lab and experiment files for CI and editors.

Every problem of every file is printed, one line each (FILE:LINE: KEY: message); exit 0
when there is none, 2 otherwise. Nothing is built, written or started. With --devices,
each lab's devices are reached over SSH, read-only, as `lab up` checks them first."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from hoplab.errors import HoplabError, SpecError

if TYPE_CHECKING:
    from hoplab.spec.check import Checked
    from hoplab.spec.experiment import Experiment
    from hoplab.spec.model import Lab

# The message an SSH connection gives a host key it has not seen (hoplab.nodes.ssh_conn).
_UNKNOWN_KEY = "unknown host key"


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("check", help="validate lab and experiment files (builds nothing)",
                       description="Load lab and experiment files (told apart by what they "
                                   "hold) and print every problem with its file, line and "
                                   "key. Exit 0 when there is none, 2 otherwise. Nothing "
                                   "is built, written or started.")
    p.add_argument("files", nargs="+", metavar="FILE", help="lab or experiment files")
    p.add_argument("--devices", action="store_true",
                   help="also reach each lab's devices over SSH, read-only: their host "
                        "keys (known_hosts is never written), addresses, tools and "
                        "congestion controls, and the host NICs cabled to them")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import hoplab.kinds  # noqa: F401  (the registry's built-in kinds)
    from hoplab.spec.check import check_file

    checked = [check_file(path) for path in args.files]
    bad = problems = 0
    for c in checked:
        lines = [str(p) for p in c.problems]
        notes: list[str] = []
        if args.devices and not c.problems:
            more, notes = _devices(c)
            lines += more
        for line in lines:
            print(line)
        for note in notes:
            print(f"{c.path}: note: {note}")
        if lines:
            bad += 1
            problems += len(lines)
        else:
            print(f"{c.path}: ok: {_what(c)}")
    if bad:
        print(f"hoplab check: {problems} problem{'s' if problems > 1 else ''} in {bad} of "
              f"{len(checked)} files", file=sys.stderr)
        return 2
    return 0


def _what(c: Checked) -> str:
    if c.experiment is not None:
        e = c.experiment
        return (f"experiment {e.name}: {len(e.variants)} variants, {e.runs()} runs, "
                f"lab {e.lab_source}; {_how_long(e)}; {_verdicts(e)}")
    assert c.lab is not None
    return f"lab {c.lab.name}: {len(c.lab.nodes)} nodes, {len(c.lab.links)} links"


def _how_long(e: Experiment) -> str:
    from hoplab import kind_registry

    m, sec = divmod(round(e.traffic_s()), 60)
    took = f"{m} min {sec} s" if m else f"{sec} s"
    searches = sorted({t.kind for v in e.variants for t in v.tests
                       if kind_registry.get(t.kind).procedure is not None})
    more = f", {' and '.join(searches)} searches as long as they need" if searches else ""
    return (f"at least {took} of tests and pauses (building labs and starting tools "
            f"add more{more})")


def _verdicts(e: Experiment) -> str:
    """Whether the repetitions can give compare a verdict at all (analysis/verdict_rule
    decides how many can)."""
    from hoplab.analysis.sizes import ALPHA, can_reach, runs_per_side

    if can_reach(e.repeat, e.repeat, ALPHA):
        return f"{e.repeat} a side can reach p <= {ALPHA:g}"
    return f"{e.repeat} a side cannot reach p <= {ALPHA:g}; {runs_per_side(ALPHA)} can"


def _devices(c: Checked) -> tuple[list[str], list[str]]:
    """What lab up would find wrong with each distinct lab's devices and NICs, and what
    the tests ask of them; (problems, notes)."""
    from dataclasses import replace

    from hoplab.kinds.device_tools import test_tools
    from hoplab.lab.devices import survey

    problems: list[str] = []
    notes: list[str] = []
    seen: set[str] = set()
    variants = c.experiment.variants if c.experiment is not None else ()
    pairs = [(v.lab, v.tests) for v in variants] or [(lab, ()) for lab in c.labs()]
    for lab, tests in pairs:
        # check never writes known_hosts: a new host key is reported, not accepted.
        quiet = replace(lab, accept_new_host_keys=False)
        needs = test_tools(quiet, tests)
        key = repr((quiet, needs))
        if key in seen:
            continue
        seen.add(key)
        try:
            survey.check_devices(quiet, *needs)
        except HoplabError as exc:
            _sort(c.path, lab, exc, problems, notes)
        try:
            problems += [str(p) for p in _congestion(c, quiet)]
        except HoplabError as exc:
            _sort(c.path, lab, exc, problems, notes)
    return problems, notes


def _sort(path: str, lab: Lab, exc: HoplabError, problems: list[str], notes: list[str]
          ) -> None:
    text = str(exc)
    if lab.accept_new_host_keys and _UNKNOWN_KEY in text:
        notes.append(f"{text.split(';')[0]}: lab up will add it (accept_new_host_keys = "
                     f"true); check writes nothing")
        return
    # A SpecError names its file (the lab's, for a device); other errors get the file's.
    problems.append(text if isinstance(exc, SpecError) else f"{path}: {text}")


def _congestion(c: Checked, lab: Lab) -> Sequence[HoplabError]:
    """The congestion controls the tests ask of a device, against its kernel's."""
    from hoplab import kind_registry as registry
    from hoplab.lab.devices import reach
    from hoplab.nodes.registry import executor_for
    from hoplab.spec.check import device_congestion, kernel_congestion

    exp = c.experiment
    if exp is None:
        return []
    names = {n.name for n in lab.devices()}
    asked = {node for v in exp.variants for t in v.tests for f in t.flows
             if registry.flow_tool(f.kind).congestion(f) is not None
             for node in (f.src, f.dst) if node in names}
    if not asked:
        return []
    execs = reach.connect(lab, executor_for)
    try:
        kernels = {node: kernel_congestion(execs[node]) for node in sorted(asked)}
    finally:
        reach.close(execs.values())
    return device_congestion(exp, kernels)
