"""The structure stays as docs/architecture.md draws it: packages import only downwards,
no module imports itself back through others, and every import by name at run time
(importlib) is declared below.

The graph is computed from the source with the ast module: every import counts, those
inside functions too (lazy imports keep the command line fast; they must not hide a
cycle). Imports under `if TYPE_CHECKING:` are annotations only and are left out.

Imports are at the top of a module; one inside a function is kept only where it pays,
and LAZY below lists each with the measurement that says so."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "hoplab"

# Bottom up. A package may import its own layer's modules and any layer below it, never
# one above. The top-level modules (hoplab.errors, hoplab.record, ...) are the "core".
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core",),              # errors, record, metrics, jsonsafe, kv, export, plugins
    ("store",),             # the store: schema, SQLite and PostgreSQL
    ("analysis",),          # statistics, verdicts, change points (reads the store)
    ("tools",),             # one adapter per external tool: argv and pure parsers
    ("nodes",),             # where a command runs: namespace, SSH, fake
    ("spec",),              # lab and experiment files -> frozen dataclasses
    ("lab",),               # planning, building and tearing down labs
    ("samplers", "profile"),
    ("kinds",),             # the test kinds (plug-ins)
    ("run",),               # orchestration: a run, an experiment, a bisection
    # The fleet, three packages one above the other (hoplab.fleet itself only says so):
    ("fleet", "fleet.queue"),  # the queue and its benches; the one connection, the tables
    ("fleet.bisect",),      # bisection on benches: jobs the queue carries
    ("fleet.schedule",),    # schedules and alerts: experiments the queue carries
    ("importers",),         # other tools' result files -> runs
    ("render",),            # tables, plots, the report
    ("web",),               # the dashboard
    ("cli",),               # parsing arguments and printing
    ("demo",),              # `make demo`: runs the command line
)

# Imports made by name at run time, which an import scan cannot see: each module that
# calls importlib.import_module, with the modules it may load. A registry loading its
# plug-ins (kinds, commands, store back ends) is the one legitimate use.
DYNAMIC: dict[str, tuple[str, ...]] = {
    # The command line imports only the module of the command being run (COMMANDS).
    "hoplab.cli.main": tuple(f"hoplab.cli.{m}" for m in (
        "doctor", "check", "lab", "run", "runs", "compare", "report", "serve", "profile",
        "clean", "plot", "trend", "annotate", "baseline", "import_", "export", "migrate",
        "bisect", "submit", "worker", "fleet", "schedule")),
}


# The imports of hoplab's own modules made inside a function, each with why it pays: the
# module it keeps off, measured in a fresh interpreter as the modules and time the import
# adds (python -X importtime; medians of 5 on 2 busy cores, issue 31). Anything else is
# imported at the top, where a reader sees what a module depends on.
_NUMPY = "numpy (about 100 modules, 0.1 s and more)"
LAZY: dict[str, dict[str, str]] = {
    # A detector's module is its face (name, summary, parameters), which the registry
    # reads for `hoplab trend --help` (test_cli_imports.py holds it to no numpy); its
    # numerical work is loaded when it first locates: 105-108 modules, 80-90 ms of CPU
    # each (time.process_time, medians of 5, issue 31). Through the CLI, `trend --help`
    # takes 0.083 s of CPU instead of 0.199 s.
    "hoplab.analysis.detectors.edivisive": {
        "hoplab.analysis.detectors.edivisive_scan": f"{_NUMPY}, with the rank test "
                                                    "(analysis/ranks.py)",
    },
    "hoplab.analysis.detectors.pelt": {"hoplab.analysis.detectors.penalised": _NUMPY},
    "hoplab.analysis.detectors.binseg": {"hoplab.analysis.detectors.penalised": _NUMPY},
    "hoplab.analysis.trend": {
        "hoplab.analysis.changepoints": f"the detectors and {_NUMPY} and scipy, off the "
                                        "readers of a trend's words and slope (render.summary, "
                                        "render.answer, web.home, cli.baseline)",
        "hoplab.analysis.series_trend": "the store (SQLAlchemy, 475 modules), off the same "
                                        "readers: only the report's trends_of_runs needs it",
    },
    "hoplab.kinds": {
        "hoplab.kinds.builtin": "the built-in kinds (162 modules, 0.2 s) off whoever imports the "
                                "package without asking the registry: its loader runs at "
                                "the first question (kind_registry.load_builtin_with)",
    },
    "hoplab.kinds.figures": {
        "hoplab.analysis.spikes": f"{_NUMPY} off listing runs, which loads the kinds; only "
                                  "a ping flow's RTT series needs it",
    },
    "hoplab.lab.where": {
        "hoplab.lab.state": "the full reader of a lab's record (29 modules) off `lab exec`, "
                            "whose start-up test_cli_imports holds; read only to word an error",
    },
    # The node kinds' registry loads the executor of the kind a lab uses, no other:
    "hoplab.nodes.registry": {
        "hoplab.nodes.ssh_exec": "asyncssh and cryptography (212 modules, 0.16 s) off every "
                                 "lab without devices (test_cli_imports holds lab up, check "
                                 "and doctor to no cryptography)",
        "hoplab.nodes.ssh_target": "the same",
        "hoplab.nodes.netns_exec": "the namespace executor (24 modules, 17 ms) off the "
                                   "readers of lab files (spec.model asks the registry a "
                                   "node's kind) and off labs of devices only",
    },
    "hoplab.render.comparison": {
        "hoplab.analysis.ranks": f"{_NUMPY} off `hoplab compare`'s parser, which imports "
                                 "this module at its top; only a row without a verdict needs it",
    },
    "hoplab.tools.rpm_client": {
        "hoplab.tools.rpm_probe": "h2 and asyncio's TLS (144 modules, 0.2 s) off the "
                                  "responsiveness kind's import: only the client runs it",
    },
    # Attributes of a package loaded on first use (PEP 562): naming the package is free.
    "hoplab.samplers": {
        "hoplab.samplers.runner": "pyroute2 (70 modules) off readers of stored samples",
        "hoplab.samplers.summary": "the summary (19 modules) off the runner's users",
    },
    "hoplab.spec": {
        "hoplab.spec.loader": "the loader (40 modules, 50 ms: tomllib, the model) off `lab "
                              "exec`, which reads only spec.names (test_cli_imports)",
    },
    "hoplab.store": {
        "hoplab.store.schema": "SQLAlchemy (230 modules, 0.15 s and more) off a command "
                               "that only names the store (its --help)",
        "hoplab.store.store": "the same",
        "hoplab.store.url": "the same",
    },
    # The fleet's pages and figures need psycopg (about 90 modules), which a dashboard
    # over a SQLite store never loads.
    "hoplab.web.app": {
        "hoplab.fleet.schedule.alerts": "psycopg, for the alerts of a PostgreSQL store only",
        "hoplab.fleet.queue.status": "psycopg, for the fleet of a PostgreSQL store only",
        "hoplab.web.fleet": "psycopg, for the fleet page only",
        "hoplab.web.alerts": "psycopg, for the alerts page only",
    },
}
# Packages whose function-local imports LAZY does not list one by one:
LAZY_PACKAGES: dict[str, str] = {
    # Each command's handler imports what only it runs: its parser, and so `hoplab CMD
    # --help` and a refusal of bad arguments, must load nothing heavy (the store,
    # analysis, the runner, numpy...): test_cli_imports.py holds each command to it.
    "cli": "a command's own work, kept off its parser (test_cli_imports.py)",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


MODULES = {_module_name(p): p for p in SRC.rglob("*.py")}


def package(module: str) -> str:
    parts = module.split(".")
    if len(parts) < 2:
        return "core"
    if parts[1] == "fleet" and len(parts) > 2:
        return f"fleet.{parts[2]}"     # the fleet's packages have layers of their own
    if len(parts) == 2 and not (SRC / parts[1]).is_dir():
        # A top-level module is core, but for one with a layer of its own (demo).
        return parts[1] if parts[1] in _rank() else "core"
    return parts[1]


def _rank() -> dict[str, int]:
    return {pkg: i for i, layer in enumerate(LAYERS) for pkg in layer}


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, outside `if TYPE_CHECKING:` blocks."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                yield from _imports(child)
            continue
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        yield from _imports(node)


def _targets(module: str, node: ast.Import | ast.ImportFrom, is_pkg: bool) -> Iterator[str]:
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = module.split(".") if is_pkg else module.split(".")[:-1]
        if node.level:
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        names = [target] + [f"{target}.{a.name}" for a in node.names]
    for name in names:
        while name and name not in MODULES:
            name = name.rpartition(".")[0]
        if name and name != module:
            yield name


def _graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in _imports(tree):
            edges[module].update(_targets(module, node, path.name == "__init__.py"))
        edges[module].update(DYNAMIC.get(module, ()))
    return edges


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_every_package_has_a_layer() -> None:
    rank = _rank()
    assert sorted({package(m) for m in MODULES} - set(rank)) == []


def test_packages_import_only_downwards() -> None:
    rank = _rank()
    upward = sorted(f"{a} -> {b}" for a, bs in _graph().items() for b in bs
                    if rank[package(b)] > rank[package(a)])
    assert upward == []


def test_no_module_cycles() -> None:
    assert _cycles(_graph()) == []


def test_imports_by_name_are_declared() -> None:
    """A call to importlib.import_module or __import__ only where DYNAMIC names it."""
    callers = set()
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call):
                f = node.func
                name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", "")
                if name in ("import_module", "__import__"):
                    callers.add(module)
    assert sorted(callers - set(DYNAMIC)) == []
    for module, targets in DYNAMIC.items():
        assert module in MODULES
        assert all(t in MODULES for t in targets), (module, targets)


def test_the_commands_loaded_by_name_are_declared() -> None:
    """DYNAMIC's entry for the command line is the modules its COMMANDS table names."""
    from hoplab.cli.main import COMMANDS

    declared = set(DYNAMIC["hoplab.cli.main"])
    assert declared == {f"hoplab.cli.{module}" for module, _ in COMMANDS.values()}


def test_the_layer_test_sees_a_cycle_and_an_upward_import() -> None:
    """The checks above can fail: a made-up graph with both defects is caught."""
    graph = {"hoplab.a": {"hoplab.b"}, "hoplab.b": {"hoplab.a"}, "hoplab.c": set()}
    assert _cycles(graph) == [["hoplab.a", "hoplab.b"]]
    rank = _rank()
    assert rank[package("hoplab.cli.main")] > rank[package("hoplab.nodes.executor")]
    assert package("hoplab.demo") == "demo" and package("hoplab.errors") == "core"
    # The fleet's three packages are one above the other: the queue knows neither of
    # the other two, and bisection knows nothing of schedules.
    queue, bisect, schedule = (rank[package(f"hoplab.fleet.{m}")] for m in (
        "queue.submit", "bisect.driver", "schedule.firing"))
    assert queue < bisect < schedule and rank[package("hoplab.fleet")] == queue


def _local_imports(tree: ast.AST, module: str, is_pkg: bool) -> Iterator[str]:
    """The hoplab modules imported inside functions, each as the most precise module."""
    def walk(node: ast.AST, in_function: bool) -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            if in_function and isinstance(child, ast.Import | ast.ImportFrom):
                found = [t for t in _targets(module, child, is_pkg) if t.startswith("hoplab")]
                yield from {max(found, key=len)} if found else ()
            yield from walk(child, in_function or isinstance(
                child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda))
    return walk(tree, False)


def _unlisted_local_imports() -> list[str]:
    out = []
    for module, path in MODULES.items():
        if package(module) in LAZY_PACKAGES:
            continue
        tree = ast.parse(path.read_text())
        for target in _local_imports(tree, module, path.name == "__init__.py"):
            if target not in LAZY.get(module, {}):
                out.append(f"{module} -> {target}")
    return sorted(set(out))


def test_imports_inside_functions_are_the_listed_ones() -> None:
    """An import inside a function hides what a module depends on: it is at the top
    unless LAZY says, with a measurement, why it pays; and LAZY lists no import that is
    gone (each entry is still made inside a function)."""
    assert _unlisted_local_imports() == []
    for module, targets in LAZY.items():
        path = MODULES[module]
        made = set(_local_imports(ast.parse(path.read_text()), module,
                                  path.name == "__init__.py"))
        assert sorted(set(targets) - made) == [], module


def test_no_module_imports_back_a_module_that_imports_it_even_for_annotations() -> None:
    """lab/plan.py and lab/summary.py once imported each other (the plan's node entries
    were the summary's, the summary took a Plan): the plan builds them now. One circle
    through annotations alone remains, among the kinds' registry, spec and kinds."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import | ast.ImportFrom):
                graph[module].update(_targets(module, node, path.name == "__init__.py"))
    known = [["hoplab.kind_registry", "hoplab.kinds.flow", "hoplab.kinds.procedure",
              "hoplab.spec.experiment"]]
    assert [c for c in _cycles(graph) if c not in known] == []


def test_few_long_functions() -> None:
    """At most 3 functions in src/ over 60 lines: a long one is split by what it does."""
    long = []
    for path in MODULES.values():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                if n > 60:
                    long.append(f"{path.relative_to(SRC)}:{node.name} {n}")
    assert len(long) <= 3, long
