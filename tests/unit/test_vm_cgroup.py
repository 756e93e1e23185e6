"""Where a VM's CPU share is set (hoplab.lab.vm.cgroup): the CPU controller's hierarchy
from /proc/self/mountinfo, and the quota per period."""

from __future__ import annotations

from pathlib import Path

from hoplab.lab.vm import cgroup

HYBRID = """\
30 23 0:26 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755
31 30 0:27 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
33 30 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
34 30 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
"""


def test_a_hybrid_set_up_limits_through_v1_cpu(tmp_path: Path) -> None:
    # The unified hierarchy is mounted but has no CPU controller (no cgroup.controllers
    # listing it): v1's cpu mount, not cpuacct's.
    assert cgroup.hierarchy(HYBRID) == cgroup.Hierarchy(Path("/sys/fs/cgroup/cpu"), 1)


def test_a_unified_hierarchy_with_the_cpu_controller_is_v2(tmp_path: Path) -> None:
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    text = f"30 23 0:26 / {tmp_path} rw,nosuid - cgroup2 cgroup2 rw,nsdelegate\n" + \
        HYBRID.splitlines(keepends=True)[2]
    assert cgroup.hierarchy(text) == cgroup.Hierarchy(tmp_path, 2)


def test_no_cpu_controller_mounted() -> None:
    assert cgroup.hierarchy(HYBRID.splitlines(keepends=True)[0]) is None


def test_the_quota_is_the_share_of_a_core_per_vcpu() -> None:
    assert cgroup.quota_us(25, 1) == 25_000
    assert cgroup.quota_us(25, 2) == 50_000     # two vCPUs: half a core in all
    assert cgroup.quota_us(0.1, 1) == 1_000     # the kernel's least quota is 1 ms


def test_each_run_directory_has_its_own_cgroup(tmp_path: Path) -> None:
    h = cgroup.Hierarchy(Path("/sys/fs/cgroup/cpu"), 1)
    a = cgroup.path_for(h, tmp_path / "a" / "lab1", "r1")
    b = cgroup.path_for(h, tmp_path / "b" / "lab1", "r1")
    assert a.parent == b.parent == h.root / "hoplab" and a != b
    assert a.name.startswith("lab1.r1.")
