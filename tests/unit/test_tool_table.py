"""One entry per tool (hoplab.tool_table), read by everything that names a package or
asks a version: this machine's probe, a device's tool check and facts, each kind's tool."""

from __future__ import annotations

from pathlib import Path

from hoplab import kind_registry
from hoplab.kind_registry import FlowTool
from hoplab.lab.caps import TOOL_NAMES, TOOL_PACKAGES
from hoplab.lab.devices.tools import install_hint
from hoplab.nodes import ssh_facts
from hoplab.nodes.executor import SYSCTLS
from hoplab.tool_table import TOOLS, debian, openwrt, version_args

DATA = Path(__file__).resolve().parents[1] / "data" / "devices"


def test_every_tool_a_kind_runs_has_an_entry_and_its_package() -> None:
    for name in kind_registry.flow_names():
        flow = kind_registry.flow_tool(name)
        executables = [flow.tool, *(t for t, _ in flow.needs)]
        if flow.server_tool:
            executables.append(flow.server_tool)
        for tool in executables:
            assert tool in TOOLS, (name, tool)
        assert flow.package == TOOLS[flow.tool].debian, name
        assert all(pkg == TOOLS[t].debian for t, pkg in flow.needs), name


def test_a_flow_tool_takes_its_package_from_the_table() -> None:
    def never(*_args: object) -> None:
        raise AssertionError

    flow = FlowTool(tool="ping", bulk=False, rtt=True, media_type="text/plain",
                    server=never, client=never, collect=never)  # type: ignore[arg-type]
    assert flow.package == "iputils-ping"
    unknown = FlowTool(tool="blipper", bulk=False, rtt=False, media_type="text/plain",
                       server=never, client=never, collect=never)  # type: ignore[arg-type]
    assert unknown.package == "blipper"


def test_the_machine_probe_reads_the_table() -> None:
    assert all(TOOLS[t].version for t in TOOL_NAMES)
    assert {t: TOOLS[t].debian for t in TOOL_NAMES} == TOOL_PACKAGES
    assert version_args("irtt") == ("version",) and version_args("nginx") == ("-v",)


def test_a_devices_hint_and_facts_read_the_table() -> None:
    assert install_hint("perf") == (
        "opkg install perf, libdw, libelf, libunwind, objdump (a kernel with "
        "KERNEL_PERF_EVENTS) (OpenWrt) or apt-get install linux-perf (Debian, Ubuntu)")
    assert install_hint("tee") == "opkg install busybox (OpenWrt) or apt-get install " \
                                  "coreutils (Debian, Ubuntu)"
    assert (debian("frobnicate"), openwrt("frobnicate")) == ("frobnicate", "frobnicate")
    argv = ssh_facts.script_argv(())
    assert "TOOLS=iperf3:--version irtt:version perf:--version tc:-V ethtool:--version " \
           "ping:-V" in argv
    f = ssh_facts.parse_facts((DATA / "facts-openwrt-like.txt").read_text(), SYSCTLS)
    assert f.missing["tool tc"] == ("not installed (OpenWrt package tc-full (or tc-tiny)"
                                    ", Debian package iproute2)")
    assert f.missing["qdiscs"] == ("tc not installed on the device (OpenWrt package "
                                   "tc-full (or tc-tiny))")
