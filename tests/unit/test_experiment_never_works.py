"""A configuration that could never run is refused when the experiment file is loaded,
naming its file, line and key, not found out run by run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from hoplab.errors import SpecError
from hoplab.spec.experiment_loader import load_experiment
from tests.helpers.lab_text import chain3

LAB = chain3("c", ipv6=False)

PING6 = """[[tests]]
name = "p"
kind = "ping"
from = "client"
to = "server"
family = 6
"""
STREAM6 = """[[tests]]
name = "p"
kind = "ping"
from = "client"
to = "server"
streams = [{ tos = 0 },
           { tos = 16, family = 6 }]
"""
CUSTOM6 = """[[tests]]
name = "c"
kind = "custom"
from = "client"
to = "server"
[[tests.flows]]
kind = "tcp"
[[tests.flows]]
kind = "probe"
family = 6
"""

TCP6 = PING6.replace('kind = "ping"', 'kind = "tcp"')
RRUL6 = PING6.replace('kind = "ping"', 'kind = "rrul"')
# The first flow says family = 4: the error names the one that asked for 6.
CUSTOM_UDP6 = """[[tests]]
name = "c"
kind = "custom"
from = "client"
to = "server"
[[tests.flows]]
kind = "tcp"
family = 4
[[tests.flows]]
kind = "udp"
family = 6
"""


def write(tmp_path: Path, body: str) -> Path:
    (tmp_path / "lab.toml").write_text(LAB)
    path = tmp_path / "exp.toml"
    path.write_text('lab = "lab.toml"\n' + body)
    return path


@pytest.mark.parametrize(("body", "key", "line"), [
    (PING6, "tests[0].family", 7),
    (STREAM6, "tests[0].streams[1].family", 8),
    (CUSTOM6, "tests[0].flows[1].family", 11),
    (TCP6, "tests[0].family", 7),
    (RRUL6, "tests[0].family", 7),
    (CUSTOM_UDP6, "tests[0].flows[1].family", 12),
])
def test_ipv6_flow_in_a_lab_without_ipv6_is_refused(tmp_path: Path, body: str, key: str,
                                                     line: int) -> None:
    with pytest.raises(SpecError) as exc:
        load_experiment(write(tmp_path, body))
    err = exc.value
    assert (err.file, err.key, err.line) == (str(tmp_path / "exp.toml"), key, line)
    assert "family = 6 needs IPv6" in err.message and "ipv6 = false" in err.message


def test_family_4_in_a_lab_without_ipv6_loads(tmp_path: Path) -> None:
    exp = load_experiment(write(tmp_path, PING6.replace("family = 6", "family = 4")))
    assert exp.variants[0].tests[0].flows[0].family == 4


def test_set_family_6_is_refused_too(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="family = 6 needs IPv6"):
        load_experiment(write(tmp_path, PING6.replace("family = 6\n", "")), ["family=6"])


def _refused_by_the_command_line(path: Path, said: str) -> None:
    """`hoplab run` exits 2 with the place and the reason, and stores nothing."""
    db = path.parent / "runs.db"
    proc = subprocess.run([sys.executable, "-m", "hoplab.cli.main", "run", str(path),
                           "--db", str(db)],
                          capture_output=True, text=True, check=False, timeout=60)
    if "needs root" in proc.stderr:
        pytest.skip("hoplab run checks for root before it reads the file")
    assert proc.returncode == 2, proc.stderr
    assert f"{path}:7: tests[0].family: {said}" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not db.exists()


def test_the_command_line_exits_2_with_the_place(tmp_path: Path) -> None:
    _refused_by_the_command_line(write(tmp_path, PING6), "family = 6 needs IPv6")


ISLANDS = """
name = "i"
[nodes.client]
[nodes.r1]
[nodes.server]
[nodes.lonely]
[nodes.x]
[nodes.y]
[[links]]
between = ["client", "r1"]
[[links]]
between = ["r1", "server"]
[[links]]
between = ["x", "y"]
"""


@pytest.mark.parametrize(("body", "key", "words"), [
    ('[[tests]]\nname = "p"\nkind = "ping"\nfrom = "client"\nto = "lonely"\n',
     "tests[0].to", "node 'lonely' has no links"),
    ('[[tests]]\nname = "t"\nkind = "tcp"\nfrom = "client"\nto = "y"\n',
     "tests[0].to", "no path of links joins 'client' and 'y'"),
    ('[[tests]]\nname = "c"\nkind = "custom"\nfrom = "client"\nto = "server"\n'
     '[[tests.flows]]\nkind = "tcp"\n[[tests.flows]]\nkind = "probe"\nfrom = "x"\n',
     "tests[0].flows[1].from", "no path of links joins 'x' and 'server'"),
])
def test_a_flow_between_unjoined_nodes_is_refused(tmp_path: Path, body: str, key: str,
                                                   words: str) -> None:
    (tmp_path / "lab.toml").write_text(ISLANDS)
    path = tmp_path / "exp.toml"
    path.write_text('lab = "lab.toml"\n' + body)
    with pytest.raises(SpecError) as exc:
        load_experiment(path)
    assert exc.value.key == key and exc.value.line is not None
    assert words in exc.value.message


# Seed 002's bench: both cables carry IPv4 only (their ends give no IPv6 address), in a
# lab whose [addressing] has IPv6 on.
DUT_V4 = (Path(__file__).resolve().parents[2] / "examples" / "devices" / "router-dut.toml"
          ).read_text()
# IPv6 on the client's cable only (the server has none), or on the server's only.
DUT_V6 = DUT_V4.replace('client = "192.168.10.2/24", router = "192.168.10.1"',
                        'client = ["192.168.10.2/24", "fd10::2/64"], '
                        'router = ["192.168.10.1", "fd10::1"]')
DUT_V6_SERVER = DUT_V4.replace('server = "192.168.20.2/24", router = "192.168.20.1"',
                               'server = ["192.168.20.2/24", "fd20::2/64"], '
                               'router = ["192.168.20.1", "fd20::1"]')


def write_dut(tmp_path: Path, lab: str, body: str) -> Path:
    (tmp_path / "lab.toml").write_text(lab)
    path = tmp_path / "exp.toml"
    path.write_text('lab = "lab.toml"\n' + body)
    return path


@pytest.mark.parametrize(("kind", "dst", "bare"), [
    ("tcp", "server", "server"), ("udp", "router", "client"), ("ping", "router", "client"),
    ("probe", "server", "server")])
def test_an_ipv6_flow_to_or_from_a_node_without_ipv6_is_refused(
        tmp_path: Path, kind: str, dst: str, bare: str) -> None:
    """The same check for every kind: a flow's end with no IPv6 address on any link."""
    lab = DUT_V6 if bare == "server" else DUT_V6_SERVER
    path = write_dut(tmp_path, lab, PING6.replace('"ping"', f'"{kind}"')
                     .replace('to = "server"', f'to = "{dst}"'))
    with pytest.raises(SpecError) as exc:
        load_experiment(path)
    err = exc.value
    assert (err.file, err.key, err.line) == (str(path), "tests[0].family", 7)
    assert f"node '{bare}' has no IPv6 address" in err.message, err.message


def test_an_ipv6_flow_between_ends_with_ipv6_loads(tmp_path: Path) -> None:
    path = write_dut(tmp_path, DUT_V6, TCP6.replace('to = "server"', 'to = "router"'))
    (flow,) = load_experiment(path).variants[0].tests[0].flows
    assert (flow.kind, flow.family, flow.dst) == ("tcp", 6, "router")


def test_a_device_whose_address_ssh_tells_is_left_to_lab_up(tmp_path: Path) -> None:
    """Between two devices whose addresses are the ones SSH reaches, the family is known
    only at lab up: the loader does not guess."""
    lab = ('name = "x"\n[nodes.a]\nssh = "root@a"\n[nodes.b]\nssh = "root@b"\n'
           '[[links]]\nbetween = ["a", "b"]\n')
    path = write_dut(tmp_path, lab, TCP6.replace('"client"', '"a"').replace('"server"', '"b"'))
    assert load_experiment(path).variants[0].tests[0].flows[0].family == 6


def test_the_command_line_exits_2_for_a_node_without_ipv6(tmp_path: Path) -> None:
    _refused_by_the_command_line(write_dut(tmp_path, DUT_V4, TCP6),
                                 "family = 6 needs IPv6 at both ends")
