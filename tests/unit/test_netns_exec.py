"""The namespace executor on this machine as it is (netns None), as any user: commands,
processes told apart by their start time, files, a request/response channel, counters.
In a real namespace: tests/lab/test_netns_exec.py."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from hoplab.nodes.executor import CounterSource, Executor, ProcessId
from hoplab.nodes.fake import FakeExecutor
from hoplab.nodes.netns_exec import NetnsExecutor
from hoplab.nodes.procs import proc_start_time


def here() -> NetnsExecutor:
    return NetnsExecutor("host", None)


def test_both_implementations_are_executors() -> None:
    # mypy checks these assignments against the Protocol; isinstance checks the names.
    a: Executor = here()
    b: Executor = FakeExecutor("r1")
    assert isinstance(a, Executor) and isinstance(b, Executor)


def test_run_returns_what_the_command_said(tmp_path: Path) -> None:
    ex = here()
    done = ex.run(["sh", "-c", 'printf "%s|%s" "$1" "$(cat)"; echo oops >&2; exit 3', "sh",
                   "a b; rm -rf /"], input="fed")
    assert (done.returncode, done.stdout, done.stderr) == (3, "a b; rm -rf /|fed", "oops\n")
    assert ex.run(["pwd"], cwd=str(tmp_path)).stdout.strip() == str(tmp_path)
    assert ex.run(["sh", "-c", 'echo "$HOPLAB_X"'], env={"HOPLAB_X": "y"}).stdout == "y\n"


def test_interact_streams_through_the_callers_descriptors(tmp_path: Path) -> None:
    ex = here()
    fin, out, err = (tmp_path / n for n in ("in", "out", "err"))
    fin.write_bytes(b"fed\n")
    with fin.open("rb") as i, out.open("wb") as o, err.open("wb") as e:
        code = ex.interact(["sh", "-c", 'cat; printf "%s" "$1" >&2; exit 5', "sh", "a; b"],
                           stdin=i.fileno(), stdout=o.fileno(), stderr=e.fileno())
        # Killed by a signal: 128 + N, as a shell says it.
        killed = ex.interact(["sh", "-c", "kill -TERM $$"], stdin=i.fileno(),
                             stdout=o.fileno(), stderr=e.fileno())
        missing = ex.interact(["hoplab-no-such-tool"], stdin=i.fileno(), stdout=o.fileno(),
                              stderr=e.fileno())
    assert (code, out.read_bytes(), err.read_bytes()) == (
        5, b"fed\n", b"a; bhoplab-no-such-tool: command not found\n")
    assert (killed, missing) == (128 + signal.SIGTERM, 127)


def test_a_missing_command_is_127_as_a_shell_says_it() -> None:
    done = here().run(["hoplab-no-such-tool", "-x"])
    assert done.returncode == 127
    assert done.stderr == "hoplab-no-such-tool: command not found"


def test_a_command_past_its_timeout_is_stopped() -> None:
    began = time.monotonic()
    with pytest.raises(TimeoutError, match=r"did not finish in 0\.2 s"):
        here().run(["sleep", "5"], timeout=0.2)
    assert time.monotonic() - began < 2


def test_a_process_is_identified_by_pid_and_start_time(tmp_path: Path) -> None:
    ex = here()
    proc = ex.start("sleeper", ["sh", "-c", "echo up; exec sleep 30"],
                    out=tmp_path / "o", err=tmp_path / "e")
    ticks = proc_start_time(proc.ident.pid)
    assert ticks is not None and proc.ident == ProcessId("host", proc.ident.pid, ticks)
    deadline = time.monotonic() + 10
    while not (tmp_path / "o").read_text() and time.monotonic() < deadline:
        time.sleep(0.01)  # started, and has said so (a busy machine is slow to)
    assert proc.poll() is None
    assert ex.written(proc) is not None
    # A record whose start time differs is another process that got the PID: untouched.
    ex.stop_recorded(ProcessId("host", proc.ident.pid, proc.ident.start_ticks + 1), grace=0.1)
    assert proc.poll() is None
    ex.stop(proc, grace=1.0)
    assert proc.wait(1.0) == -signal.SIGTERM
    assert (tmp_path / "o").read_text() == "up\n"
    assert ex.written(proc) is None  # reaped: nothing more to read


def test_stop_recorded_stops_the_process_a_state_file_names(tmp_path: Path) -> None:
    ex = here()
    proc = ex.start("sleeper", ["sleep", "30"], out=tmp_path / "o", err=tmp_path / "e")
    ex.stop_recorded(proc.ident, grace=1.0)
    assert proc.poll() is not None and proc_start_time(proc.ident.pid) is None


def wait_for(path: Path, text: str, seconds: float = 10.0) -> None:
    """Until the process has written `text` (a busy machine is slow to start one)."""
    deadline = time.monotonic() + seconds
    while text not in path.read_text():
        assert time.monotonic() < deadline, f"{path.name}: no {text!r} in {seconds:g} s"
        time.sleep(0.01)


STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


# ignoring: this process has the stop signals ignored, as a background job of a script
# has SIGINT (and nohup SIGHUP); what it starts must not inherit that.
@pytest.mark.parametrize("ignoring", [False, True])
def test_signal_reaches_the_process_and_close_stops_what_is_left(tmp_path: Path,
                                                                 ignoring: bool) -> None:
    ex = here()
    # The trap stops the shell's own child too: nothing of the group is left.
    script = ("trap 'kill $child; wait $child; echo got; exit 7' INT; "
              "sleep 30 & child=$!; echo ready; wait")
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOPS} if ignoring else {}
    try:
        trap = ex.start("trap", ["sh", "-c", script], out=tmp_path / "t", err=tmp_path / "te")
        other = ex.start("other", ["sleep", "30"], out=tmp_path / "o", err=tmp_path / "oe")
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    try:
        wait_for(tmp_path / "t", "ready\n")  # the trap is set
        ex.signal(trap, signal.SIGINT)
        assert trap.wait(5.0) == 7
        assert (tmp_path / "t").read_text() == "ready\ngot\n"
        with pytest.raises(ProcessLookupError):
            os.killpg(trap.ident.pid, 0)
    finally:
        ex.close()
    assert other.poll() is not None


def test_a_process_starts_with_the_stop_signals_at_their_defaults(tmp_path: Path) -> None:
    old = {sig: signal.signal(sig, signal.SIG_IGN) for sig in STOPS}
    try:
        proc = here().start("status", ["cat", "/proc/self/status"], out=tmp_path / "o",
                            err=tmp_path / "e")
        ch = here().channel(["sh", "-c", "while read l; do grep SigIgn /proc/$$/status; "
                             "echo END; done"], "END")
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
    try:
        assert proc.wait(5.0) == 0
        shell = ch.ask("x", 5.0)
    finally:
        ch.close()

    def ignored(line: str) -> set[int]:
        mask = int(line.split()[1], 16)
        return {sig for sig in STOPS if mask >> (sig - 1) & 1}

    status = (tmp_path / "o").read_text().splitlines()
    assert ignored(next(ln for ln in status if ln.startswith("SigIgn:"))) == set()
    assert ignored(shell[0]) == set()


def test_files_tools_and_copies(tmp_path: Path) -> None:
    ex = here()
    assert ex.read_file("/proc/sys/kernel/ostype") == b"Linux\n"
    assert ex.read_file(str(tmp_path / "absent")) is None
    src = tmp_path / "a.txt"
    src.write_text("data")
    ex.copy_back(str(src), tmp_path / "b.txt")
    ex.copy_back(str(src), src)  # already here: nothing to do
    assert (tmp_path / "b.txt").read_text() == "data" and src.read_text() == "data"
    tools = ex.which(["sh", "hoplab-no-such-tool"])
    assert tools["sh"] is not None and os.access(tools["sh"], os.X_OK)
    assert tools["hoplab-no-such-tool"] is None


def test_a_channel_answers_one_request_line_at_a_time() -> None:
    ch = here().channel(["sh", "-c", 'while read l; do echo "$l"; echo "$l$l"; echo END; '
                         'done'], "END")
    try:
        assert ch.ask("a", 2.0) == ["a", "aa"]
        assert ch.ask("b c", 2.0) == ["b c", "b cb c"]
    finally:
        ch.close()


def test_counters_of_this_namespace() -> None:
    src: CounterSource = here().counters(frozenset({"ifaces", "tcp"}))
    try:
        snap = src.read()
    finally:
        src.close()
    assert snap.net_dev is not None and " lo:" in snap.net_dev
    assert snap.snmp is not None and snap.snmp.startswith("Ip:")
    # A namespace's CPU is the host's series; it gives none of its own.
    assert snap.proc_stat is None and snap.qdiscs is None and snap.extra == []
