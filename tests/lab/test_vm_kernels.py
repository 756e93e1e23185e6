"""The same experiment on two kernels (docs/vm.md, examples/vm): seed 002's NAT router
as a VM, its kernel a matrix axis, Debian's 6.1 and 6.12. Each run's record names its
VM's release (lab.nodes.r1.vm) and carries the label kernel=RELEASE, and `hoplab
compare` takes the two kernels' runs by that label. The second variant's new VM is
not taken for the first one rebooted. The example's own file, with a
2 s test, one repetition and no profile (perf takes about a minute to start in a TCG
guest here)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tests.helpers.lab import hoplab

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None,
                                 reason="qemu-system-x86 is not installed")]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vm"
RELEASES = ("6.1.0-47-amd64", "6.12.100+deb12-amd64")


def test_two_kernels_are_stored_by_release_and_compared(tmp_path: Path) -> None:
    (tmp_path / "lab.toml").write_text((EXAMPLE / "lab.toml").read_text())
    text = (EXAMPLE / "kernels.toml").read_text()
    assert 'duration = "5s"' in text and "[profile]" in text
    text = text.replace('duration = "5s"', 'duration = "2s"')
    text = text[:text.index("[profile]")] + text[text.index("[matrix]"):]
    (tmp_path / "kernels.toml").write_text(text)
    db = str(tmp_path / "runs.db")
    done = hoplab("run", str(tmp_path / "kernels.toml"), "--repeat", "1", "--db", db,
                  "--json", timeout=600)
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)["runs"]
    assert [r["status"] for r in runs] == ["ok", "ok"], runs
    assert all(r["metrics"]["goodput"] > 10e6 for r in runs), runs
    seen = {}
    for r in runs:
        shown = hoplab("show", str(r["id"]), "--db", db, "--json")
        assert shown.returncode == 0, shown.stderr
        rec = json.loads(shown.stdout)
        vm = rec["metadata"]["lab"]["nodes"]["r1"]["vm"]
        assert rec["labels"]["kernel"] == vm["release"]
        assert vm["vcpus"] == 2 and vm["accel"] in ("tcg", "kvm")
        seen[vm["release"]] = rec["metadata"]["nodes"]["r1"]["kernel"]
        # Each variant boots a VM of its own: a new machine, not one that rebooted.
        assert "rebooted" not in rec["metadata"], rec["metadata"]["rebooted"]
    # The release each VM booted is the one its record names, and the one it ran.
    assert seen == {r: r for r in RELEASES}
    done = hoplab("compare", f"kernel={RELEASES[0]}", f"kernel={RELEASES[1]}", "--db", db)
    assert done.returncode == 0, done.stderr
    assert "goodput" in done.stdout
