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


def write(tmp_path: Path, body: str) -> Path:
    (tmp_path / "lab.toml").write_text(LAB)
    path = tmp_path / "exp.toml"
    path.write_text('lab = "lab.toml"\n' + body)
    return path


@pytest.mark.parametrize(("body", "key", "line"), [
    (PING6, "tests[0].family", 7),
    (STREAM6, "tests[0].streams[1].family", 8),
    (CUSTOM6, "tests[0].flows[1].family", 11),
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


def test_the_command_line_exits_2_with_the_place(tmp_path: Path) -> None:
    path = write(tmp_path, PING6)
    proc = subprocess.run([sys.executable, "-m", "hoplab.cli.main", "run", str(path),
                           "--db", str(tmp_path / "runs.db")],
                          capture_output=True, text=True, check=False, timeout=60)
    if "needs root" in proc.stderr:
        pytest.skip("hoplab run checks for root before it reads the file")
    assert proc.returncode == 2, proc.stderr
    assert f"{path}:7: tests[0].family: family = 6 needs IPv6" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs.db").exists()


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
