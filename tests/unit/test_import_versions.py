"""Imported runs carry their source's measurement version, so compare never pairs them with
hoplab's own runs as like with like (Flent's goodput is the mean of its rate points)."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.analysis.groups import compare_groups
from hoplab.errors import UsageError
from hoplab.importers import Options, load_file
from hoplab.record import IMPORTED_MEASUREMENT_VERSIONS, MEASUREMENT_VERSION, RunRecord
from hoplab.store import open_store
from tests.helpers.runs import make_run

DATA = Path(__file__).resolve().parents[1] / "data"
FLENT = DATA / "flent" / "tcp_2up_iperf_loopback.flent.gz"
IPERF3 = DATA / "iperf3" / "tcp_upload.json"


def _imported(path: Path, rep: int, run_id: int) -> RunRecord:
    run = load_file(path, Options(test="bulk"))
    run.repetition, run.id = rep, run_id
    return run


def _hoplab_runs(start_id: int) -> list[RunRecord]:
    return [make_run("bulk", rep=i + 1, run_id=start_id + i, goodput=g)
            for i, g in enumerate((9.0e9, 9.1e9, 9.2e9))]


def test_each_source_has_its_own_version_apart_from_hoplabs() -> None:
    versions = {load_file(FLENT, Options()).measurement_version,
                load_file(IPERF3, Options()).measurement_version}
    assert versions == {IMPORTED_MEASUREMENT_VERSIONS["flent"],
                        IMPORTED_MEASUREMENT_VERSIONS["iperf3"]}
    assert MEASUREMENT_VERSION not in versions and len(versions) == 2


@pytest.mark.parametrize("path", [FLENT, IPERF3])
def test_compare_refuses_imports_against_hoplab_runs(path: Path) -> None:
    imported = [_imported(path, i + 1, 10 + i) for i in range(3)]
    with pytest.raises(UsageError, match="measurement versions"):
        compare_groups(imported, _hoplab_runs(20), ["goodput"])
    with pytest.raises(UsageError, match="measurement versions"):
        compare_groups(_hoplab_runs(20), imported, ["goodput"])


def test_imports_of_one_source_compare_with_each_other() -> None:
    a = [_imported(FLENT, i + 1, 10 + i) for i in range(3)]
    b = [_imported(FLENT, i + 1, 20 + i) for i in range(3)]
    result = compare_groups(a, b, ["goodput"])
    assert result is not None


def test_an_import_stored_by_an_older_hoplab_reads_back_with_its_sources_version(
        tmp_path: Path) -> None:
    old = load_file(FLENT, Options())
    old.measurement_version = 1  # what imports were marked with before
    with open_store(str(tmp_path / "runs.db")) as store:
        run_id = store.save_run(old)
        back = store.get_run(run_id)
    assert back.measurement_version == IMPORTED_MEASUREMENT_VERSIONS["flent"]
