"""`hoplab check`: lab and experiment files validated, every problem named, nothing built.

A file is told apart by what it holds, as the loaders read it: an experiment names its
`lab` and has `tests`; a lab has `nodes`, `links` or a `[generate]` table (and the keys
beside them). Each file's problems are the loader's own messages (file, line, key), one
for each part that stands on its own: a top-level key, a node, a link, a test of a
variant. A problem found in every variant is named once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from hoplab import kind_registry as registry
from hoplab import user_files
from hoplab.errors import SpecError
from hoplab.spec import option_values as ov
from hoplab.spec.experiment import Experiment
from hoplab.spec.experiment_loader import check_experiment, key_path
from hoplab.spec.loader import SpecContext, check_lab_data, parse_toml
from hoplab.spec.model import Lab

if TYPE_CHECKING:
    from hoplab.nodes.executor import Executor

EXPERIMENT_KEYS = ("lab", "tests")
LAB_KEYS = ("nodes", "links", "generate", "link_defaults", "tunnels")


@dataclass
class Checked:
    """One file's verdict: what it is, its problems, and what it loads to when it has
    none (for the device checks)."""

    path: str
    kind: str | None = None                # "lab" or "experiment"
    problems: list[SpecError] = field(default_factory=list)
    lab: Lab | None = None
    experiment: Experiment | None = None

    def labs(self) -> list[Lab]:
        if self.experiment is not None:
            return [v.lab for v in self.experiment.variants]
        return [self.lab] if self.lab is not None else []


def file_kind(data: Mapping[str, object]) -> str | None:
    if any(k in data for k in EXPERIMENT_KEYS):
        return "experiment"
    if any(k in data for k in LAB_KEYS):
        return "lab"
    return None


def check_file(path: str | Path) -> Checked:
    got = Checked(str(path))
    try:
        text = user_files.read_text(Path(path))
        data = parse_toml(text, str(path))
    except (OSError, ValueError) as e:  # FileRefused, UnicodeDecodeError
        got.problems.append(SpecError(f"cannot read the file: {e}", file=str(path)))
        return got
    except SpecError as e:
        got.problems.append(e)
        return got
    got.kind = file_kind(data)
    if got.kind == "experiment":
        got.experiment, problems = check_experiment(path)
    elif got.kind == "lab":
        got.lab, problems = check_lab_data(data, text, str(path))
    else:
        problems = [SpecError("neither a lab (it would have nodes, links or [generate]) nor "
                              "an experiment (lab = ... and [[tests]])", file=str(path))]
    # The file's own problems first, then its lab's, each in the order of their lines.
    got.problems = sorted(once(problems), key=lambda p: (p.file != str(path), p.file,
                                                         p.line or 0))
    return got


def once(problems: Iterable[SpecError]) -> list[SpecError]:
    """The first problem at each file, line and key: every variant repeats its lab's and
    its tests' problems."""
    seen: set[tuple[str, int | None, str | None]] = set()
    out = []
    for p in problems:
        if (p.file, p.line, p.key) not in seen:
            seen.add((p.file, p.line, p.key))
            out.append(p)
    return out


def kernel_congestion(ex: Executor) -> tuple[str, ...] | None:
    """The congestion controls a device's kernel has, read over its executor; None when
    its /proc does not say."""
    text = ex.read_file(ov.AVAILABLE_CONGESTION)
    if text is None:
        return None
    release = ex.run(["uname", "-r"], timeout=30).stdout.strip()
    found = ex.run(["find", f"/lib/modules/{release}", "-name", "tcp_*.ko*"], timeout=30)
    modules = [line.rsplit("/", 1)[-1] for line in found.stdout.splitlines()] \
        if release and found.returncode == 0 else []
    return ov.kernel_congestion(text.decode(errors="replace"), modules)


def device_congestion(exp: Experiment, kernels: Mapping[str, tuple[str, ...] | None]
                      ) -> list[SpecError]:
    """Each test whose flow asks a device (by name in `kernels`) for a congestion control
    its kernel lacks, at the key that asked for it."""
    text = Path(exp.source).read_text(encoding="utf-8")
    raw_tests = parse_toml(text, exp.source).get("tests")
    ctx = SpecContext(text, exp.source)
    out = []
    for v in exp.variants:
        for i, test in enumerate(v.tests):
            raw = raw_tests[i] if isinstance(raw_tests, list) and i < len(raw_tests) else None
            for f in test.flows:
                name = registry.flow_tool(f.kind).congestion(f)
                for node in (f.src, f.dst):
                    has = kernels.get(node)
                    why = None if name is None or has is None else ov.congestion_missing(
                        name, has, f"device {node}'s kernel (flow {f.name})")
                    if why is not None:
                        where = key_path(raw, ("tests", i), "congestion", name) or ("tests", i)
                        out.append(ctx.error(where, why))
    return once(out)
