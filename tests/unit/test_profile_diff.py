"""hoplab profile --diff on real profiles with a known difference (tests/data/profile/diff):
a process that splits its CPU time 3:1 between two functions, then 1:1."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from hoplab.profile import fold
from hoplab.profile.diff import diff
from hoplab.record import Metric, RawOutput, RunRecord
from hoplab.store import open_store

DATA = Path(__file__).resolve().parents[1] / "data" / "profile" / "diff"
HOPLAB = str(Path(sys.executable).with_name("hoplab"))
THREE, ONE = "hoplab_burn_three", "hoplab_burn_one"


def text(name: str) -> str:
    return (DATA / f"{name}.folded").read_text()


def stacks(name: str) -> Counter[str]:
    return fold.without_pids(fold.parse(text(name)))


RATIO3 = [f"ratio3-{i:02d}" for i in range(1, 13)]
RATIO1 = [f"ratio1-{i}" for i in range(1, 7)]


def leaf_share(name: str, symbol: str) -> float:
    """An independent reading of a folded file: % of samples whose last frame is symbol."""
    total = hits = 0
    for line in text(name).splitlines():
        stack, count = line.rsplit(" ", 1)
        total += int(count)
        hits += int(count) if stack.split(";")[-1] == symbol else 0
    return 100 * hits / total


def test_a_known_change_is_found_beyond_noise() -> None:
    d = diff([stacks(n) for n in RATIO3[:6]], [stacks(n) for n in RATIO1], top=10)
    by = {c.symbol: c for c in d.symbols}
    three, one = by[THREE], by[ONE]
    # The shares are each profile's own, averaged with equal weights.
    assert three.a_pct == pytest.approx(sum(leaf_share(n, THREE) for n in RATIO3[:6]) / 6)
    assert three.b_pct == pytest.approx(sum(leaf_share(n, THREE) for n in RATIO1) / 6)
    assert three.a_values == pytest.approx(tuple(leaf_share(n, THREE) for n in RATIO3[:6]))
    # The burner splits its CPU time 3:1, then 1:1, between the two functions; the
    # other samples (a few %) are interrupts that land in the process.
    assert three.a_pct / (three.a_pct + one.a_pct) == pytest.approx(0.75, abs=0.01)
    assert three.b_pct / (three.b_pct + one.b_pct) == pytest.approx(0.50, abs=0.01)
    assert three.change_pts == pytest.approx(three.b_pct - three.a_pct)
    assert three.change_pts < -20 and one.change_pts > 20
    # Six profiles a side, completely separated: the exact two-sided p is 2 / C(12, 6).
    assert three.p == pytest.approx(2 / math.comb(12, 6)) and one.p == three.p
    assert three.beyond_noise and one.beyond_noise
    # The two largest changes come first; nothing else moved beyond noise.
    assert {d.symbols[0].symbol, d.symbols[1].symbol} == {THREE, ONE}
    assert [c.symbol for c in d.symbols if c.beyond_noise] in ([THREE, ONE], [ONE, THREE])
    assert d.a_top[0][0] == THREE and d.b_top[0][0] in (THREE, ONE)
    assert len(d.a_samples) == 6 and sum(d.a_samples) == sum(
        sum(stacks(n).values()) for n in RATIO3[:6])


def test_the_same_program_twice_is_noise() -> None:
    # Twelve profiles of the 3:1 split in two halves; one of them came out 67:33.
    d = diff([stacks(n) for n in RATIO3[:6]], [stacks(n) for n in RATIO3[6:]], top=10)
    assert d.tested and d.can_decide
    assert not any(c.beyond_noise for c in d.symbols)
    assert all(c.p is not None and c.p > 0.05 for c in d.symbols[:2])


def test_one_profile_a_side_gives_the_tables_but_no_verdict() -> None:
    d = diff([stacks("ratio3-01")], [stacks("ratio1-1")], top=3)
    by = {c.symbol: c for c in d.symbols}
    assert by[THREE].a_pct == pytest.approx(leaf_share("ratio3-01", THREE))
    assert by[THREE].b_pct == pytest.approx(leaf_share("ratio1-1", THREE))
    assert by[THREE].p is None and by[THREE].beyond_noise is None
    assert not d.tested and len(d.a_top) == 3


def test_three_profiles_a_side_cannot_decide() -> None:
    d = diff([stacks(n) for n in RATIO3[:3]], [stacks(n) for n in RATIO1[:3]])
    assert d.tested and not d.can_decide and d.min_p == pytest.approx(0.1)
    assert not any(c.beyond_noise for c in d.symbols)


def _run(name: str, version: str, rep: int) -> RunRecord:
    folded = (DATA / f"{name}.folded").read_bytes()
    total = sum(fold.parse(folded.decode()).values())
    prof = {"status": "ok", "frequency": 997, "phase": "load", "samples": total,
            "attribution": "host-wide", "top": [], "categories": {}, "by_node": {}}
    return RunRecord(experiment="burn", test="t", kind="tcp", repetition=rep,
                     variant={"version": version}, labels={}, started_at=1.7e9 + rep,
                     metadata={"profile": prof}, metrics=[Metric("goodput", 1e8, "bit/s")],
                     raw=[RawOutput("profile folded", folded)])


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "runs.db")
    with open_store(path) as store:
        for i, name in enumerate(RATIO3[:6], 1):
            store.save_run(_run(name, "a", i))
        for i, name in enumerate(RATIO1, 1):
            store.save_run(_run(name, "b", i))
        unprofiled = _run("ratio1-1", "b", 7)
        unprofiled.metadata = {}
        unprofiled.raw = []
        store.save_run(unprofiled)                      # run 13: no profile
    return path


def hoplab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([HOPLAB, *args], capture_output=True, text=True, check=False)


def test_cli_diffs_two_selections_as_json(db: str) -> None:
    done = hoplab("profile", "--diff", "version=a", "version=b", "--top", "5", "--json",
                  "--db", db)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["a"]["runs"] == [1, 2, 3, 4, 5, 6] and out["b"]["runs"] == list(range(7, 13))
    assert out["b"]["skipped_without_profile"] == [13]
    by = {s["symbol"]: s for s in out["symbols"]}
    assert by[THREE]["beyond_noise"] is True and by[ONE]["beyond_noise"] is True
    assert by[THREE]["p"] == pytest.approx(2 / 924)
    assert sum(s["beyond_noise"] for s in out["symbols"]) == 2
    assert [t["symbol"] for t in out["a"]["top"]][:2] == [THREE, ONE]
    assert out["test"]["fdr"] == 0.05 and out["test"]["tested"] is True


def test_cli_prints_both_top_tables_side_by_side(db: str) -> None:
    done = hoplab("profile", "--diff", "1-6", "7-12", "--db", db)
    assert done.returncode == 0, done.stderr
    assert "top 20 symbols by self time" in done.stdout
    assert THREE in done.stdout and "beyond noise" in done.stdout
    one = hoplab("profile", "--diff", "1", "7", "--db", db)
    assert one.returncode == 0 and "no test tells these changes from noise" in one.stdout


def test_cli_refuses_bad_sides(db: str) -> None:
    missing = hoplab("profile", "--diff", "1", "13", "--db", db)
    assert missing.returncode == 2 and "run 13 has no profile" in missing.stderr
    overlap = hoplab("profile", "--diff", "1-3", "3-5", "--db", db)
    assert overlap.returncode == 2 and "overlap" in overlap.stderr
    one_side = hoplab("profile", "--diff", "1", "--db", db)
    assert one_side.returncode == 2 and "exactly two" in one_side.stderr
    nothing = hoplab("profile", "--diff", "version=a", "version=zzz", "--db", db)
    assert nothing.returncode == 2 and "no runs match" in nothing.stderr


def test_one_run_without_diff_still_gives_its_tables(db: str) -> None:
    done = hoplab("profile", "1", "--top", "2", "--json", "--db", db)
    assert done.returncode == 0, done.stderr
    top = json.loads(done.stdout)["top"]
    assert top[0]["symbol"] == THREE
    assert top[0]["percent"] == pytest.approx(leaf_share("ratio3-01", THREE))
    two = hoplab("profile", "1", "2", "--db", db)
    assert two.returncode == 2 and "--diff" in two.stderr
