"""The pool deals its files longest first (tests/helpers/order.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.helpers import order

IDS = ["tests/a.py::t1", "tests/a.py::t2", "tests/b.py::t1", "tests/c.py::t1",
       "tests/c.py::t2", "tests/c.py::t3", "tests/d.py::t1"]


def test_files_longest_first_each_files_tests_in_their_order() -> None:
    got = order.longest_first(IDS, IDS, {"tests/a.py": 10, "tests/b.py": 80,
                                         "tests/c.py": 30, "tests/d.py": 5})
    assert got == ["tests/b.py::t1", "tests/c.py::t1", "tests/c.py::t2", "tests/c.py::t3",
                   "tests/a.py::t1", "tests/a.py::t2", "tests/d.py::t1"]


def test_a_file_not_measured_counts_as_the_median_one() -> None:
    # Known: 80, 30 and 5 s, so a.py, not measured, counts 30 s as c.py does; of two
    # files of equal seconds, the one collected first comes first.
    got = order.longest_first(IDS, IDS, {"tests/b.py": 80, "tests/c.py": 30,
                                         "tests/d.py": 5})
    assert [order.file_of(i) for i in got] == [
        "tests/b.py", "tests/a.py", "tests/a.py", "tests/c.py", "tests/c.py", "tests/c.py",
        "tests/d.py"]
    # Nothing measured: collection order.
    assert order.longest_first(IDS, IDS, {}) == IDS


def test_the_durations_file_names_files_that_exist() -> None:
    seconds = order.load()
    assert seconds, "tests/durations.json"
    assert all((order.ROOT / f).is_file() and s >= 0 for f, s in seconds.items()), seconds


def test_durations_are_written_from_a_runs_junit_xml(tmp_path: Path) -> None:
    xml = tmp_path / "pool.xml"
    xml.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.unit.test_order" name="a" time="1.25"/>'
        '<testcase classname="tests.unit.test_order" name="b" time="2.5"/>'
        '<testcase classname="tests.helpers.order.Nested" name="c" time="4"/>'
        '<testcase classname="tests.gone" name="d" time="9"/>'
        '</testsuite></testsuites>')
    done = subprocess.run([sys.executable, "-m", "tests.helpers.order", str(xml)],
                          cwd=order.ROOT, capture_output=True, text=True, check=True)
    assert json.loads(done.stdout) == {"tests/helpers/order.py": 4.0,
                                       "tests/unit/test_order.py": 3.8}
