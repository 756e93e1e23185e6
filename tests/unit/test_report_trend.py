"""`hoplab report` of a series of versions marks the change points `hoplab trend` finds."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from hoplab.cli.main import main
from hoplab.store import open_store
from tests.helpers.runs import make_run


def test_report_of_versions_marks_the_step_and_names_steady_metrics(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    rng = np.random.default_rng(5)
    with open_store(str(db)) as store:
        for i in range(24):
            level = 300e6 * (0.51 if i >= 12 else 1.0)          # seed 002's -49 %
            for rep in range(1, 4):
                store.save_run(make_run(rep=rep, labels={"version": f"v{i + 1}"},
                                        goodput=float(rng.normal(level, level * 0.05)),
                                        rtt_median=float(rng.normal(2.0, 0.1))))
    out = tmp_path / "r.html"
    assert main(["report", "test=bulk", "-o", str(out), "--db", str(db)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "<h2>Change points by version</h2>" in text
    assert "<h3>wan/bulk: goodput</h3>" in text
    assert "v12 → v13" in text and "-49" in text
    fig = json.loads(re.search(r'hoplabDraw\("trend-\d+", (\{.*?\})\);</script>',
                               text).group(1))  # type: ignore[union-attr]
    assert [s["x0"] for s in fig["layout"]["shapes"]] == [11.5]
    assert len(fig["data"][0]["y"]) == 72            # every repetition drawn
    assert "no change point in wan/bulk: rtt_median" in text


def test_report_of_two_sides_has_no_trend(tmp_path: Path) -> None:
    db = tmp_path / "runs.db"
    with open_store(str(db)) as store:
        for v in ("a", "b"):
            for rep in range(1, 4):
                store.save_run(make_run(rep=rep, labels={"version": v}, goodput=1e6 * rep))
    out = tmp_path / "r.html"
    assert main(["report", "test=bulk", "-o", str(out), "--db", str(db)]) == 0
    assert "Change points" not in out.read_text(encoding="utf-8")


def test_report_follows_each_value_of_another_variant_key_apart(tmp_path: Path) -> None:
    # gro=off 5 % below gro=on throughout; only gro=on steps (-20 % from v7). Pooled,
    # the two levels would read as noise around one series.
    db = tmp_path / "runs.db"
    rng = np.random.default_rng(9)
    with open_store(str(db)) as store:
        for i in range(12):
            for gro in ("off", "on"):
                level = 100e6 * (0.95 if gro == "off" else 0.8 if i >= 6 else 1.0)
                for rep in range(1, 4):
                    store.save_run(make_run(rep=rep, labels={"version": f"v{i + 1}"},
                                            variant={"gro": gro},
                                            goodput=float(rng.normal(level, level * 0.01))))
    out = tmp_path / "r.html"
    assert main(["report", "test=bulk", "-o", str(out), "--db", str(db)]) == 0
    text = out.read_text(encoding="utf-8")
    assert "<h3>wan/bulk gro=on: goodput</h3>" in text and "v6 → v7" in text
    assert "no change point in wan/bulk gro=off: goodput" in text
    assert "<h3>wan/bulk: goodput</h3>" not in text
