"""The pure parts of the SSH executor: quoting at the boundary, /proc/PID/stat, targets,
facts and sampler replies parsed from real captures."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from hoplab.nodes.clock import ClockOffset, _adjtimex
from hoplab.nodes.executor import Facts
from hoplab.nodes.ssh_counters import loop_argv, loop_script, split_sample
from hoplab.nodes.ssh_facts import SYSTEM_PATH, Known, parse_facts, script_argv, versions_here
from hoplab.nodes.ssh_quote import SIGNAL_CHECKED, parse_stat, remote_command
from hoplab.nodes.ssh_target import SshTarget, SshTargetError

DATA = Path(__file__).resolve().parents[1] / "data" / "devices"
SYSCTLS = ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
           "net.core.rmem_max", "net.core.wmem_max", "net.core.default_qdisc",
           "net.ipv4.tcp_ecn", "net.ipv4.ip_forward", "net.ipv4.tcp_mtu_probing")
ODD = ["a b", "$(id)", "`id`", "; ls", "'", '"', "\\", "*", "", "-n", "\t", "é", "x\ny"]
SHELLS = [s for s in ("/bin/sh", "/bin/dash", "/bin/bash", shutil.which("busybox"))
          if s and os.path.exists(s)]


@pytest.mark.parametrize("shell", SHELLS)
def test_remote_command_is_argv_once_quoted(shell: str, tmp_path: Path) -> None:
    """What an SSH server does with the command: the login shell's `-c`."""
    cmd = remote_command(["printf", "%s|", *ODD], env={"HL_X": "$(id)"}, cwd=str(tmp_path))
    argv = [shell, "sh", "-c", cmd] if shell.endswith("busybox") else [shell, "-c", cmd]
    res = subprocess.run(argv, capture_output=True, text=True, check=True, timeout=10)
    stat, _, rest = res.stdout.partition("\n")
    pid, ticks = parse_stat(stat)
    assert pid > 0 and ticks > 0
    assert rest == "".join(f"{a}|" for a in ODD)


def test_missing_command_is_127_as_a_shell_says() -> None:
    res = subprocess.run(["/bin/sh", "-c", remote_command(["no-such-tool-hl"])],
                         capture_output=True, text=True, timeout=10, check=False)
    assert (res.returncode, res.stderr) == (127, "no-such-tool-hl: command not found\n")


def test_remote_command_refuses_what_cannot_be_quoted() -> None:
    with pytest.raises(ValueError):
        remote_command([])
    with pytest.raises(ValueError):
        remote_command(["a\0b"])
    with pytest.raises(ValueError, match="environment"):
        remote_command(["true"], env={"A B": "1"})


def test_parse_stat_with_a_hostile_command_name() -> None:
    line = "4321 (a) (b c)) S 1 4321 4321 0 -1 4194560 95 0 0 0 0 0 0 0 20 0 1 0 907074 1 2 3"
    assert parse_stat(line) == (4321, 907074)
    with pytest.raises(ValueError):
        parse_stat("")


def test_signal_checked_leaves_another_process_alone() -> None:
    p = subprocess.Popen(["sleep", "30"])
    try:
        ticks = parse_stat(Path(f"/proc/{p.pid}/stat").read_text())[1]
        run = ["/bin/sh", "-c", SIGNAL_CHECKED, "sh"]
        out = subprocess.run([*run, "15", str(p.pid), str(ticks + 1)], capture_output=True,
                             text=True, check=True).stdout
        assert out == "" and p.poll() is None
        out = subprocess.run([*run, "15", str(p.pid), str(ticks)], capture_output=True,
                             text=True, check=True).stdout
        assert out == f"{p.pid} {ticks}\n"
        assert p.wait(5) == -15
    finally:
        p.kill()
        p.wait()


def test_targets() -> None:
    t = SshTarget(node="router", destination="root@10.99.0.2", port=2222,
                  jump="admin@bastion:22")
    assert (t.user, t.host) == ("root", "10.99.0.2")
    assert SshTarget(node="r", destination="lab-router").user is None
    assert SshTarget(node="r", destination="root@[fe80::1%eth0]").host == "fe80::1%eth0"
    for bad in ("-oProxyCommand=x", "root@-x", "a b", "root@h;id", "", "root@"):
        with pytest.raises(SshTargetError):
            SshTarget(node="r", destination=bad)
    spec = {"destination": "root@10.99.0.2", "port": 22, "identity": "~/.ssh/lab_ed25519"}
    t = SshTarget.of("router", spec, accept_new_host_keys=True)
    assert t.accept_new_host_keys and t.identity_path() == Path.home() / ".ssh/lab_ed25519"


def test_facts_of_the_openwrt_like_capture() -> None:
    f = parse_facts((DATA / "facts-openwrt-like.txt").read_text(), SYSCTLS)
    assert f.values["model"] == "hoplab emulated openwrt-like"
    assert f.values["firmware"] == "OpenWrt 23.05.5 r24106-10cc5fcd00"
    assert f.values["firmware_release"]["DISTRIB_TARGET"] == "x86/64"
    assert f.values["sysctls"]["net.ipv4.tcp_congestion_control"] == "bbr"
    assert f.values["tools"] == {"iperf3": "iperf 3.12 (cJSON 1.7.15)",
                                 "irtt": "irtt version: 0.9.0",
                                 "ping": "installed (no version option)"}
    assert set(f.missing) >= {"drivers", "offloads", "qdiscs", "tool perf", "tool tc",
                              "tool ethtool"}
    assert "net.ipv4.tcp_congestion_control" not in str(f.missing)
    # The /proc files, read by one grep: split back by path.
    assert (f.values["kernel"], f.values["kernel_build"], f.values["machine"]) == \
        ("6.18.44-fc-v657", "#1 SMP PREEMPT_DYNAMIC @0", "x86_64")
    assert f.values["cpu_model"] == "Intel(R) Xeon(R) Processor" and f.values["cpus"] == 2
    assert re.fullmatch(r"[0-9a-f-]{36}", f.values["boot_id"]) and f.values["uptime_s"] > 0


def test_facts_of_the_linux_board_capture() -> None:
    f = parse_facts((DATA / "facts-linux-board.txt").read_text(), SYSCTLS)
    assert f.values["firmware"] == "Debian GNU/Linux 12 (bookworm)"
    (ifname,) = f.values["interfaces"]
    assert f.values["drivers"][ifname]["driver"] == "veth"
    assert f.values["offloads"][ifname]["tcp-segmentation-offload"] in ("on", "off")
    assert f.values["tools"]["perf"] == "perf version 6.1.187"
    assert f.values["cpus"] == 2 and f.values["cpu_model"]
    assert "model" in f.missing and "qdiscs" not in f.missing


def test_cpu_of_an_old_arm_kernel() -> None:
    text = ("@@@ cpuinfo\nProcessor\t: ARMv7 Processor rev 0 (v7l)\nprocessor\t: 0\n"
            "processor\t: 1\nHardware\t: BCM5301X\n@@@ end\n")
    f = parse_facts(text, ())
    assert (f.values["cpu_model"], f.values["cpus"]) == ("ARMv7 Processor rev 0 (v7l)", 2)


AWKS = [a for a in (["busybox", "awk"], ["mawk", "-W", "interactive"], ["gawk"])
        if shutil.which(a[0])]


@pytest.mark.parametrize("awk", AWKS, ids=lambda a: a[0])
def test_sampler_loop_in_awk(awk: list[str]) -> None:
    """The device's side of the sampler in one awk process, answering each request line
    as it comes (a reply per line, not per block of input)."""
    argv = loop_argv(["/proc/stat", "/proc/net/dev"], "awk", False, None)
    assert argv[-2] == "awk"
    # An awk that waits for a block of input never answers: killed, the test fails.
    with _awk_loop(awk, argv, 10) as (p, _):
        for _ in range(2):
            sec = _ask(p, "s")
            assert sec["/proc/stat"].startswith("cpu ")
            assert "Inter-|" in sec["/proc/net/dev"]
            assert list(sec)[2:] == ["/proc/self/stat", f"/proc/{os.getpid()}/stat",
                                     "/proc/self/schedstat", f"/proc/{os.getpid()}/schedstat"]
            # The scheduler's run time in ns (the sampler's cost below a clock tick).
            assert int(sec[f"/proc/{os.getpid()}/schedstat"].split()[0]) > 0
        _quit(p)


@contextlib.contextmanager
def _awk_loop(awk: list[str], argv: list[str],
              seconds: float) -> Iterator[tuple[subprocess.Popen[str], threading.Timer]]:
    """The loop of loop_argv's `argv` run here by `awk`, as the device's SSH server
    would run it, killed by the watchdog yielded with it after `seconds`."""
    env = {**os.environ, **dict(a.split("=", 1) for a in argv[1:4])}
    with subprocess.Popen([*awk, argv[-1]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                          text=True, env=env) as p:
        watchdog = threading.Timer(seconds, p.kill)
        watchdog.start()
        try:
            yield p, watchdog
        finally:
            watchdog.cancel()


def _quit(p: subprocess.Popen[str]) -> None:
    assert p.stdin is not None
    p.stdin.write("q\n")
    p.stdin.flush()
    assert p.wait(5) == 0


def _ask(p: subprocess.Popen[str], request: str) -> dict[str, str]:
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write(request + "\n")
    p.stdin.flush()
    lines = []
    while (line := p.stdout.readline()) != "@@hoplab-end@@\n":
        assert line, f"the loop ended: {p.wait(5)}"
        lines.append(line.rstrip("\n"))
    return split_sample(lines)


def _ended(pid: int) -> bool:
    """Whether process `pid` has exited (gone, or a zombie not yet reaped)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:
        return True


@pytest.mark.skipif(shutil.which("tc") is None, reason="needs tc (make setup)")
@pytest.mark.parametrize("awk", AWKS, ids=lambda a: a[0])
def test_sampler_loop_with_the_sessions_tc(awk: list[str]) -> None:
    """tc-batch: one tc for the session answers the loop's qdisc reads through two FIFOs
    whose names are gone once both are open; the tc's own time comes with each sample;
    a tc that dies is followed by a tc forked per read; the loop's end ends its tc."""
    with _awk_loop(awk, loop_argv(["/proc/stat"], "awk", False, "tc-batch"), 20) as (p, _):
        first, plain = _ask(p, "t"), _ask(p, "s")
        # lo's qdisc at least, in JSON, from the session's tc; none unasked.
        assert "lo" in {q["dev"] for q in json.loads(first["tc-json"])}
        assert "tc-json" not in plain
        pid = int(first["tc-batch-stat"].split()[0])
        assert Path(f"/proc/{pid}/cmdline").read_text().split("\0")[:5] == \
            ["tc", "-s", "-j", "-batch", "-"]
        assert int(plain["tc-batch-schedstat"].split()[0]) > 0
        fifos = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in (0, 1)]
        assert [f.rsplit("/", 1)[1] for f in fifos] == ["i (deleted)", "o (deleted)"], fifos
        assert not Path(fifos[0].rsplit("/", 1)[0]).exists()
        os.kill(pid, 9)
        while not _ended(pid):
            os.sched_yield()
        again = _ask(p, "t")
        assert "lo" in {q["dev"] for q in json.loads(again["tc-json"])}
        assert "tc-batch-stat" not in _ask(p, "t")
        _quit(p)


@pytest.mark.skipif(shutil.which("tc") is None, reason="needs tc (make setup)")
@pytest.mark.parametrize("awk", AWKS, ids=lambda a: a[0])
def test_the_sessions_tc_ends_with_the_loop(awk: list[str]) -> None:
    argv = loop_argv(["/proc/stat"], "awk", False, "tc-batch")
    with _awk_loop(awk, argv, 20) as (p, watchdog):
        pid = int(_ask(p, "s")["tc-batch-stat"].split()[0])
        p.stdin.close()  # type: ignore[union-attr]  # the session's end: no "q"
        assert p.wait(5) == 0
        while not _ended(pid):
            assert watchdog.is_alive(), "the session's tc outlived its loop"
            os.sched_yield()


@pytest.mark.skipif(shutil.which("busybox") is None, reason="needs busybox (make setup)")
def test_sampler_loop_in_busybox_ash() -> None:
    """The device's side of the sampler, run by BusyBox ash here: one reply per request
    line, each file under its own name, ended by the terminator."""
    script = loop_script(["/proc/stat", "/proc/net/dev"], head=True, tc=None)
    busybox = shutil.which("busybox")
    assert busybox is not None
    res = subprocess.run([busybox, "sh", "-c", script], input="s\ns\nq\n", capture_output=True,
                         text=True, timeout=10, check=True)
    replies = res.stdout.split("@@hoplab-end@@\n")
    assert len(replies) == 3 and replies[2] == ""
    sec = split_sample(replies[0].splitlines())
    assert sec["/proc/stat"].startswith("cpu ")
    assert "Inter-|" in sec["/proc/net/dev"]
    stats = [k for k in sec if k.endswith("/stat") and k != "/proc/stat"]
    assert len(stats) == 2       # the loop shell's own and its parent's
    assert len([k for k in sec if k.endswith("/schedstat")]) == 2


@pytest.mark.parametrize("shell", SHELLS)
def test_the_facts_script_reads_this_machines_sysctls(shell: str) -> None:
    """The device's side of the facts, run here by each shell a device may have: every
    sysctl as /proc/sys has it, one absent key missing, not an error."""
    f, _ = _facts_here(shell, (*SYSCTLS, "net.ipv4.no_such_key"))
    assert f.values["sysctls"] == {
        k: " ".join(Path("/proc/sys", k.replace(".", "/")).read_text().split())
        for k in SYSCTLS}
    assert f.missing["sysctl net.ipv4.no_such_key"] == "not in /proc/sys on the device"
    # What one grep read for every /proc file: uname's answers, CPUs, boot id, uptime.
    me = os.uname()
    assert (f.values["kernel"], f.values["kernel_build"], f.values["machine"]) == \
        (me.release, me.version, me.machine)
    assert f.values["cpus"] == os.cpu_count() and f.values["cpu_model"]
    assert f.values["boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    assert 0 < f.values["uptime_s"] <= float(Path("/proc/uptime").read_text().split()[0])
    assert not {"kernel", "cpu_model"} & set(f.missing), f.missing


def _facts_here(shell: str, sysctls: tuple[str, ...],
                known: Known | None = None) -> tuple[Facts, str]:
    """The facts script run here by `shell`, as a device's SSH server would run it."""
    argv = script_argv(sysctls, known)
    assert argv[0] == "env" and argv[-3:-1] == ["sh", "-c"]
    env, script = argv[1:-3], argv[-1]
    run = [shell, "sh", "-c", script] if shell.endswith("busybox") else [shell, "-c", script]
    path = f"{SYSTEM_PATH}:{os.environ['PATH']}"
    res = subprocess.run(run, capture_output=True, text=True, timeout=30, check=True,
                         env={**os.environ, "PATH": path,
                              **dict(e.split("=", 1) for e in env)})
    return parse_facts(res.stdout, sysctls, known), res.stdout


# A node is told known paths only when its root is this machine's, so its shell is too
# (BusyBox's runs its own applets for tc and ping, whatever the PATH has).
@pytest.mark.parametrize("shell", [s for s in SHELLS if not s.endswith("busybox")])
def test_a_tool_at_a_known_path_is_named_not_run(shell: str) -> None:
    """A VM sharing this machine's root: the versions read here (versions_here) are the
    ones the guest's own runs print; a tool at a path not known is still run there."""
    known = versions_here({})
    assert {"iperf3", "tc", "ping"} <= set(known), known
    guest, _ = _facts_here(shell, ())
    here, out = _facts_here(shell, (), known)
    assert here.values["tools"] == guest.values["tools"]
    assert here.missing == guest.missing
    assert "@@@ tool_here iperf3" in out and "@@@ tool iperf3" not in out
    # iperf3 known at another path only: the guest's own is run for its version.
    moved = {**known, "iperf3": {"/nowhere/iperf3": "iperf 0.0"}}
    again, out = _facts_here(shell, (), moved)
    assert "@@@ tool iperf3" in out
    assert again.values["tools"]["iperf3"] == guest.values["tools"]["iperf3"]


def test_a_wrapper_of_the_nodes_own_reads_the_tool_it_runs() -> None:
    perf = shutil.which("perf", path=SYSTEM_PATH)
    assert perf is not None, "linux-perf is not installed"
    known = versions_here({"/usr/local/bin/perf": "perf"})
    version = subprocess.run([perf, "--version"], capture_output=True, text=True,
                             check=True).stdout.splitlines()[0].strip()
    assert known["perf"]["/usr/local/bin/perf"] == version == known["perf"][perf]


def test_adjtimex_answer_and_offset_metadata() -> None:
    assert _adjtimex(["    time.tv_sec:  1795437675", "    time.tv_usec: 966206"]) == \
        pytest.approx(1795437675.966206)
    whole = (DATA / "adjtimex-busybox.txt").read_text().splitlines()
    assert _adjtimex(whole) == pytest.approx(1796045807.919311)
    # A kernel whose clock discipline runs in nanoseconds (status 8256: STA_NANO and
    # UNSYNC), as this machine's was in a CI run: tv_usec holds nanoseconds.
    nano = (DATA / "adjtimex-busybox-nano.txt").read_text().splitlines()
    assert nano[5].split()[:2] == ["status:", "8256"]
    assert _adjtimex(nano) == pytest.approx(1796104692.891272845, abs=1e-6)
    # Without the status, nanoseconds read as microseconds are out of range: refused.
    micro_too_big = ["status: 64", "time.tv_sec: 1", "time.tv_usec: 1000000"]
    for lines in ([*nano[:5], *nano[6:]], micro_too_big):
        with pytest.raises(ValueError, match="out of range"):
            _adjtimex(lines)
    c = ClockOffset("r1", 0.003, 0.001, 0.002, "date-ns", 16)
    assert c.good_for(0.01) and not c.good_for(0.0005)
    assert c.as_metadata()["offset_s"] == 0.003
