"""Namespace names say which lab, and which hoplab instance (run dir), they belong to,
unambiguously; `hoplab clean` matches them exactly.

Lab `a` with node `b-c` and lab `a-b` with node `c` both got `hoplab-a-b-c`;
`hoplab clean t` matched by prefix and took lab `t-1`'s leftovers (and killed their
processes) for its own; a clean under another HOPLAB_RUN_DIR took this one's namespaces
for leftovers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hoplab.lab import where, wire
from hoplab.lab.clean import _takes
from hoplab.lab.plan import netns_name

IN_ANOTHER_RUN_DIR = """
import json, sys
from hoplab.lab import where, wire
from hoplab.lab.plan import netns_name
mine = netns_name("lab", "client")
print(json.dumps({"mine": mine, "wire": wire.netns_name("lab", 2),
                  "lab_of": [where.lab_of(n) for n in sys.argv[1:] + [mine]],
                  "other": [where.other_instance(n) for n in sys.argv[1:] + [mine]]}))
"""


def _in_run_dir(run_dir: Path, *names: str) -> dict[str, object]:
    env = dict(os.environ, HOPLAB_RUN_DIR=str(run_dir))
    out = subprocess.run([sys.executable, "-c", IN_ANOTHER_RUN_DIR, *names], env=env,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    result: dict[str, object] = json.loads(out)
    return result


def test_a_lab_and_its_nodes_name_a_namespace_no_other_lab_has() -> None:
    assert netns_name("a", "b-c") != netns_name("a-b", "c")
    assert where.lab_of(netns_name("a", "b-c")) == "a"
    assert where.lab_of(netns_name("a-b", "c")) == "a-b"
    # A wire's namespace is its lab's too, and no node's (a node name has no dot).
    assert where.lab_of(wire.netns_name("a-b", 3)) == "a-b"
    assert wire.netns_name("a", 3) not in {netns_name("a", n) for n in ("w", "w3", "w-3")}
    # The longest names fit a namespace's name (NAME_MAX) with room to spare.
    longest = netns_name("l" * 20, "N" * 31)
    assert len(longest) < 100 and where.lab_of(longest) == "l" * 20


def test_clean_of_a_name_takes_that_labs_leftovers_only() -> None:
    t1 = netns_name("t-1", "client")
    assert not t1.startswith(where.netns_prefix("t"))
    for force in (False, True):
        assert not _takes(t1, ["t"], force)
        assert _takes(t1, ["t-1"], force)
    assert _takes(netns_name("t", "x-1"), ["t"], False)
    assert _takes(wire.netns_name("t", 0), ["t"], False)


@pytest.mark.parametrize("name", ["hoplab-probe-4242", "hoplab-t-1-client", "hoplab-x"])
def test_a_namespace_of_no_known_owner_is_taken_only_by_force(name: str) -> None:
    assert where.lab_of(name) is None and not where.other_instance(name)
    assert not _takes(name, [], False)
    assert _takes(name, [], True)
    assert not _takes(name, ["t"], True)


def test_each_run_dir_names_its_own_and_never_takes_the_others(tmp_path: Path) -> None:
    here = netns_name("lab", "client")
    there = _in_run_dir(tmp_path / "run", here)
    mine = str(there["mine"])
    # Another run dir: another prefix for the same lab and node, and the default one's
    # namespaces are not its own (and the other way round).
    assert mine != here and mine.startswith("hoplab-") and mine.endswith("~lab.client")
    assert there["lab_of"] == [None, "lab"] and there["other"] == [True, False]
    assert str(there["wire"]).startswith(mine.removesuffix("client"))
    assert where.lab_of(mine) is None and where.other_instance(mine)
    for names in ([], ["lab"]):
        for force in (False, True):
            assert not _takes(mine, names, force)
    # The same run dir, named another way, is the same instance.
    again = _in_run_dir(tmp_path / "run" / ".." / "run")
    assert again["mine"] == mine
    assert _in_run_dir(tmp_path / "other")["mine"] != mine
