"""Run working directories are named after their process, so clean removes only the
ones whose process has exited (hoplab.nodes.workdir)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from hoplab.nodes import workdir
from hoplab.nodes.procs import proc_start_time


def test_a_live_process_keeps_its_directory_and_a_dead_one_does_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    mine = workdir.make()
    assert mine.parent == tmp_path
    assert mine.name.startswith(f"hoplab-run-{os.getpid()}-{proc_start_time(os.getpid())}-")
    # The same PID with another start time is another process: it has exited.
    reused = tmp_path / f"hoplab-run-{os.getpid()}-1-abcd"
    reused.mkdir()
    gone = tmp_path / "hoplab-run-999999999-5-efgh"
    gone.mkdir()
    (gone / "iperf3.out").write_text("x")
    other = tmp_path / "hoplab-run-old-style"
    other.mkdir()
    assert sorted(workdir.orphans(tmp_path)) == sorted([reused, gone])
    done = workdir.remove_orphans(tmp_path)
    assert len(done) == 2 and all("its hoplab process has exited" in d for d in done)
    assert mine.is_dir() and other.is_dir()
    assert not reused.exists() and not gone.exists()
    shutil.rmtree(mine)
