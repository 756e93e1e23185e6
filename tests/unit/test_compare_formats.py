"""`hoplab compare --format text|markdown|json` and `--fail-on` (issue 21): the headline
first, the same sentence in every format; a markdown table ready for a pull request;
exit 3 for a CI gate."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import pytest

from hoplab.analysis.compare import MetricComparison
from hoplab.analysis.groups import Comparison, GroupComparison
from hoplab.cli.main import main
from hoplab.render.comparison import headline
from hoplab.store import open_store
from tests.helpers.runs import make_run


@pytest.fixture
def db(tmp_path: Path) -> str:
    # Six runs a side: goodput 20 % lower on 1.3, RTT the same, packets neutral.
    path = str(tmp_path / "runs.db")
    with open_store(path) as store:
        for rep in range(1, 7):
            for fw, goodput in (("1.2", 100e6), ("1.3", 80e6)):
                store.save_run(make_run(rep=rep, labels={"firmware": fw},
                                        goodput=goodput + rep * 1e5, rtt_median=10 + rep / 10,
                                        packets=1000.0 + rep))
    return path


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["compare", "firmware=1.2", "firmware=1.3", *args])
    return code, capsys.readouterr().out


def test_every_format_leads_with_the_same_headline(db: str,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = _cli(capsys, "--db", db, "--json")
    assert code == 0
    data = json.loads(doc)
    goodput = next(m for m in data["groups"][0]["metrics"] if m["metric"] == "goodput")
    # The headline quotes the row's own figures: change, interval, verdict.
    lo, hi = goodput["ci_low_pct"], goodput["ci_high_pct"]
    expected = (f"firmware=1.3 against firmware=1.2: goodput {goodput['change_pct']:+.1f} % "
                f"[{lo:+.1f}, {hi:+.1f}] worse; 1 with no clear difference, "
                "1 without a verdict")
    assert goodput["change_pct"] == pytest.approx(-19.9, abs=0.05)
    assert data["headline"] == expected
    for fmt in ("text", "markdown"):
        code, out = _cli(capsys, "--db", db, "--format", fmt)
        assert code == 0
        assert out.splitlines()[0] == expected, fmt
    code, out = _cli(capsys, "--db", db)                # text is the default
    assert out.splitlines()[0] == expected
    code, out = _cli(capsys, "--db", db, "--format", "json")
    assert json.loads(out) == data                      # --json is --format json


def test_markdown_is_a_github_table(db: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _cli(capsys, "--db", db, "--format", "markdown")
    assert code == 0
    lines = out.splitlines()
    head = lines.index("| metric | n | A median | B median | change | 95 % CI | p | verdict |")
    assert lines[head + 1] == "|:--|--:|--:|--:|--:|--:|--:|:--|"
    rows = {line.split(" | ")[0][2:]: line for line in lines[head + 2:]
            if line.startswith("| ")}
    assert list(rows) == ["goodput", "RTT median", "packets"]
    assert rows["goodput"].endswith("| -19.9 % | -20.2 .. -19.7 % | 0.0022 | **worse** |")
    assert rows["RTT median"].endswith("| no clear difference |")
    assert "**wan / bulk**: A firmware=1.2: 6 runs (1, 3, 5, 7, 9, 11) against B " \
           "firmware=1.3: 6 runs (2, 4, 6, 8, 10, 12)" in lines
    assert any(line.startswith("- note: no clear difference: the smallest change")
               for line in lines)


def test_markdown_escapes_what_the_user_wrote(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = str(tmp_path / "runs.db")
    with open_store(path) as store:
        for rep in range(1, 5):
            for fw, goodput in (("a|b", 100e6), ("<b>x</b>", 50e6)):
                store.save_run(make_run("bu|lk_*", rep=rep, labels={"firmware": fw},
                                        goodput=goodput + rep))
    assert main(["compare", "firmware=a|b", "firmware=<b>x</b>", "--db", path,
                 "--format", "markdown"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith(r"firmware=\<b>x\</b> against firmware=a\|b: "
                                          "goodput -50.0 %")
    assert r"**wan / bu\|lk\_\***" in out
    for line in out.splitlines():
        if line.startswith("| "):       # every row of the table has its 8 cells
            assert len(re.findall(r"(?<!\\)\|", line)) == 9, line


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_fail_on_worse_exits_3_after_printing(db: str, capsys: pytest.CaptureFixture[str],
                                              fmt: str) -> None:
    code, out = _cli(capsys, "--db", db, "--format", fmt, "--fail-on", "worse")
    assert code == 3
    assert "worse" in out
    # No worse row: 0. Another verdict may be asked for, by its word as well.
    assert _cli(capsys, "--db", db, "--format", fmt, "--fail-on", "worse",
                "--metric", "rtt_median")[0] == 0
    assert _cli(capsys, "--db", db, "--format", fmt, "--metric", "rtt_median",
                "--fail-on", "worse,no clear difference")[0] == 3


@pytest.mark.parametrize(("args", "message"), [
    (["--fail-on", "wrose"], "--fail-on 'wrose': not a verdict; use one of better, worse"),
    (["--json", "--format", "markdown"], "--json and --format markdown: give one"),
])
def test_bad_format_arguments_exit_2(db: str, capsys: pytest.CaptureFixture[str],
                                     args: list[str], message: str) -> None:
    assert main(["compare", "firmware=1.2", "firmware=1.3", "--db", db, *args]) == 2
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def _row(metric: str, verdict: str, change: float, ci: tuple[float, float] = (math.nan,
                                                                              math.nan)
         ) -> MetricComparison:
    return MetricComparison(metric=metric, unit="bit/s", flow=None, node=None, key=None,
                            a_values=(1.0,) * 4, b_values=(1.0,) * 4, a_median=1.0,
                            b_median=1.0, change_pct=change, ci_low_pct=ci[0],
                            ci_high_pct=ci[1], p_value=0.01, verdict=verdict)


def _group(title: str, *rows: MetricComparison) -> GroupComparison:
    return GroupComparison(title=title, kind="tcp", a_label="", b_label="", a_ids=(1,),
                           b_ids=(2,), warnings=(), metrics=rows)


def test_headline_leads_with_the_largest_regression_across_groups() -> None:
    result = Comparison(groups=(
        _group("wan / bulk", _row("goodput", "worse", -12.0, (-14.0, -10.0)),
               _row("throughput_p5", "better", 60.0, (50.0, 70.0)),
               *(_row("retransmits", "unclear", 1.0) for _ in range(10))),
        _group("wan / up", _row("goodput", "worse", -49.04, (-49.62, -48.28)),
               _row("throughput_p5", "worse", 5.0), _row("retransmits", "worse", math.nan),
               _row("sent_rate", "better", 3.0), _row("packets", "n/a", 3.0),
               *(_row("retransmits", "unclear", 1.0) for _ in range(10)))),
        unmatched=())
    assert headline(result) == ("B against A: goodput (wan / up) -49.0 % [-49.6, -48.3] "
                                "worse; 3 more worse, 2 better, 20 with no clear difference, "
                                "1 without a verdict")
    # An improvement leads when nothing is worse; with neither, the counts say so.
    better = Comparison(groups=(_group("g", _row("goodput", "better", 25.0),
                                       _row("sent_rate", "same", 0.1)),), unmatched=())
    assert headline(better, "v1", "v2") == "v2 against v1: goodput +25.0 % better; 1 same"
    steady = Comparison(groups=(_group("g", _row("goodput", "unclear", 2.5),
                                       _row("retransmits", "not enough data", 9.0)),),
                        unmatched=())
    assert headline(steady) == ("B against A: nothing better or worse; 1 with no clear "
                                "difference, 1 without a verdict")
