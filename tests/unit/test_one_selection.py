"""One way to select runs (issue 19): every command reads a selection the same way
(analysis/select.py), on the store running the examples makes (real runs,
tests/helpers/doc_stores.py): ids, ranges, or conditions a comma joins; two sides
where a command compares, runs added together elsewhere; a key or value no run has
is an error that lists those there are, and so is a metric no selected run has."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hoplab.analysis.select import conditions, select_many
from hoplab.cli.main import main
from hoplab.errors import UsageError
from hoplab.store import open_store
from hoplab.web.app import Dashboard
from tests.helpers.doc_stores import examples_store


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, dict[str, list[int]]]:
    path = tmp_path_factory.mktemp("select") / "examples.db"
    return str(path), examples_store(path)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _ids(found: dict[str, list[int]], version: str | None = None,
         gro: str | None = None) -> list[int]:
    """The nat-regression runs (v1 then v2, gro on then off, 4 repetitions) of a version
    and gro value, and with a version, that version's two runs of nat-versions."""
    nat = found["nat-regression"]
    out = [i for n, i in enumerate(nat)
           if version in (None, f"v{n // 8 + 1}") and gro in (None, ("on", "off")[n // 4 % 2])]
    if version is not None:
        v = int(version[1:])
        out += found["versions"][2 * (v - 1):2 * v]
    return out


@pytest.mark.parametrize("spec", ["version=v1,test=nat-bulk", "4-7",
                                  "experiment=nat-regression,test=nat-bulk"])
def test_plot_takes_the_selections_the_examples_write(
        db: tuple[str, dict[str, list[int]]], spec: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "box.png"
    code, _, err = _run(capsys, "plot", spec, "--kind", "box", "--metric", "goodput",
                        "--db", db[0], "-o", str(out))
    assert code == 0, err
    assert out.read_bytes().startswith(b"\x89PNG")


def test_several_arguments_add_their_runs_in_plot_and_report_alike(
        db: tuple[str, dict[str, list[int]]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    path, found = db
    either = sorted({*_ids(found, "v1"), *_ids(found, gro="on")})
    assert len(either) == 14                # both would be 4: the v1 runs with gro on
    with open_store(path) as store:
        assert sorted(select_many(store, ["version=v1", "gro=on"])) == either
    monkeypatch.chdir(tmp_path)
    code, out, err = _run(capsys, "report", "version=v1", "gro=on", "--db", path,
                          "-o", "r.html")
    assert code == 0, err
    assert "r.html: 14 runs" in out
    code, out, err = _run(capsys, "plot", "version=v1", "gro=on", "--kind", "bars",
                          "--db", path)
    assert code == 0, err
    assert out.strip() == f"hoplab-{'-'.join(map(str, either[:4]))}-and-10-more-bars.png"


def _samples(capsys: pytest.CaptureFixture[str], path: str, runs: list[int]) -> int:
    """The samples of these runs' profiles together, as `hoplab profile --json` counts
    each: what a graph of them pooled must hold."""
    total = 0
    for run in runs:
        code, out, err = _run(capsys, "profile", str(run), "--json", "--db", path)
        assert code == 0, err
        total += json.loads(out)["samples"]
    return total


def test_flamegraph_diff_takes_two_selections_and_pools_each_side(
        db: tuple[str, dict[str, list[int]]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    path, found = db
    side_b = _ids(found, "v2")
    samples = _samples(capsys, path, side_b)
    svg = tmp_path / "d.svg"
    code, _, err = _run(capsys, "flamegraph", "--diff", "version=v1", "version=v2",
                          "--db", path, "-o", str(svg))
    assert code == 0, err
    text = svg.read_text()
    # A differential graph is drawn on B's samples: every profile of side B, pooled.
    assert f"<title>all ({samples:,} samples, 100%)</title>" in text
    assert f"version=v2 (runs {', '.join(map(str, side_b))})" in text
    # Two runs by id keep the one-run title.
    a, b = found["wireguard-profile"][:2]
    code, _, err = _run(capsys, "flamegraph", "--diff", str(a), str(b), "--db", path,
                          "-o", str(svg))
    assert code == 0, err
    assert f"-&gt; run {b}</text>" in svg.read_text()


def test_flamegraph_of_a_selection_pools_its_runs(
        db: tuple[str, dict[str, list[int]]], tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """One graph of every profiled run a selection names (what `hoplab run`'s report
    draws per variant); it was refused as "selects N runs"."""
    path, found = db
    side = _ids(found, "v2")
    samples = _samples(capsys, path, side)
    svg = tmp_path / "p.svg"
    code, out, err = _run(capsys, "flamegraph", "version=v2", "--db", path, "-o", str(svg))
    assert code == 0, err
    text = svg.read_text()
    assert f"<title>all ({samples:,} samples, 100%)</title>" in text
    assert f"{samples} samples, {len(side)} runs pooled" in text
    assert f"(runs {', '.join(map(str, side))})" in text
    # By ids, the same pooled graph; the default file is named for the selection.
    ids = ",".join(map(str, side))
    code, out, err = _run(capsys, "flamegraph", ids, "--db", path)
    assert code == 0, err
    assert out.strip() == f"hoplab-{ids.replace(',', '_')}-flamegraph.svg"
    Path(out.strip()).unlink()


def test_runs_filter_joins_conditions_with_a_comma(
        db: tuple[str, dict[str, list[int]]], capsys: pytest.CaptureFixture[str]) -> None:
    path, found = db
    for argv in (["--filter", "version=v1,test=nat-bulk"],
                 ["--filter", "version=v1", "--filter", "test=nat-bulk"]):
        code, out, err = _run(capsys, "runs", *argv, "--json", "--db", path)
        assert code == 0, err
        assert [r["id"] for r in json.loads(out)] == sorted(_ids(found, "v1"))


@pytest.mark.parametrize(("argv", "message"), [
    (["runs", "--filter", "nosuch=1"],
     "no run has nosuch; the keys are the columns experiment, experiment_id, id, kind, "
     "status, test and the runs' labels and variant keys: device, gro, perturb, qos, "
     "version, wireguard"),
    (["runs", "--filter", "version=v10"], "version takes v1, v2, v3, v4, v5, v6, v7, v8, v9"),
    (["runs", "--filter", "wireguard=yes"], "wireguard takes false, true"),
    (["runs", "--filter", "status=done"], "status takes ok, failed, interrupted"),
    (["runs", "--filter", "4-7"], "for run ids write id=12"),
    (["plot", "gro=of", "--kind", "box"], "no runs match 'gro=of' in sqlite "),
    (["plot", "gro=of", "--kind", "box"], "(gro takes off, on)"),
    (["report", "3", "versio=v1", "-o", "x.html"], "no run has versio;"),
    (["compare", "version=v1", "version=v3,gro=on"],
     "no runs match 'version=v3,gro=on' in sqlite "),
    (["compare", "version=v1", "version=v3,gro=on"],
     "each condition holds for some run, but no run meets them all"),
    (["flamegraph", "--diff", "version=v1", "version=v0"], "version takes v1, v2,"),
    (["profile", "--diff", "version=v1", "gro=maybe"], "gro takes off, on"),
    (["trend", "goodput", "--filter", "experiment=version"],
     "experiment takes exit-70ms, nat-regression, qos-under-load, router-throughput, "
     "sfq-perturb, versions, "
     "wireguard-profile"),
    (["show", "test=nat-bulk"], "RUN 'test=nat-bulk' selects 34 runs"),
    (["export", "tset=ping"], "no run has tset"),
])
def test_a_key_or_value_no_run_has_is_an_error_listing_those_there_are(
        db: tuple[str, dict[str, list[int]]], argv: list[str], message: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, *argv, "--db", db[0])
    assert code == 2
    assert message in err
    assert out == ""


def test_a_valid_filter_that_matches_nothing_is_an_empty_list(
        db: tuple[str, dict[str, list[int]]], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "runs", "--filter", "status=failed", "--db", db[0])
    assert code == 0, err
    assert "no runs in sqlite" in out and "match" in out


def test_one_run_commands_take_a_selection_of_one(
        db: tuple[str, dict[str, list[int]]], capsys: pytest.CaptureFixture[str]) -> None:
    path, found = db
    code, out, err = _run(capsys, "show", "experiment=exit-70ms", "--json", "--db", path)
    assert code == 0, err
    assert json.loads(out)["id"] == found["exit-70ms"][0]
    code, out, err = _run(capsys, "export", "experiment=sfq-perturb", "--db", path)
    assert code == 0, err
    assert json.loads(out)["run"]["id"] == found["sfq-perturb"][0]
    wg = found["wireguard-profile"][1]
    code, out, err = _run(capsys, "profile", f"{wg}", "--json", "--db", path)
    assert code == 0, err


@pytest.mark.parametrize("argv", [
    ["compare", "version=v1", "version=v2", "--metric", "goodputt"],
    ["trend", "goodputt", "--by", "version"],
    ["plot", "version=v1", "--kind", "box", "--metric", "goodputt"],
])
def test_an_unknown_metric_lists_the_names_there_are(
        db: tuple[str, dict[str, list[int]]], argv: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, *argv, "--db", db[0])
    assert code == 2 and out == ""
    assert "'goodputt': no selected run has this metric (did you mean goodput" in err
    have = re.search(r"they have ([^;]*);", err)
    assert have is not None
    assert {"goodput", "retransmits", "throughput_median", "profile.wireguard"} <= \
        set(have.group(1).split(", "))
    # The name is no hoplab metric either: the registry's names, families as prefix.*.
    registry = err.split("hoplab's metrics are ")[1].strip().split(", ")
    assert {"bytes_received", "latency_load", "web_load", "profile.*"} <= set(registry)


def test_a_registered_metric_the_runs_lack_lists_theirs(
        db: tuple[str, dict[str, list[int]]], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "compare", "qos=off", "qos=on", "--metric", "goodput",
                        "--db", db[0])
    assert code == 2
    assert "metric 'goodput': no selected run has this metric" in err
    assert "they have " in err and "web_load" in err
    assert "hoplab's metrics" not in err
    code, _, err = _run(capsys, "plot", "experiment=sfq-perturb", "--kind", "cdf",
                        "--metric", "rttt", "--db", db[0])
    assert code == 2
    assert "with --kind cdf it names a series, and no selected run has this one; they " \
           "have rtt" in err


def test_filters_read_as_the_command_line_reads_them() -> None:
    assert conditions(["version=v1,test=bulk", "gro=on"]) == \
        {"version": "v1", "test": "bulk", "gro": "on"}
    with pytest.raises(UsageError, match="gro is given twice"):
        conditions(["gro=on,gro=off"])


def test_the_dashboard_filters_as_the_command_line_does(
        db: tuple[str, dict[str, list[int]]]) -> None:
    path, found = db
    with open_store(path, read_only=True) as store:
        dash = Dashboard(store)
        resp = dash.handle("/api/runs?q=version%3Dv1%2Ctest%3Dnat-bulk")
        assert resp.status == 200
        assert [r["id"] for r in json.loads(resp.body)] == sorted(_ids(found, "v1"))
        for target in ("/api/runs?nosuch=1", "/runs?q=nosuch%3D1"):
            resp = dash.handle(target)
            assert resp.status == 400
            assert "no run has nosuch; the keys are the columns" in resp.body.decode()
        resp = dash.handle("/api/runs?status=failed")
        assert resp.status == 200 and json.loads(resp.body) == []
