"""The pool's files longest first, so that its two workers end together.

`make test` deals whole files to its two workers (`--dist loadfile`), a file to a worker
as one ends. pytest-xdist deals them by number of tests, most first, unless told
`--no-loadscope-reorder`; then it deals them in collection order, which this plugin sets:
longest first by the seconds each file took in a measured pool run (tests/durations.json),
each file's tests in their own order. Dealt by count, the one-test file of 80 s
(test_nat_versions) came last of 80; a worker ran it while the other had ended. A file
not yet measured counts as the median file. Run as a module, it writes the durations
from the JUnit XML of a pool run:

    pytest -n 2 --dist loadfile ... --junitxml=pool.xml
    python -m tests.helpers.order pool.xml > tests/durations.json

The `pairs` phase (VM tests two at a time, `--dist load`) deals its tests in the same
order, so its files' seconds are in there too, from their phase of 12c1b54's run (its
longest file, test_vm_kernels, came last there and ran 33 s alone): add them back
after writing the file from a pool run.
"""

from __future__ import annotations

import json
import statistics
import sys
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import pytest

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
ROOT = DURATIONS.parents[1]

T = TypeVar("T")


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def longest_first(nodeids: Sequence[str], items: Sequence[T],
                  seconds: Mapping[str, float]) -> list[T]:
    """`items` (whose ids are `nodeids`) by file, the files longest first; a file's own
    items keep their order, and files of equal seconds their order of collection."""
    files: dict[str, list[T]] = {}
    for nodeid, item in zip(nodeids, items, strict=True):
        files.setdefault(file_of(nodeid), []).append(item)
    known = [seconds[f] for f in files if f in seconds]
    unknown = statistics.median(known) if known else 0.0
    order = sorted(files, key=lambda f: -seconds.get(f, unknown))
    return [item for f in order for item in files[f]]


def load(path: Path = DURATIONS) -> dict[str, float]:
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    return {str(k): float(v) for k, v in data.items()}


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items[:] = longest_first([i.nodeid for i in items], items, load())


def _path_of(classname: str) -> str | None:
    """JUnit's classname (tests.lab.test_web, or .Class after it) as a file."""
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        rel = "/".join(parts[:n]) + ".py"
        if (ROOT / rel).is_file():
            return rel
    return None


def from_junit(paths: Sequence[Path]) -> dict[str, float]:
    """Seconds per test file (setup, call and teardown of each test), summed over the
    JUnit XML files of a run."""
    out: dict[str, float] = {}
    for p in paths:
        for case in ET.parse(p).getroot().iter("testcase"):
            f = _path_of(case.get("classname", ""))
            if f is not None:
                out[f] = out.get(f, 0.0) + float(case.get("time", "0") or 0)
    return {f: round(s, 1) for f, s in sorted(out.items(), key=lambda kv: -kv[1])}


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: python -m tests.helpers.order JUNIT.xml... > tests/durations.json")
    json.dump(from_junit([Path(a) for a in sys.argv[1:]]), sys.stdout, indent=1)
    sys.stdout.write("\n")
