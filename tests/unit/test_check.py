"""`hoplab check FILE...`: every problem of every file, with file, line and key; exit 0
or 2; nothing built, written or started."""

from __future__ import annotations

import os
import secrets
import subprocess
from pathlib import Path

import pytest

from hoplab.cli.main import main
from hoplab.spec.check import check_file
from tests.helpers.lab import HOPLAB, REPO

CHAIN = """name = "c"
[nodes.client]
[nodes.r1]
[nodes.server]
[[links]]
between = ["client", "r1"]
[[links]]
between = ["r1", "server"]
"""
BAD_LAB = """name = "Bad Lab"
[nodes.a]
forward = 3
[nodes.b]
[[links]]
between = ["a", "c"]
[[links]]
between = ["a", "b"]
rate = "100mbps"
delay = "99h"
colour = "red"
"""
BAD_EXP = """lab = "chain.toml"
repeat = 0
[matrix]
hops = [1, 2]
[[tests]]
name = "t"
kind = "tcp"
from = "client"
to = "server"
flows = 1000000000
cport = 70000
[[tests]]
name = "u"
kind = "udp"
from = "client"
to = "nowhere"
[[tests]]
name = "fine"
kind = "ping"
from = "client"
to = "server"
"""


def files(tmp_path: Path) -> dict[str, Path]:
    out = {"chain.toml": CHAIN, "bad-lab.toml": BAD_LAB, "bad-exp.toml": BAD_EXP,
           "syntax.toml": "name = [\n", "neither.toml": 'colour = "red"\n',
           "good-exp.toml": 'lab = "chain.toml"\n[[tests]]\nname = "p"\nkind = "ping"\n'
                            'from = "client"\nto = "server"\n'}
    for name, text in out.items():
        (tmp_path / name).write_text(text)
    return {name: tmp_path / name for name in out}


def test_every_problem_of_every_file_is_named(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    f = files(tmp_path)
    code = main(["check", *map(str, f.values()), str(tmp_path / "missing.toml")])
    out, err = capsys.readouterr()
    assert code == 2
    lab, exp = f["bad-lab.toml"], f["bad-exp.toml"]
    assert out.splitlines() == [
        f"{f['chain.toml']}: ok: lab c: 3 nodes, 2 links",
        f"{lab}:1: name: invalid lab name 'Bad Lab': use up to 20 of a-z, 0-9, '_' and '-', "
        "starting with a letter or digit",
        f"{lab}:3: nodes.a.forward: expected true or false, got an integer (3)",
        f"{lab}:6: links[0].between: unknown node 'c'",
        f"{lab}:9: links[1].rate: '100mbps' is ambiguous: tc reads 'bps' as bytes per second "
        "(so 'mbps' is megabytes/s); write bits, e.g. '100mbit'",
        f"{lab}:10: links[1].delay: a time is at most 24h, got '99h': iperf3 runs a test for "
        "a day at most (-t 86400), and nothing else hoplab waits for is longer",
        f"{lab}:11: links[1].colour: unknown key; allowed keys: between, rate, pps, delay, jitter, "
        "loss, loss_burst, duplicate, reorder, trace, queue, qdisc, qdisc_options, emulator, "
        "wireguard, mtu, forward, reverse, subnet4, subnet6, addresses, attach",
        f"{exp}:2: repeat: repeat must be 1 to 1000, got 0: a verdict needs a few "
        "repetitions, and every run is scheduled before the first",
        # Both bad options of one test, named once for the two variants.
        f"{exp}:10: tests[0].flows: at most 128 flows, got 1000000000: iperf3 runs at most "
        "128 parallel streams in one client (-P), and each flow here is an iperf3 client "
        "and server of its own (in variant hops=1)",
        f"{exp}:11: tests[0].cport: a client port must be 1024-65535, got 70000 (in variant "
        "hops=1)",
        f"{exp}:16: tests[1].to: node 'nowhere' is not in the lab; its nodes are client, r1, "
        "server (in variant hops=1)",
        f"{f['syntax.toml']}:1: TOML syntax error: Invalid value",
        f"{f['neither.toml']}: neither a lab (it would have nodes, links or [generate]) nor "
        "an experiment (lab = ... and [[tests]])",
        f"{f['good-exp.toml']}: ok: experiment good-exp: 1 variants, 1 runs, lab "
        f"{f['chain.toml']}; at least 10 s of tests and pauses (building labs and starting "
        "tools add more); 1 a side cannot reach p <= 0.05; 4 can",
        f"{tmp_path / 'missing.toml'}: cannot read the file: [Errno 2] No such file or "
        f"directory: '{tmp_path / 'missing.toml'}'",
    ]
    assert err == "hoplab check: 13 problems in 5 of 7 files\n"


def test_good_files_exit_0(capsys: pytest.CaptureFixture[str]) -> None:
    examples = sorted(str(p) for p in (REPO / "examples").rglob("*.toml"))
    assert len(examples) > 20
    assert main(["check", *examples]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(examples) and all(": ok: " in line for line in out)


def test_a_lab_is_told_from_an_experiment_by_what_it_holds(tmp_path: Path) -> None:
    f = files(tmp_path)
    assert check_file(f["chain.toml"]).kind == "lab"
    assert check_file(f["good-exp.toml"]).kind == "experiment"
    # An experiment's lab file is checked with it; its problems name the lab file.
    (tmp_path / "exp2.toml").write_text('lab = "bad-lab.toml"\n[[tests]]\nname = "p"\n'
                                        'kind = "ping"\nfrom = "a"\nto = "b"\n')
    got = check_file(tmp_path / "exp2.toml")
    assert got.kind == "experiment" and got.experiment is None
    assert {p.file for p in got.problems} == {str(f["bad-lab.toml"])}
    assert [p.key for p in got.problems] == ["name", "nodes.a.forward", "links[0].between",
                                            "links[1].rate", "links[1].delay",
                                            "links[1].colour"]


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


def _netns(token: str) -> set[str]:
    """This test's labs' namespaces (other labs come and go on a shared machine)."""
    got = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True, check=False)
    return {w for line in got.stdout.splitlines() for w in line.split()[:1] if token in w}


def test_check_builds_writes_and_starts_nothing(tmp_path: Path) -> None:
    """No namespace, no store, no file: not in the working directory, the home
    directory, the run directory or the caches."""
    work = tmp_path / "work"
    work.mkdir()
    f = files(work)
    token = "ck" + secrets.token_hex(4)
    f["chain.toml"].write_text(CHAIN.replace('name = "c"', f'name = "{token}"'))
    env = {**os.environ, "HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": str(tmp_path / "c"),
           "XDG_DATA_HOME": str(tmp_path / "d"), "HOPLAB_RUN_DIR": str(tmp_path / "run"),
           "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("HOPLAB_DB", None)
    before = _tree(tmp_path)
    runs = [subprocess.run([*HOPLAB, "check", *map(str, f.values())], cwd=work, env=env,
                           capture_output=True, text=True, timeout=60, check=False)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [2, 2], runs[0].stderr
    assert "bad-lab.toml:3: nodes.a.forward" in runs[0].stdout
    assert runs[0].stdout == runs[1].stdout
    assert _tree(tmp_path) == before
    assert not (work / "hoplab.db").exists()
    assert _netns(token) == set()
    good = subprocess.run([*HOPLAB, "check", str(f["good-exp.toml"])], cwd=work, env=env,
                          capture_output=True, text=True, timeout=60, check=False)
    assert good.returncode == 0 and _tree(tmp_path) == before


@pytest.mark.parametrize(("repeat", "said"), [
    (3, "3 a side cannot reach p <= 0.05; 4 can"), (4, "4 a side can reach p <= 0.05"),
    (1, "1 a side cannot reach p <= 0.05; 4 can")])
def test_check_says_how_long_and_whether_the_repetitions_can_give_a_verdict(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], repeat: int, said: str) -> None:
    # Issue 27: 3 repetitions gave "not enough data" for every row, and nothing said so
    # before the 6 minutes were spent. 2 variants x 2 tests of 9 s + a 1 s pause.
    (tmp_path / "chain.toml").write_text(CHAIN)
    exp = tmp_path / "e.toml"
    exp.write_text(f'lab = "chain.toml"\nrepeat = {repeat}\npause = "1s"\n'
                   '[matrix]\nflows = [1, 2]\n'
                   + ''.join(f'[[tests]]\nname = "t{i}"\nkind = "tcp"\nfrom = "client"\n'
                             'to = "server"\nduration = "9s"\n' for i in (1, 2)))
    assert main(["check", str(exp)]) == 0
    out = capsys.readouterr().out
    secs = round(repeat * 4 * 10.0)
    took = f"{secs // 60} min {secs % 60} s" if secs >= 60 else f"{secs} s"
    assert f"; at least {took} of tests and pauses" in out and out.rstrip().endswith(said)
