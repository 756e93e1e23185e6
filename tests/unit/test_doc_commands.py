"""Every hoplab command the README's code blocks and the examples' comments print, run
as written against a store of what running those experiments stores (real runs,
tests/helpers/doc_stores.py), from a directory whose ./hoplab.db it is: each exits 0.
A command that needs a lab, a machine to probe or a server is left to the tests of
that (OTHER_TESTS says which); a placeholder (RUN, PLAIN) is given a run id by
PLACEHOLDERS, so a new command or placeholder in the docs is run here from then on."""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

from hoplab.cli.main import main
from tests.helpers.doc_stores import examples_store, readme_store
from tests.helpers.git_history import history

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data"

# Subcommands that need more than a store, and where they are tested.
OTHER_TESTS = {
    "run": "runs an experiment on a lab (tests/lab)",
    "lab": "builds, enters or removes a lab, as root (tests/lab)",
    "doctor": "probes this machine's kernel and tools (tests/lab)",
    "clean": "removes labs (tests/lab)",
    "bisect": "bisect run runs experiments on a lab (tests/lab/test_bisect.py)",
    "serve": "serves until stopped (tests/web)",
    "schedule": "needs the fleet's PostgreSQL store (tests/fleet/test_schedule_fire.py)",
    "worker": "a bench: runs labs from the fleet's PostgreSQL queue (tests/fleet)",
    "submit": "queues an experiment in the fleet's PostgreSQL store (tests/fleet)",
    "fleet": "reads the fleet's PostgreSQL store (tests/fleet)",
}

# Files a command reads, as it names them: real captured outputs.
FILES = {"old-iperf3.json": DATA / "iperf3" / "tcp_upload.json",
         "results.flent.gz": DATA / "flent" / "tcp_2up_iperf_loopback.flent.gz"}

VERSIONS = ["v1", "v2", "v3", "v4"]


def _commands(path: Path) -> list[tuple[int, str]]:
    """(line, command) of every hoplab command line of a README code block or of an
    example's comments."""
    lines = path.read_text().splitlines()
    found = []
    if path.suffix == ".md":
        fence = None
        for n, line in enumerate(lines, 1):
            if line.startswith("```"):
                fence = None if fence is not None else line[3:].strip()
            elif fence == "" and line.startswith("hoplab "):
                found.append((n, line))
    else:
        for n, line in enumerate(lines, 1):
            m = re.match(r"#\s+(hoplab\s.*)", line)
            if m:
                found.append((n, m.group(1)))
    return found


# The README and what moved out of it into docs/ (run against the README's store).
README_LIKE = ("README.md", "docs/guide.md", "docs/measurements.md", "docs/design-notes.md")
README_LINES = 200          # the README answers first (issue 21): at most this long
SOURCES = [*(REPO / p for p in README_LIKE), *sorted((REPO / "examples").rglob("*.toml"))]
ALL = [(p.relative_to(REPO).as_posix(), n, c) for p in SOURCES for n, c in _commands(p)]
RUNNABLE = [(s, n, c) for s, n, c in ALL if shlex.split(c, comments=True)[1]
            not in OTHER_TESTS]


def test_the_readme_is_short() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= README_LINES, f"README.md has {len(lines)} lines"


def test_the_docs_hold_commands_of_both_kinds() -> None:
    sources = {s for s, _, _ in RUNNABLE}
    assert "README.md" in sources and "examples/nat-regression.toml" in sources
    assert len(RUNNABLE) >= 30 and len(ALL) > len(RUNNABLE)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, dict[str, int]]]:
    """Per source, its store and the ids its placeholders stand for; beside the README's,
    ../openwrt: the git history its `--order git:../openwrt` walks."""
    root = tmp_path_factory.mktemp("docs")
    shas = history(root / "openwrt", len(VERSIONS), lambda i: {"VERSION": f"v{i}\n"})
    readme = root / "readme.db"
    readme_store(readme, dict(zip(VERSIONS, shas, strict=True)))
    examples = root / "examples.db"
    ex = examples_store(examples)
    nat, wg = ex["nat-regression"], ex["wireguard-profile"]
    ids = {"RUN_V1": nat[0], "RUN_V2": nat[8], "PLAIN": wg[0], "WG": wg[1]}
    return {
        **{source: (readme, {}) for source in README_LIKE},
        "examples/nat-regression.toml": (examples, ids),
        "examples/wireguard-profile.toml": (examples, {"RUN": wg[1], **ids}),
        "examples/devices/mesh-exit-profile.toml": (examples, {"RUN": wg[1]}),
        "examples/sfq-perturb.toml": (examples, {"RUN": ex["sfq-perturb"][0]}),
        "*": (examples, {"RUN": ex["exit-70ms"][0]}),
    }


@pytest.mark.parametrize(("source", "line", "command"), RUNNABLE,
                         ids=[f"{s}:{n}" for s, n, _ in RUNNABLE])
def test_the_command_runs_as_written(
        source: str, line: int, command: str,
        stores: dict[str, tuple[Path, dict[str, int]]], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    db, ids = stores.get(source, stores["*"])
    argv = shlex.split(command, comments=True)[1:]
    unknown = [a for a in argv if re.fullmatch(r"[A-Z][A-Z0-9_]*", a) and a not in ids]
    assert not unknown, f"{source}:{line}: give {unknown} a run id in the stores fixture"
    argv = [str(ids.get(a, a)) for a in argv]
    work = tmp_path / "work"             # ../openwrt beside it is the README's history
    work.mkdir()
    shutil.copy(db, work / "hoplab.db")
    shutil.copy(db, work / "old.db")      # the README's `migrate --db old.db`
    (work / "examples").symlink_to(REPO / "examples")   # `check examples/...`
    if db.name == "readme.db":
        (tmp_path / "openwrt").symlink_to(db.parent / "openwrt")
    for name, src in FILES.items():
        shutil.copy(src, work / name)
    monkeypatch.chdir(work)
    try:
        code: object = main(argv)
    except SystemExit as exc:           # argparse refused it
        code = exc.code
    err = capsys.readouterr().err
    assert code == 0, f"{source}:{line}: hoplab {shlex.join(argv)} exited {code}: {err}"
