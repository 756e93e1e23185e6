"""The CLI, the HTML report and the dashboard give the same verdicts for the same
selection: one function (analysis.groups.compare_groups) decides the groups and the
verdicts, and the three only render its result."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from hoplab.cli.main import main
from hoplab.record import Metric, RunRecord
from hoplab.render.report import build_report
from hoplab.store import open_store
from hoplab.web.app import Dashboard

# Two tests at very different rates, each 5 % better on B: pooled into one figure the
# two levels swamp the change (the dashboard used to say "same"); test by test it is
# clear with 5 repetitions a side (the smallest p of 5 + 5 runs is 0.008).
LEVELS = {"bulk": 100e6, "small": 10e6}


def _run(test: str, version: str, rep: int) -> RunRecord:
    level = LEVELS[test] * (1.05 if version == "v2" else 1.0) * (1 + rep / 1000)
    return RunRecord(experiment="wan", test=test, kind="tcp", repetition=rep, variant={},
                     labels={"version": version}, started_at=1.7e9 + rep, duration_s=10.0,
                     metadata={"hoplab_version": "0.1.0"},
                     metrics=[Metric("goodput", level, "bit/s"),
                              Metric("retransmits", 10.0 + rep, "count")])


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = str(tmp_path / "runs.db")
    with open_store(path) as store:
        for test in LEVELS:
            for version in ("v1", "v2"):
                for rep in range(1, 6):
                    store.save_run(_run(test, version, rep))
    return path


def _from_json(data: dict[str, object]) -> dict[tuple[str, str], str]:
    groups = data["groups"]
    assert isinstance(groups, list)
    return {(g["title"], m["metric"]): m["verdict"] for g in groups for m in g["metrics"]}


def test_cli_report_and_dashboard_agree_test_by_test(
        db: str, capsys: pytest.CaptureFixture[str]) -> None:
    expected = {("wan / bulk", "goodput"): "better", ("wan / small", "goodput"): "better",
                # The same retransmits on both sides, 11 to 15: their interval reaches
                # past 2 %, so no sameness is shown either.
                ("wan / bulk", "retransmits"): "unclear",
                ("wan / small", "retransmits"): "unclear"}

    assert main(["compare", "version=v1", "version=v2", "--db", db, "--json"]) == 0
    cli = _from_json(json.loads(capsys.readouterr().out))

    with open_store(db) as store:
        resp = Dashboard(store).handle("/api/compare?a=version%3Dv1&b=version%3Dv2")
        assert resp.status == 200, resp.body
        dashboard = _from_json(json.loads(resp.body))
        page = Dashboard(store).handle("/compare?a=version%3Dv1&b=version%3Dv2")
        runs = [store.get_run(r.id) for r in store.list_runs()]

    text = build_report(runs, "test store")
    report = {}
    for title, body in re.findall(r'<section class="comparison" data-group="([^"]+)">(.*?)'
                                  r"</section>", text, re.S):
        for label, verdict in re.findall(r'<td class="">([^<]+)</td>(?:<td[^>]*>[^<]*</td>)'
                                         r'{7}<td[^>]*><span class="verdict \w+">([^<]+)<',
                                         body):
            report[(html.unescape(title), {"retrans": "retransmits"}.get(label, label))] = \
                {"no clear difference": "unclear"}.get(verdict, verdict)
    assert cli == expected
    assert dashboard == cli
    assert report == cli
    # The dashboard's page counts the same verdicts as its JSON.
    assert ("2 better, 0 worse, 0 same, 2 no clear difference, 0 without a verdict"
            in page.body.decode())
