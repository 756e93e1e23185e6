"""What each light command imports: a structure test, not a timing.

`hoplab --version`, `--help`, `lab exec` and the like must start in tens of
milliseconds, which they cannot do once SQLAlchemy, numpy, rich or pyroute2 is
imported (each costs 50 to 500 ms here). Each case runs the command in a fresh
interpreter and lists the modules it imported by the time it exited.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hoplab.cli import main as cli_main

# Run in a fresh interpreter: the command, then the names in sys.modules at exit.
# Past the root gate when the tests run as a user: these paths need no privilege
# with an empty run directory, and the gate is not what is under test.
WRAPPER = """
import atexit, json, os, sys
out, argv = sys.argv[1], sys.argv[2:]
if os.geteuid() != 0:
    os.geteuid = lambda: 0
def dump():
    with open(out, "w") as f:
        json.dump(sorted(sys.modules), f)
atexit.register(dump)
from hoplab.cli.main import main
sys.argv = ["hoplab", *argv]
sys.exit(main(argv))
"""

# importlib.metadata: what a console script generated to look up the version would
# pay (20 ms and more); __version__ is a constant instead.
LIBRARIES = ("sqlalchemy", "numpy", "scipy", "matplotlib", "plotly", "psycopg",
             "cryptography", "pyroute2", "rich", "importlib.metadata")
# hoplab's own parts that only a command's work needs: the stores, the judges, the
# runner, the dashboard. (The renderers are caught by the libraries they draw with;
# their tables of names and units are light and used by argument parsers.)
PACKAGES = ("hoplab.store", "hoplab.analysis", "hoplab.web", "hoplab.run", "hoplab.samplers",
            "hoplab.profile", "hoplab.importers")
NOTHING_HEAVY = LIBRARIES + PACKAGES
# Modules of those packages that cost nothing: the words of a verdict and the runs a
# verdict needs (math alone), which the renderers of a comparison import at their top
# (compare's parser loads them).
LIGHT = frozenset({"hoplab.analysis", "hoplab.analysis.verdicts", "hoplab.analysis.sizes"})
COMMANDS = ["doctor", "check", "lab", "run", "submit", "worker", "fleet", "schedule", "runs",
            "show", "compare", "report", "serve", "flamegraph", "profile", "fold", "clean",
            "plot", "trend", "annotate", "baseline", "import", "export", "migrate", "bisect"]


def imported(argv: list[str], run_dir: Path, tmp_path: Path) -> tuple[int, str, set[str]]:
    out = tmp_path / "modules.json"
    env = dict(os.environ, HOPLAB_RUN_DIR=str(run_dir), HOPLAB_DB=str(tmp_path / "no.db"))
    proc = subprocess.run([sys.executable, "-c", WRAPPER, str(out), *argv], env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert out.exists(), f"hoplab {' '.join(argv)} died: {proc.stderr}"
    return proc.returncode, proc.stderr, set(json.loads(out.read_text()))


def heavy(modules: set[str], forbidden: tuple[str, ...]) -> list[str]:
    # A library by its name, a part of hoplab by its module.
    return sorted({m if m.startswith("hoplab") else f for m in modules - LIGHT
                   for f in forbidden if m == f or m.startswith(f + ".")})


def help_cases() -> list[list[str]]:
    cases = [["--version"], ["--help"], [], ["nosuchcommand"]]
    cases += [[name, "--help"] for name in COMMANDS]
    cases += [["lab", action, "--help"] for action in ("up", "status", "exec", "down")]
    return cases


# What a command's help may import, and why: `trend --help` lists the registered
# change-point detectors, read from their registry (hoplab.analysis.detectors) only when
# that help is printed, never to parse a trend's arguments. The registry and each
# detector's module are light (name, summary, parameters): numpy and ruptures are
# loaded when a detector first locates, so the help loads neither.
HELP_READS: dict[tuple[str, ...], tuple[str, ...]] = {
    ("trend", "--help"): ("hoplab.analysis.detectors",)}


@pytest.mark.parametrize("argv", help_cases(), ids=lambda a: " ".join(a) or "(none)")
def test_help_and_version_import_nothing_heavy(argv: list[str], tmp_path: Path) -> None:
    code, err, modules = imported(argv, tmp_path / "run", tmp_path)
    assert code in (0, 2), err
    allowed = HELP_READS.get(tuple(argv), ())
    read = {m for m in modules for a in allowed if m == a or m.startswith(a + ".")}
    assert heavy(modules - read, NOTHING_HEAVY) == []


def test_parsing_a_trend_reads_no_detector(tmp_path: Path) -> None:
    # A bad --order is refused after parsing and before the registry is asked.
    code, err, modules = imported(["trend", "goodput", "--order", "sideways"],
                                  tmp_path / "run", tmp_path)
    assert code == 2 and "natural, time or git:REPO" in err, err
    assert heavy(modules, NOTHING_HEAVY) == []


def test_the_console_script_imports_nothing_heavy_for_version(tmp_path: Path) -> None:
    # The script pip generated, as a user runs it: it must not look the version up
    # with importlib.metadata, nor import more than the wrapper above sees.
    script = Path(sys.executable).parent / "hoplab"
    if not script.exists():
        pytest.skip(f"no console script next to {sys.executable} (pip install -e .)")
    proc = subprocess.run([sys.executable, "-X", "importtime", str(script), "--version"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0 and proc.stdout.startswith("hoplab "), proc.stderr
    modules = {line.rsplit("|", 1)[1].strip() for line in proc.stderr.splitlines()
               if line.startswith("import time:") and line.count("|") == 2}
    assert "hoplab.cli.main" in modules
    assert heavy(modules, NOTHING_HEAVY) == []


def test_lab_exec_of_a_lab_that_is_not_up(tmp_path: Path) -> None:
    code, err, modules = imported(["lab", "exec", "nolab", "client", "--", "true"],
                                  tmp_path / "run", tmp_path)
    assert code == 2 and "nolab" in err, err
    assert heavy(modules, NOTHING_HEAVY) == []


def test_lab_exec_reads_the_record_and_checks_the_namespace(tmp_path: Path) -> None:
    # A lab record whose node's namespace is gone: the path reads the record and asks
    # the kernel, everything `lab exec` does before it execs; hoplab.lab.where reads
    # it, not the full record (dataclasses, pathlib: 15 to 20 ms).
    run_dir = tmp_path / "run"
    (run_dir / "labs").mkdir(parents=True)
    state = {"name": "gone", "source": "x.toml", "status": "up", "created": 0.0,
             "owner_pid": 1, "namespaces": ["hoplab-h5gone-client"], "processes": [],
             "summary": {"nodes": {"client": {"netns": "hoplab-h5gone-client"}}},
             "version": 1}
    (run_dir / "labs" / "gone.json").write_text(json.dumps(state))
    code, err, modules = imported(["lab", "exec", "gone", "client", "--", "true"],
                                  run_dir, tmp_path)
    assert code == 2 and "client of lab gone is gone" in err, err
    assert "hoplab.lab.where" in modules
    assert heavy(modules, (*NOTHING_HEAVY, "hoplab.lab.state", "hoplab.lab.netns")) == []


def test_lab_exec_of_a_damaged_record_is_the_full_readers_error(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    (run_dir / "labs").mkdir(parents=True)
    (run_dir / "labs" / "bad.json").write_text('{"name": "bad", "summ')
    code, err, _ = imported(["lab", "exec", "bad", "client", "--", "true"], run_dir, tmp_path)
    assert code == 1, err
    assert f"{run_dir}/labs/bad.json: unreadable lab state" in err


def test_lab_down_of_a_lab_that_is_not_up(tmp_path: Path) -> None:
    code, err, modules = imported(["lab", "down", "nolab"], tmp_path / "run", tmp_path)
    assert code == 2 and "nolab" in err, err
    assert heavy(modules, NOTHING_HEAVY) == []


def test_lab_status_with_no_labs(tmp_path: Path) -> None:
    code, err, modules = imported(["lab", "status"], tmp_path / "run", tmp_path)
    assert code == 0, err
    # rich prints the answer; nothing of the store, numpy or netlink is needed for it.
    allowed = ("rich",)
    assert heavy(modules, tuple(m for m in NOTHING_HEAVY if m not in allowed)) == []


def test_lab_up_of_a_missing_file_imports_no_store_or_renderer(tmp_path: Path) -> None:
    code, err, modules = imported(["lab", "up", str(tmp_path / "none.toml")],
                                  tmp_path / "run", tmp_path)
    assert code == 2, err
    # rich draws the progress of the build.
    assert heavy(modules, tuple(m for m in NOTHING_HEAVY if m != "rich")) == []


def test_check_of_files_imports_no_store_renderer_or_runner(tmp_path: Path) -> None:
    lab = tmp_path / "lab.toml"
    lab.write_text('name = "c"\n[nodes.a]\n[nodes.b]\n[[links]]\nbetween = ["a", "b"]\n')
    exp = tmp_path / "exp.toml"
    exp.write_text('lab = "lab.toml"\n[[tests]]\nname = "p"\nkind = "ping"\nfrom = "a"\n'
                   'to = "b"\n')
    code, err, modules = imported(["check", str(lab), str(exp)], tmp_path / "run", tmp_path)
    assert code == 0, err
    # The kinds' modules come with the experiment (probe's figures use analysis.stats).
    assert heavy(modules, tuple(m for m in NOTHING_HEAVY if m != "hoplab.analysis")) == []
    assert not (tmp_path / "run").exists() and not (tmp_path / "no.db").exists()


def test_lazy_parser_lists_the_same_commands_as_the_full_one() -> None:
    # COMMANDS carries each command's help so that `hoplab --help` need not import the
    # modules; it must say what the modules say.
    def choices(parser: argparse.ArgumentParser) -> dict[str, str | None]:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        return {c.dest: c.help for c in sub._choices_actions}

    full = choices(cli_main.build_parser())
    lazy = choices(cli_main.build_parser([]))
    assert list(full) == list(lazy) == list(cli_main.COMMANDS) == COMMANDS
    assert full == lazy
