"""probe() against the real kernel, checked by independent commands."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator

import pytest

from hoplab.lab import caps as caps_mod
from hoplab.lab.caps import Capabilities, probe

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root"),
    pytest.mark.skipif(shutil.which("ip") is None or shutil.which("tc") is None,
                       reason="needs ip and tc"),
]


def sh(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=10)


def namespaces() -> list[str]:
    return [line.split()[0] for line in sh("ip", "netns", "list").stdout.splitlines() if line]


@pytest.fixture(scope="module")
def caps() -> Capabilities:
    return probe(refresh=True)


@pytest.fixture
def netns() -> Iterator[str]:
    name = f"hoplab-test-{os.getpid()}"
    sh("ip", "netns", "del", name)
    assert sh("ip", "netns", "add", name).returncode == 0
    try:
        assert sh("ip", "-n", name, "link", "add", "x0", "type", "veth",
                  "peer", "name", "x1").returncode == 0
        yield name
    finally:
        sh("ip", "netns", "del", name)


@pytest.mark.parametrize(("kind", "params"), [
    ("netem", ("delay", "1ms")),
    ("fq_codel", ()),
    ("htb", ("default", "1")),
    ("tbf", ("rate", "5mbit", "burst", "32kb", "latency", "100ms")),
    ("cake", ()),
    ("prio", ()),
])
def test_qdisc_matches_direct_check(caps: Capabilities, netns: str, kind: str,
                                    params: tuple[str, ...]) -> None:
    ok = sh("tc", "-n", netns, "qdisc", "add", "dev", "x0", "root", kind, *params).returncode == 0
    assert caps.qdiscs[kind] is ok


def test_ingress_matches_direct_check(caps: Capabilities, netns: str) -> None:
    ok = sh("tc", "-n", netns, "qdisc", "add", "dev", "x0", "ingress").returncode == 0
    assert caps.qdiscs["ingress"] is ok


def test_wireguard_kernel_matches_direct_check(caps: Capabilities, netns: str) -> None:
    ok = sh("ip", "-n", netns, "link", "add", "wgx", "type", "wireguard").returncode == 0
    assert caps.features["wireguard_kernel"] is ok


def test_bridge_matches_direct_check(caps: Capabilities, netns: str) -> None:
    ok = sh("ip", "-n", netns, "link", "add", "brx", "type", "bridge").returncode == 0
    assert caps.features["bridge"] is ok


def test_nat_matches_direct_check(caps: Capabilities, netns: str) -> None:
    # Without nft the probe finds no NAT, and there is no direct check to compare with:
    # a skip, counted (make setup installs nft; under HOPLAB_REQUIRE_ALL this fails).
    if shutil.which("nft") is None:
        assert caps.features["nat"] is False
        pytest.skip("nft not installed (Debian package nftables; make setup installs it)")
    rules = ("add table ip t\n"
             "add chain ip t post { type nat hook postrouting priority 100 ; }\n"
             "add rule ip t post masquerade\n")
    r = subprocess.run(["ip", "netns", "exec", netns, "nft", "-f", "-"], input=rules,
                       capture_output=True, text=True, check=False, timeout=10)
    assert caps.features["nat"] is (r.returncode == 0)


def test_essentials(caps: Capabilities) -> None:
    assert caps.qdiscs["htb"] is True
    assert caps.features["veth"] is True
    assert caps.tools["ip"] is not None and caps.tools["tc"] is not None
    assert caps.kernel == os.uname().release


def test_fast_and_no_namespace_left(caps: Capabilities) -> None:
    assert not [n for n in namespaces() if n.startswith("hoplab-probe-")]
    start = time.perf_counter()
    fresh = probe(refresh=True)
    took = time.perf_counter() - start
    assert took < 2.0, f"probe took {took:.3f} s"
    assert fresh == caps
    assert not [n for n in namespaces() if n.startswith("hoplab-probe-")]


def test_second_probe_uses_cache(caps: Capabilities) -> None:
    probe(refresh=True)
    start = time.perf_counter()
    again = probe()
    took = time.perf_counter() - start
    assert took < 0.05, f"cached probe took {took * 1000:.1f} ms"
    assert again == caps


def test_cache_file_mode() -> None:
    probe()
    assert os.stat("/run/hoplab").st_mode & 0o777 == 0o755
    assert os.path.isfile("/run/hoplab/caps.json")


@pytest.mark.parametrize("exc", [KeyboardInterrupt, RuntimeError])
def test_namespace_removed_on_interrupt(monkeypatch: pytest.MonkeyPatch,
                                        exc: type[BaseException]) -> None:
    def boom(*_: object) -> dict[str, bool]:
        assert f"hoplab-probe-{os.getpid()}" in namespaces()
        raise exc

    monkeypatch.setattr(caps_mod, "_probe_firewall", boom)
    with pytest.raises(exc):
        caps_mod._probe_fresh()
    assert not [n for n in namespaces() if n.startswith("hoplab-probe-")]
