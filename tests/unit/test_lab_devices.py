"""hoplab.lab.devices (and hoplab.nodes.reboots) without a device: parsers on captured
outputs, address resolution, what is put back and in which order, and the labels a
device gives its runs."""

from __future__ import annotations

import threading
from ipaddress import IPv4Interface, ip_interface
from pathlib import Path

import pytest

from hoplab.errors import LabError, SpecError
from hoplab.lab.devices import addresses, labels, settings
from hoplab.lab.state import LabState
from hoplab.nodes import clock
from hoplab.nodes.clock import ClockOffset
from hoplab.nodes.executor import ExecutorError
from hoplab.nodes.fake import FakeExecutor
from hoplab.nodes.reboots import reboots
from hoplab.spec import load_lab_text

DATA = Path(__file__).resolve().parents[1] / "data" / "lab_devices"


@pytest.mark.parametrize("name", ["ip_addr_busybox.txt", "ip_addr_iproute2.txt"])
def test_ip_addr_of_busybox_and_iproute2(name: str) -> None:
    got = addresses.parse_ip_addr((DATA / name).read_text())
    assert got["d1"] == [
        ip_interface("10.253.0.2/30"),
        ip_interface("fe80::c0cf:a2ff:fe2e:7749/64"),
    ]
    assert [str(a) for a in got["d0"]][:3] == ["192.168.10.1/24", "192.168.11.1/24", "fd00:9::1/64"]
    assert got["lo"] == []


def test_ethtool_k_long_names() -> None:
    got = settings.parse_ethtool_k((DATA / "ethtool_k_veth.txt").read_text())
    assert got["generic-receive-offload"] is False or got["generic-receive-offload"] is True
    assert got["tx-checksum-ipv4"] is False  # "off [fixed]"
    assert set(settings.FEATURE_NAMES.values()) <= set(got)


LAB = """name = "x"
[nodes.client]
[nodes.gw]
ssh = "root@10.99.0.2"
setup = [["ip", "addr", "add", "10.66.1.1/30", "dev", "wg0"]]
[nodes.exit]
ssh = "root@exit"
[[links]]
between = ["client", "gw"]
attach = { client = "hl0" }
addresses = { client = "10.99.0.1/24" }
[[links]]
between = ["gw", "exit"]
addresses = { gw = "10.66.1.1/30", exit = "10.66.1.2" }
"""


def _views(gw_addrs: list[str]) -> dict[str, addresses.DeviceView]:
    gw = addresses.DeviceView("gw", {"lan": [ip_interface(a) for a in gw_addrs]}, "10.99.0.2")
    ex = addresses.DeviceView("exit", {"wan": [ip_interface("10.66.1.2/30")]}, "203.0.113.9")
    return {"gw": gw, "exit": ex}


def test_an_end_with_no_address_takes_the_one_ssh_reached() -> None:
    lab = addresses.resolve(load_lab_text(LAB, "lab.toml"), _views(["10.99.0.2/16"]))
    first, second = lab.links
    assert first.addr_b4 == IPv4Interface("10.99.0.2/24")  # the namespace end's prefix
    assert first.device_end("gw") is not None and first.device_end("gw").ifname == "lan"  # type: ignore[union-attr]
    # An address the setup makes is taken as written until the setup ran...
    assert second.addr_a4 == IPv4Interface("10.66.1.1/30")
    assert second.addr_b4 == IPv4Interface("10.66.1.2/30")
    # ...and then it must be there.
    with pytest.raises(
        LabError,
        match=r"10.66.1.1 is not an address of device gw after its "
        r"setup commands",
    ):
        addresses.resolve(load_lab_text(LAB, "lab.toml"), _views(["10.99.0.2/24"]),
                          after_setup=True)


def test_an_address_the_device_lacks_is_refused_at_its_key() -> None:
    text = LAB.replace(
        'addresses = { client = "10.99.0.1/24" }',
        'addresses = { client = "10.99.0.1/24", gw = "10.99.0.3" }',
    )
    with pytest.raises(SpecError) as err:
        addresses.resolve(load_lab_text(text, "lab.toml"), _views(["10.99.0.2/24"]))
    assert err.value.key == "links[0].addresses.gw"
    assert "10.99.0.3 is not an address of device gw (it has: lan 10.99.0.2/24)" in str(err.value)
    # The address SSH reached must share the namespace end's subnet.
    with pytest.raises(SpecError, match=r"must share a subnet with 10\.99\.0\.2"):
        views = _views(["10.99.0.2/24"])
        views["gw"].reached = "10.99.0.2"
        addresses.resolve(
            load_lab_text(LAB.replace("10.99.0.1/24", "10.98.0.1/24"), "lab.toml"), views
        )


def test_restore_runs_teardown_then_offloads_then_sysctls_newest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("hoplab.lab.state.LABS_DIR", tmp_path)
    state = LabState(name="x", source="lab.toml")
    state.devices["gw"] = {
        "kind": "ssh",
        "ssh": {"destination": "root@gw"},
        "sysctls": [["net.ipv4.ip_forward", "0"], ["net.core.somaxconn", "4096"]],
        "offloads": [["lan", "gro", True], ["lan", "tso", False]],
        "teardown": [["ip", "link", "del", "wg0"]],
        "setup_started": True,
    }
    gw = FakeExecutor("gw")
    assert settings.restore(state, {"gw": gw}) == []
    assert [tuple(c[:4]) for c in gw.calls] == [
        ("ip", "link", "del", "wg0"),
        ("ethtool", "-K", "lan", "tso"),
        ("ethtool", "-K", "lan", "gro"),
        ("tee", "/proc/sys/net/core/somaxconn"),
        ("tee", "/proc/sys/net/ipv4/ip_forward"),
    ]
    # Teardown commands run only once the setup began.
    state.devices["gw"]["setup_started"] = False
    gw2 = FakeExecutor("gw")
    settings.restore(state, {"gw": gw2})
    assert ["ip", "link", "del", "wg0"] not in [c[:4] for c in gw2.calls]


def test_labels_from_facts() -> None:
    lab = load_lab_text(LAB, "lab.toml")
    got = labels.device_labels(
        lab,
        {
            "gw": {"model": "Linksys EA6350", "firmware": "OpenWrt 23.05.5"},
            "exit": {"firmware": "Debian GNU/Linux 12"},
        },
    )
    assert got == {
        "device": "gw=Linksys EA6350, exit=exit",
        "firmware": "gw=OpenWrt 23.05.5, exit=Debian GNU/Linux 12",
    }
    one = load_lab_text(
        LAB.split("[nodes.exit]")[0] + '[[links]]\nbetween = ["client", "gw"]\n'
        'attach = { client = "hl0" }\naddresses = { client = "10.99.0.1/24" }\n',
        "lab.toml",
    )
    assert labels.device_labels(one, {"gw": {"firmware": "OpenWrt 23.05.5"}}) == {
        "device": "10.99.0.2",
        "firmware": "OpenWrt 23.05.5",
    }


def test_listening_ports_from_proc_net_as_on_a_device() -> None:
    from hoplab.run.procs import _listening

    node = FakeExecutor("owrt")
    for table in ("tcp", "tcp6", "udp", "udp6"):
        node.files[f"/proc/thread-self/net/{table}"] = (DATA / f"proc_net_{table}.txt").read_bytes()
    assert _listening(node, "tcp") == {5201}
    assert _listening(node, "udp") == {2112}


def test_a_rebooted_device_is_named_and_namespaces_are_not_asked() -> None:
    router = FakeExecutor("router")
    # A device node whose uptime went back once (the executor's own check says so).
    router.reboot_answers = [False, True, False]
    nodes = {"router": router, "client": FakeExecutor("client")}
    seen: dict[str, tuple[str, float]] = {}
    facts = {"router": {"boot_id": "b1", "uptime_s": 500.0}, "client": {}}
    assert reboots(nodes, facts, seen) == {}
    # Seen by the executor on its connection...
    assert reboots(nodes, facts, seen) == {
        "router": "rebooted since hoplab last looked (uptime went back)"}
    # ...or in the facts of a lab built again (after a run failed when it went down).
    again = {"router": {"boot_id": "b2", "uptime_s": 20.0}, "client": {}}
    assert reboots(nodes, again, seen) == {
        "router": "rebooted since the previous run (boot id changed, uptime went back)"}
    assert reboots(nodes, again, seen) == {}
    assert router.reboot_answers == []


def test_a_node_that_cannot_tell_whether_it_rebooted_is_named() -> None:
    class Gone(FakeExecutor):
        def check_rebooted(self) -> bool:
            raise ExecutorError("node router (root@10.99.0.2): connection lost")

    assert reboots({"router": Gone("router")}, {}, {}) == {
        "router": "could not tell whether it rebooted: node router (root@10.99.0.2): "
                  "connection lost"}


class _Together(FakeExecutor):
    """A node on a machine of its own whose clock and reboot looks each wait until every
    other node's has begun: they end only if asked at once."""

    def __init__(self, node: str, meet: threading.Barrier) -> None:
        super().__init__(node, machine=node)
        self.meet = meet

    def check_rebooted(self) -> bool:
        self.meet.wait()
        return False


def test_each_machine_is_asked_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # A run of two VM routers under TCG spent 7.4 s on their clocks one after the other.
    meet = threading.Barrier(3, timeout=5)
    nodes = {n: _Together(n, meet) for n in ("r1", "r2", "r3")}

    def estimate(ex: FakeExecutor) -> ClockOffset:
        meet.wait()
        return ClockOffset(ex.node, 0.001, 0.0005, 0.001, "date-ns", 16)

    monkeypatch.setattr(clock, "estimate", estimate)
    got = clock.clock_offsets(nodes)
    assert [(n, c["node"], c["offset_s"]) for n, c in got.items()] == \
        [("r1", "r1", 0.001), ("r2", "r2", 0.001), ("r3", "r3", 0.001)]
    assert reboots(nodes, {}, {}) == {}
