"""Seed 002 on real kernels, as a user runs it (docs/vm.md, examples/vm/kernels.toml):
NAT through r1, a VM, on Debian's 6.1 and 6.12, r1 profiled. `hoplab run` prints the
goodput through each kernel, the verdict between them (`report = true`), a flame graph
of each kernel's r1 and their profile diff. Each run's record names the release its VM
booted, labelled kernel=RELEASE. Shortened: a 2 s test, one repetition."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from hoplab.nodes.ssh_facts import TOOLS
from hoplab.store import open_store
from hoplab.tool_table import version_args
from tests.helpers.lab import hoplab

pytestmark = [pytest.mark.root, pytest.mark.pairs,
              pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None,
                                 reason="qemu-system-x86 is not installed")]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "vm" / "kernels.toml"
RELEASES = ("6.1.0-47-amd64", "6.12.100+deb12-amd64")


def host_tools() -> dict[str, str]:
    """This machine's tools' versions, as a device's facts say them."""
    return {t: subprocess.run([t, version_args(t)[0]], stdin=subprocess.DEVNULL,
                              capture_output=True, text=True, check=True
                              ).stdout.splitlines()[0].strip() for t in TOOLS}


def test_the_example_compares_two_kernels_with_their_profiles(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)     # where the report's flame graphs are written
    db = str(tmp_path / "runs.db")
    done = hoplab("run", str(EXAMPLE), "--set", "duration=2s", "--repeat", "1", "--db", db,
                  timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    out = done.stdout
    with open_store(db) as store:
        runs = [store.get_run(r.id, series=False) for r in store.list_runs({})]
    assert [r.status for r in runs] == ["ok", "ok"], [r.error for r in runs]
    seen = {}
    for rec in runs:
        vm = rec.metadata["lab"]["nodes"]["r1"]["vm"]
        assert rec.labels["kernel"] == vm["release"]
        assert vm["vcpus"] == 2 and vm["accel"] in ("tcg", "kvm")
        assert (rec.metric("goodput") or 0) > 10e6, rec.metrics
        seen[vm["release"]] = rec.metadata["nodes"]["r1"]["kernel"]
        # Its tools are this machine's files (its root is this one's), their versions
        # read here: what the guest's own runs printed (tests/unit/test_ssh_parts.py).
        assert rec.metadata["nodes"]["r1"]["tools"] == host_tools()
        # Its clock is read from bash's $EPOCHREALTIME, no process per exchange.
        assert rec.metadata["clocks"]["r1"]["method"] == "epochrealtime", rec.metadata
        # Each variant boots a VM of its own: a new machine, not one that rebooted.
        assert "rebooted" not in rec.metadata, rec.metadata["rebooted"]
        prof = rec.metadata["profile"]
        assert prof["status"] == "ok", prof.get("reason")
        assert 0 < prof["seconds"] < 4, prof["seconds"]   # the 2 s load phase only
    # The release each VM booted is the one its record names, and the one it ran.
    assert seen == {r: r for r in RELEASES}
    # The goodput through each kernel (the summary), then the report: the verdict
    # table of `hoplab compare`, a flame graph per kernel, their diff.
    assert out.count("goodput") >= 2 and "report: A = " in out
    for release in RELEASES:
        svg = tmp_path / f"hoplab-debian_{release}-flamegraph.svg"
        assert svg.is_file(), out
        # The guest kernel's receive path (virtio-net; this machine's links are veths).
        assert "virtnet_poll" in svg.read_text()
    assert len(list(tmp_path.glob("hoplab-*-diff.svg"))) == 1
    assert "top 10 symbols by self time" in out, out
    shown = hoplab("show", str(runs[0].id), "--db", db, "--json")
    assert shown.returncode == 0 and json.loads(shown.stdout)["labels"]["kernel"]
