"""Hostile input to a fleet bundle (issue 29, parts 1 to 3): a manifest entry that climbs
out of the job's directory, files named outside the experiment's directory, special and
huge files. No store is needed: unpack reads through a query function, and what submit
would bundle is decided by named_files before the store is asked."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import hoplab.kinds  # noqa: F401  (the loader asks the registry of kinds)
from hoplab.errors import SpecError, UsageError
from hoplab.fleet.queue.bundle import Query, named_files, unpack
from hoplab.spec.experiment_loader import load_experiment
from tests.helpers.lab import HOPLAB

LAB = 'name = "f"\n[nodes.a]\n[nodes.b]\n[[links]]\nbetween = ["a", "b"]\ndelay = "1ms"\n'
EXP = ('lab = "lab.toml"\n{extra}\n[[tests]]\nname = "p"\nkind = "ping"\nfrom = "a"\n'
       'to = "b"\nduration = "1s"\n')


def _store(files: dict[str, bytes], modes: dict[str, int] | None,
           experiment: str = "exp.toml") -> Query:
    by_sha = {hashlib.sha256(c).hexdigest(): c for c in files.values()}
    manifest = {rel: hashlib.sha256(c).hexdigest() for rel, c in files.items()}

    def query(sql: str, **args: Any) -> list[dict[str, Any]]:
        if "hoplab_fleet_bundles" in sql:
            return [{"experiment": experiment, "files": manifest, "modes": modes}]
        return [{"content": by_sha[args["sha"]]}]
    return query


@pytest.mark.parametrize("rel", ["../../escaped", "{abs}", "a/../../../escaped", ""])
def test_unpack_refuses_an_entry_outside_the_job_directory(tmp_path: Path, rel: str) -> None:
    rel = rel.format(abs=tmp_path / "escaped")
    query = _store({"exp.toml": b"x", rel: b"#!/bin/sh\n"}, None)
    with pytest.raises(UsageError, match="would land outside the job's directory"):
        unpack(query, "b1", tmp_path / "jobs" / "here")
    assert not (tmp_path / "jobs").exists()  # nothing written, not even the good file
    assert not (tmp_path / "escaped").exists()


def test_unpack_refuses_an_experiment_path_outside(tmp_path: Path) -> None:
    query = _store({"exp.toml": b"x"}, None, experiment="../../exp.toml")
    with pytest.raises(UsageError, match="would land outside"):
        unpack(query, "b1", tmp_path / "jobs")


def test_unpack_keeps_each_files_mode(tmp_path: Path) -> None:
    files = {"exp.toml": b"a", "lab.toml": b"b", "bin/shape.sh": b"#!/bin/sh\n"}
    query = _store(files, {"exp.toml": 0o644, "lab.toml": 0o600, "bin/shape.sh": 0o755})
    start = unpack(query, "b1", tmp_path)
    assert start == tmp_path / "b1" / "exp.toml"
    got = {rel: (tmp_path / "b1" / rel).stat().st_mode & 0o7777 for rel in files}
    assert got == {"exp.toml": 0o644, "lab.toml": 0o600, "bin/shape.sh": 0o755}
    assert (tmp_path / "b1" / "bin/shape.sh").read_bytes() == b"#!/bin/sh\n"


def test_unpack_drops_setuid_bits(tmp_path: Path) -> None:
    query = _store({"exp.toml": b"a"}, {"exp.toml": 0o4755})
    unpack(query, "b1", tmp_path)
    assert (tmp_path / "b1" / "exp.toml").stat().st_mode & 0o7777 == 0o755


def _experiment(tmp_path: Path, extra: str = "", lab: str = LAB) -> Path:
    d = tmp_path / "exp"
    d.mkdir(exist_ok=True)
    (d / "lab.toml").write_text(lab)
    path = d / "exp.toml"
    path.write_text(EXP.format(extra=extra))
    return path


@pytest.mark.parametrize("argv", [
    '["sh", "../../../../tmp/p"]',    # climbs out
    '["sh", "/tmp/p"]',               # the bench's own /tmp/p
    '["sh", "out.sh"]',               # a link out of the directory (made below)
    '["sh", "fifo"]',                 # a FIFO
    '["../outside.sh"]',              # the program itself
])
def test_a_setup_argument_outside_or_special_is_refused_naming_the_key(
        tmp_path: Path, argv: str) -> None:
    path = _experiment(tmp_path, f'[matrix.s.on]\n"setup.a" = [{argv}]')
    (tmp_path / "outside.sh").write_text("exit 0\n")
    (path.parent / "out.sh").symlink_to(tmp_path / "outside.sh")
    os.mkfifo(path.parent / "fifo")
    with pytest.raises(SpecError) as got:
        named_files(load_experiment(path))
    assert got.value.key == "setup.a" and got.value.file == str(path), str(got.value)


def test_what_setup_names_inside_is_bundled_and_words_are_not(tmp_path: Path) -> None:
    path = _experiment(tmp_path, '[matrix.s.on]\n'
                                 '"setup.a" = [["sh", "qos/shape.sh", "-c", "10.0.0.0/8", '
                                 '"/usr/sbin/tc", "/proc/sys/net/ipv4/ip_forward"], '
                                 '["sh", "-c", "echo 3 > /sys/class/net/x/queues"]]')
    (path.parent / "qos").mkdir()
    (path.parent / "qos/shape.sh").write_text("exit 0\n")
    got = named_files(load_experiment(path))
    assert sorted(str(p.relative_to(path.parent)) for p in got) == \
        ["exp.toml", "lab.toml", "qos/shape.sh"]


def test_a_device_node_may_name_its_own_absolute_paths(tmp_path: Path) -> None:
    lab = LAB.replace("[nodes.b]", '[nodes.b]\n[nodes.c]\nssh = "root@192.0.2.1"')
    path = _experiment(tmp_path, '[matrix.s.on]\n"setup.c" = '
                                 '[["/etc/init.d/firewall", "restart"]]', lab)
    assert len(named_files(load_experiment(path))) == 2


TRACE_LAB = LAB.replace('delay = "1ms"', 'trace = "{trace}"')


@pytest.mark.parametrize("trace", ["/tmp/hoplab-t29-trace", "../t.txt"])
def test_a_trace_outside_the_directory_is_refused_naming_the_key(
        tmp_path: Path, trace: str) -> None:
    target = Path(trace) if trace.startswith("/") else tmp_path / "t.txt"
    target.write_text("0\n10\n")
    try:
        path = _experiment(tmp_path, lab=TRACE_LAB.format(trace=trace))
        with pytest.raises(SpecError) as got:
            named_files(load_experiment(path))
    finally:
        target.unlink()
    assert got.value.key == "links[0].trace" and got.value.file == str(path.parent /
                                                                        "lab.toml")
    assert "outside the experiment's directory" in str(got.value)


def test_a_trace_error_never_quotes_the_file(tmp_path: Path) -> None:
    secret = "root:$6$notreally:19000:0:99999:7:::"
    path = _experiment(tmp_path, lab=TRACE_LAB.format(trace="t.txt"))
    (path.parent / "t.txt").write_text(f"{secret}\n")
    with pytest.raises(SpecError) as got:
        load_experiment(path)
    assert "line 1" in str(got.value) and "notreally" not in str(got.value)
    (path.parent / "t.txt").write_text("5\n3\n")
    with pytest.raises(SpecError) as got:
        load_experiment(path)
    assert "line 2" in str(got.value) and " 3 " not in str(got.value)


def _check(path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*HOPLAB, "check", str(path)],
                          capture_output=True, text=True, timeout=60, check=False,
                          env={**os.environ, **env})


def test_check_refuses_a_fifo_trace_without_waiting(tmp_path: Path) -> None:
    path = _experiment(tmp_path, lab=TRACE_LAB.format(trace="fifo"))
    os.mkfifo(path.parent / "fifo")
    # Before the fix the check blocks in open(); the timeout ends the test, not the run.
    got = _check(path.parent / "lab.toml")
    assert got.returncode == 2
    assert "links[0].trace: trace file" in got.stdout + got.stderr
    assert "a FIFO, not a regular file" in got.stdout + got.stderr


def test_a_huge_trace_is_refused_before_it_is_read_and_the_limit_can_be_raised(
        tmp_path: Path) -> None:
    path = _experiment(tmp_path, lab=TRACE_LAB.format(trace="t.txt"))
    with open(path.parent / "t.txt", "w") as f:
        f.write("0\n10\n")
        f.truncate(2 * 2**30)  # sparse: 2 GiB of NULs after two good lines
    got = _check(path.parent / "lab.toml")
    assert got.returncode == 2
    assert ("links[0].trace: trace file" in got.stdout and
            "2.0 GiB is over the 64.0 MiB limit" in got.stdout), got.stdout
    small = path.parent / "t.txt"
    small.write_text("0\n10\n" + "#\n" * 600)
    assert _check(path.parent / "lab.toml", HOPLAB_MAX_FILE_SIZE="1K").returncode == 2
    assert _check(path.parent / "lab.toml", HOPLAB_MAX_FILE_SIZE="2K").returncode == 0
    bad = _check(path.parent / "lab.toml", HOPLAB_MAX_FILE_SIZE="lots")
    assert bad.returncode == 2 and "HOPLAB_MAX_FILE_SIZE='lots'" in bad.stderr


def test_a_huge_file_named_by_setup_is_refused_at_submit_naming_the_key(
        tmp_path: Path) -> None:
    path = _experiment(tmp_path, '[matrix.s.on]\n"setup.a" = [["sh", "fw.bin"]]')
    with open(path.parent / "fw.bin", "w") as f:
        f.truncate(2 * 2**30)
    # The store is never reached: the files are refused first.
    got = subprocess.run([*HOPLAB, "submit", str(path), "--db",
                          "postgresql://nobody@127.0.0.1:1/none"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert got.returncode == 2, got.stderr
    assert f"{path}: setup.a:" in got.stderr and "over the 64.0 MiB limit" in got.stderr
