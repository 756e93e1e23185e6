"""`bisect --build`'s timeout (issue 29, part 7): a build that never ends is killed, its
whole process group with it, and its commit cannot be told (git bisect's 125)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from hoplab.run.commits import CannotTest, build

SHA = "0123456789abcdef" * 2 + "01234567"


def _alive(pid: int) -> bool:
    """Whether `pid` still runs (a zombie waiting for its reaper has ended)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def test_a_build_past_its_timeout_is_killed_with_what_it_started(tmp_path: Path) -> None:
    pids = tmp_path / "pids"
    # sh, a child that ignores SIGTERM, and a grandchild: all in the build's group.
    command = (f"echo $$ > {pids}; (trap '' TERM; sleep 100000) & echo $! >> {pids}; "
               f"sh -c 'sleep 100000 & echo $! >> {pids}; wait' & wait")
    said: list[str] = []
    started = time.monotonic()
    with pytest.raises(CannotTest) as got:
        build(tmp_path, command, SHA, said.append, timeout=1)
    took = time.monotonic() - started
    assert str(got.value).startswith(f"build of {SHA[:12]} did not finish in 1 s "
                                     "(--build-timeout): its processes were killed")
    written = [int(p) for p in pids.read_text().split()]
    assert len(written) == 3
    # SIGKILL was sent; each ends as soon as the kernel gets to it.
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in written) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in written if _alive(pid)] == []
    # 1 s of build, at most the 5 s grace before SIGKILL for the one ignoring SIGTERM.
    assert took < 30


def test_a_build_ends_as_before_when_it_finishes(tmp_path: Path) -> None:
    build(tmp_path, "true", SHA, lambda _: None, timeout=5)
    with pytest.raises(CannotTest, match=r"failed \(exit 3\)"):
        build(tmp_path, "exit 3", SHA, lambda _: None, timeout=5)
    assert os.environ.get("HOPLAB_COMMIT") is None
