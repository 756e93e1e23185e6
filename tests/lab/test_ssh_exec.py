"""The SSH executor against real SSH servers: dropbear in an OpenWrt-like root with
BusyBox alone, and OpenSSH's sshd on a Linux board (tests/helpers/devices.py)."""

from __future__ import annotations

import hashlib
import signal
import threading
import time
from contextlib import suppress
from pathlib import Path

import asyncssh
import pytest

from hoplab.nodes.executor import Executor, ExecutorError, Process
from hoplab.nodes.ssh_conn import HostKeyError
from hoplab.nodes.ssh_exec import SshExecutor, stop_recorded
from hoplab.nodes.ssh_quote import parse_stat
from tests.helpers.devices import Device, Farm

pytestmark = pytest.mark.root


def _alive_on(dev: Device, pid: int) -> bool:
    return dev.exec("test", "-d", f"/proc/{pid}").returncode == 0


def test_is_an_executor(ex: SshExecutor) -> None:
    assert isinstance(ex, Executor)


def test_run_argv_verbatim(ex: SshExecutor) -> None:
    args = ["a b", "$(id)", "`id`", "; ls", "'\"", "*", "\\n", "", "-n"]
    res = ex.run(["printf", "%s|", *args])
    assert res.returncode == 0
    assert res.stdout == "".join(f"{a}|" for a in args)


def test_run_input_status_env_cwd(ex: SshExecutor) -> None:
    assert ex.run(["cat"], input="one\ntwo\n").stdout == "one\ntwo\n"
    assert ex.run(["sh", "-c", "echo oops >&2; exit 3"]).returncode == 3
    assert ex.run(["sh", "-c", "echo oops >&2; exit 3"]).stderr == "oops\n"
    assert ex.run(["sh", "-c", 'echo "$X"'], env={"X": "$(id) y"}).stdout == "$(id) y\n"
    assert ex.run(["pwd"], cwd="/tmp").stdout == "/tmp\n"
    missing = ex.run(["no-such-tool-hl", "x"])
    assert (missing.returncode, missing.stderr) == (127, "no-such-tool-hl: command not found\n")


def test_run_timeout_stops_the_command(ex: SshExecutor, dev: Device) -> None:
    t = time.monotonic()
    with pytest.raises(TimeoutError, match="r1"):
        ex.run(["sh", "-c", "echo $$ >/tmp/hl-timeout; exec sleep 30"], timeout=1)
    assert time.monotonic() - t < 5
    pid = int(dev.exec("cat", "/tmp/hl-timeout").stdout)
    deadline = time.monotonic() + 2
    while _alive_on(dev, pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive_on(dev, pid)


def test_read_file_and_copy_back(ex: SshExecutor, tmp_path: Path) -> None:
    assert ex.read_file("/no/such/file") is None
    os_release = ex.read_file("/etc/os-release")
    assert os_release is not None and b"NAME=" in os_release
    # 3 MB of random bytes, made on the device, come back byte for byte.
    assert ex.run(["dd", "if=/dev/urandom", "of=/tmp/hl-copy", "bs=1024", "count=3000"],
                  timeout=30).returncode == 0
    local = tmp_path / "copy"
    ex.copy_back("/tmp/hl-copy", local)
    data = local.read_bytes()
    assert len(data) == 3000 * 1024
    remote = ex.run(["md5sum", "/tmp/hl-copy"]).stdout.split()[0]
    assert hashlib.md5(data).hexdigest() == remote
    with pytest.raises(ExecutorError, match="no such file"):
        ex.copy_back("/no/such/file", tmp_path / "none")
    assert not (tmp_path / "none").exists() and not (tmp_path / "none.part").exists()
    ex.run(["rm", "/tmp/hl-copy"])


def test_which(ex: SshExecutor, dev: Device) -> None:
    got = ex.which(["iperf3", "tc", "python3", "no-such-tool-hl"])
    assert got["iperf3"] == "/usr/bin/iperf3"
    assert got["no-such-tool-hl"] is None
    if dev.kind == "openwrt-like":
        assert got["tc"] is None and got["python3"] is None
    else:
        assert got["tc"] == "/usr/sbin/tc"


def test_start_stop_by_pid_and_start_ticks(ex: SshExecutor, dev: Device,
                                           tmp_path: Path) -> None:
    p = ex.start("sleeper", ["sh", "-c", "echo started; echo err >&2; exec sleep 60"],
                 out=tmp_path / "out", err=tmp_path / "err")
    # The PID and start ticks are the tool's own, as the device's /proc tells them.
    stat = dev.exec("cat", f"/proc/{p.ident.pid}/stat").stdout
    assert parse_stat(stat) == (p.ident.pid, p.ident.start_ticks)
    assert p.poll() is None
    deadline = time.monotonic() + 5
    while (tmp_path / "out").read_text() != "started\n" and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (tmp_path / "out").read_text() == "started\n"
    assert (tmp_path / "err").read_text() == "err\n"
    ex.stop(p, grace=1)
    assert p.poll() == -signal.SIGTERM
    assert not _alive_on(dev, p.ident.pid)


def test_a_process_runs_only_once_it_is_noted(ex: SshExecutor, dev: Device,
                                             tmp_path: Path) -> None:
    """hoplab killed between the device's exec and writing the PID down (here: the
    record raises) leaves nothing running: the tool is exec'd only after `noted`."""
    seen: list[int] = []

    def dies(p: Process) -> None:
        seen.append(p.ident.pid)
        assert _alive_on(dev, p.ident.pid)       # the gate: a shell, waiting for "go"
        raise RuntimeError("the record could not be written")

    with pytest.raises(RuntimeError, match="could not be written"):
        ex.start("never", ["touch", "/tmp/hoplab-gate-ran"], out=tmp_path / "o",
                 err=tmp_path / "e", noted=dies)
    deadline = time.monotonic() + 5
    while _alive_on(dev, seen[0]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive_on(dev, seen[0])
    assert ex.run(["ls", "/tmp/hoplab-gate-ran"]).returncode != 0
    got: list[Process] = []
    p = ex.start("noted", ["sh", "-c", "exit 3"], out=tmp_path / "o", err=tmp_path / "e",
                 noted=got.append)
    assert p.wait(5) == 3 and got == [p]


def test_exit_status_of_a_started_process(ex: SshExecutor, tmp_path: Path) -> None:
    p = ex.start("quick", ["sh", "-c", "exit 7"], out=tmp_path / "o", err=tmp_path / "e")
    assert p.wait(5) == 7


def test_stop_escalates_to_sigkill(ex: SshExecutor, dev: Device, tmp_path: Path) -> None:
    p = ex.start("stubborn", ["sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done"],
                 out=tmp_path / "o", err=tmp_path / "e")
    deadline = time.monotonic() + 5
    while not (tmp_path / "o").read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    t = time.monotonic()
    ex.stop(p, grace=0.5)
    assert time.monotonic() - t < 5
    assert not _alive_on(dev, p.ident.pid)


def test_signal_and_a_reused_pid_is_left_alone(ex: SshExecutor, dev: Device,
                                               tmp_path: Path) -> None:
    p = ex.start("s", ["sleep", "60"], out=tmp_path / "o", err=tmp_path / "e")
    # The same PID with other start ticks is another process: nothing is sent to it.
    from hoplab.nodes.executor import ProcessId
    other = ProcessId("r1", p.ident.pid, p.ident.start_ticks + 1)
    ex.stop_recorded(other, grace=0.2)
    assert _alive_on(dev, p.ident.pid)
    ex.signal(p, signal.SIGKILL)
    assert p.wait(5) == -signal.SIGKILL


def test_close_stops_what_it_started(dev: Device, tmp_path: Path) -> None:
    e = SshExecutor(dev.target("r1"))
    procs = [e.start(f"s{i}", ["sleep", "60"], out=tmp_path / f"o{i}", err=tmp_path / f"e{i}")
             for i in range(3)]
    e.close()
    for p in procs:
        assert not _alive_on(dev, p.ident.pid)


def test_stop_recorded_after_a_crash(dev: Device, tmp_path: Path) -> None:
    """`hoplab clean` after a SIGKILL: only the state file's ProcessIds are left."""
    e = SshExecutor(dev.target("r1"))
    p = e.start("left", ["sleep", "60"], out=tmp_path / "o", err=tmp_path / "e")
    e.conn.close()          # the crash: the connection goes, nothing is stopped
    assert _alive_on(dev, p.ident.pid)
    stop_recorded(dev.target("r1"), [p.ident], grace=1)
    assert not _alive_on(dev, p.ident.pid)


def test_parallel_commands_on_one_connection(ex: SshExecutor, dev: Device) -> None:
    """Channels are opened one at a time: dropbear drops a connection on which two
    channel opens cross (OpenWrt issue 11208). 8 threads x 5 commands at once."""
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(5):
                assert ex.run(["echo", f"{i}-{j}"]).stdout == f"{i}-{j}\n"
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors
    assert ex.conn.connects == 1


def _running(dev: Device, comm: str) -> bool:
    """A process named `comm` runs on the device."""
    for pid in dev.pids():
        with suppress(OSError):
            if Path(f"/proc/{pid}/comm").read_text().strip() == comm:
                return True
    return False


def test_server_killed_mid_command_then_back(device_farm: Farm) -> None:
    dev = device_farm.add("openwrt-like")
    e = SshExecutor(dev.target("r1"))
    try:
        assert e.run(["true"]).returncode == 0
        got: list[BaseException] = []

        def long() -> None:
            try:
                e.run(["sleep", "20"], timeout=30)
                got.append(AssertionError("returned"))
            except BaseException as x:
                got.append(x)

        th = threading.Thread(target=long)
        th.start()
        deadline = time.monotonic() + 10
        while not _running(dev, "sleep"):  # the command runs on the device
            assert th.is_alive() and time.monotonic() < deadline, got
            time.sleep(0.01)
        t = time.monotonic()
        dev.kill_ssh()
        th.join(20)
        assert time.monotonic() - t < 10
        assert len(got) == 1 and isinstance(got[0], ExecutorError)
        assert "node r1" in str(got[0]) and "connection lost" in str(got[0])
        # Down for good (as seen within a 1 s connect timeout): an error naming the node.
        down = SshExecutor(dev.target("r1", connect_timeout=1.0))
        try:
            with pytest.raises(ExecutorError, match="node r1: cannot connect"):
                down.run(["true"])
        finally:
            down.close()
        # Back within the connect timeout: the next call connects again and succeeds.
        timer = threading.Timer(1.0, dev.start_server)
        timer.start()
        try:
            assert e.run(["echo", "back"]).stdout == "back\n"
        finally:
            timer.join()
        assert e.conn.connects == 2
    finally:
        e.close()


def test_reboot_is_noticed(ex: SshExecutor) -> None:
    ex.run(["true"])
    assert ex.check_rebooted() is False
    up = ex.uptime()
    assert up is not None and up > 0
    # As after a reboot: the uptime hoplab saw last is ahead of the device's.
    assert ex._boot is not None
    ex._boot = (up + 1000.0, ex._boot[1])
    assert ex.check_rebooted() is True
    assert ex.reboots == 1
    assert ex.check_rebooted() is False
    # A reboot seen when a command reconnected (the device was down) is still told to
    # the next check_rebooted(), which reads the uptime again after that command.
    ex._boot = (up + 1000.0, ex._boot[1])

    async def drop(conn: asyncssh.SSHClientConnection) -> None:
        conn.close()
        await conn.wait_closed()

    ex.conn.call(drop, 5)
    connects = ex.conn.connects
    ex.run(["true"])
    ex.run(["true"])
    assert ex.conn.connects == connects + 1 and ex.reboots == 2
    assert ex.check_rebooted() is True
    assert ex.check_rebooted() is False


def test_unknown_host_key_refused(device_farm: Farm, tmp_path: Path) -> None:
    dev = device_farm.add("openwrt-like", known=False)
    e = SshExecutor(dev.target("r1"))
    try:
        with pytest.raises(HostKeyError) as info:
            e.run(["touch", "/tmp/hl-ran"])
        msg = str(info.value)
        assert "unknown host key" in msg and dev.address in msg
        assert "--accept-new-host-keys" in msg and "accept_new_host_keys" in msg
    finally:
        e.close()
    assert dev.exec("test", "-e", "/tmp/hl-ran").returncode != 0
    # Accepted when asked: the key is written to known_hosts, and is then the one checked.
    kh = tmp_path / "known_hosts"
    e = SshExecutor(dev.target("r1", known_hosts=str(kh), accept_new_host_keys=True))
    try:
        assert e.run(["echo", "ok"]).stdout == "ok\n"
    finally:
        e.close()
    assert kh.read_text().startswith(f"{dev.address} ssh-")
    e = SshExecutor(dev.target("r1", known_hosts=str(kh)))
    try:
        assert e.run(["echo", "checked"]).stdout == "checked\n"
    finally:
        e.close()


def test_changed_host_key_refused_even_with_accept(device_farm: Farm, tmp_path: Path) -> None:
    dev = device_farm.shared("openwrt-like")
    other = device_farm.shared("linux-board")
    kh = tmp_path / "known_hosts"
    kh.write_text(f"{dev.address} {other.host_key_pub}\n")
    e = SshExecutor(dev.target("r1", known_hosts=str(kh), accept_new_host_keys=True))
    try:
        with pytest.raises(HostKeyError, match="not the one in"):
            e.run(["true"])
    finally:
        e.close()
    assert kh.read_text() == f"{dev.address} {other.host_key_pub}\n"


def test_keys_only_never_a_password(dev: Device, tmp_path: Path) -> None:
    import subprocess
    key = tmp_path / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    e = SshExecutor(dev.target("r1", identity=str(key)))
    t = time.monotonic()
    try:
        with pytest.raises(ExecutorError, match="refused our keys"):
            e.run(["true"])
    finally:
        e.close()
    assert time.monotonic() - t < 10       # no prompt waited for


def test_through_a_jump_host(device_farm: Farm) -> None:
    """ssh_options.jump: the device is reached through a bastion (here a Linux board,
    jumping to its own address), with the same key and known_hosts."""
    board = device_farm.add("linux-board")
    e = SshExecutor(board.target("r1", jump=f"root@{board.address}:22"))
    try:
        assert e.run(["echo", "via", "jump"]).stdout == "via jump\n"
        assert e.conn._tunnel is not None
    finally:
        e.close()
    # Nothing listens on port 1 of this machine: the jump host refuses at once.
    bad = SshExecutor(board.target("r1", jump="root@127.0.0.1:1", connect_timeout=2))
    try:
        with pytest.raises(ExecutorError, match=r"jump host root@127\.0\.0\.1"):
            bad.run(["true"])
    finally:
        bad.close()
