"""perf record during one phase of a test, then perf script, on the node's machine.

perf runs where the profiled nodes' kernel is, through the node's executor: a
lab's namespaces are on one kernel, this machine's, so one perf samples the
whole host (-a): forwarding and WireGuard in softirq run in whatever task the
CPU was in, and cannot be told apart by namespace. A device's perf samples the
device. perf script runs there too (the symbols are that machine's) and its
output is copied back. `data` is the recording's path on the node and here
(its directory is made on the node first); on this machine it is one file.
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from hoplab.errors import CapabilityError, HoplabError
from hoplab.nodes.executor import Executor, Process
from hoplab.nodes.registry import this_machine
from hoplab.profile import fold
from hoplab.profile.tools import need

# Fields the folder needs (pid and tid included). Without the period field, every
# sample counts one, as in perf report's sample counts.
SCRIPT_FIELDS = "comm,pid,tid,cpu,time,event,ip,sym,dso"
# perf in a guest under TCG reads /proc/kallsyms and walks /lib/modules before it
# samples anything: 20 to 40 s on a loaded machine. It is started with its events off
# and asked over its control FIFO whether it is up (readiness, not a sleep), so that
# the phase it profiles is sampled from its first second.
READY_TIMEOUT_S = 180.0
STOP_TIMEOUT_S = 90.0
PERF_MISSING = ("perf is not installed where {node} runs: apt-get install linux-perf (or make "
                "setup); on OpenWrt: opkg install perf (a kernel with KERNEL_PERF_EVENTS)")


@dataclass
class Recording:
    data: Path
    frequency: int
    node: Executor = field(default_factory=this_machine)
    started: float = 0.0
    stopped: float = 0.0
    proc: Process | None = None
    log: Path | None = None
    pids: dict[str, set[int]] = field(default_factory=dict)
    # The data's directory was made for it alone (on a device): removed with its files.
    own_dir: bool = False
    # Each is a command on the node (an SSH round trip to a device, 0.2 to 0.5 s to a VM
    # under TCG): asked once.
    _perf_path: str | None = field(default=None, init=False, repr=False)
    _removed: bool = field(default=False, init=False, repr=False)
    _dir_gone: bool = field(default=False, init=False, repr=False)

    def _perf(self) -> str:
        if self._perf_path is None:
            perf = self.node.which(["perf"]).get("perf")
            if perf is None:
                raise CapabilityError(PERF_MISSING.format(node=self.node.node))
            self._perf_path = perf
        return self._perf_path

    def start(self, noted: Callable[[Process], None] | None = None, *,
              enable: bool = True, ready_timeout: float = READY_TIMEOUT_S) -> None:
        """Starts perf with its events off and returns once it is up; then enables them
        unless `enable` is false (see enable). `noted`: as for Executor.start, called
        before perf runs."""
        perf = self._perf()
        self.log = self.data.with_suffix(".log")
        ctl, ack = self._fifos()
        self.node.run(["sh", "-c", 'mkdir -p "$0" && rm -f "$1" "$2" && mkfifo "$1" "$2"',
                       str(self.data.parent), ctl, ack], timeout=10)
        # -g: frame-pointer call graphs, which the kernel always has; user stacks of
        # binaries built without frame pointers end early, and say so ([unknown]).
        # -B: no build IDs, which perf record reads from every binary its samples hit
        # once it stops (2.6 s of a guest's under TCG); perf script runs where it recorded.
        self.proc = self.node.start(
            "perf record", [perf, "record", "-B", "-a", "-g", "-F", str(self.frequency),
                            "-D", "-1", "--control", f"fifo:{ctl},{ack}", "-o",
                            str(self.data)],
            out=self.data.with_suffix(".out"), err=self.log, noted=noted)
        # A command perf answers only from its main loop, once its events are open and
        # what it reads at start is read; "disable" is a no-op on events still off.
        if not self._command("disable", ready_timeout):
            raise HoplabError(f"perf record on {self.node.node} was not ready in "
                              f"{ready_timeout:.0f} s: {self._log_text()[:300]}")
        if enable:
            self.enable()

    def enable(self) -> None:
        """Its events on: sampling starts now."""
        if not self._command("enable", 60.0):
            raise HoplabError(f"perf record on {self.node.node} did not enable its "
                              f"events: {self._log_text()[:300]}")
        self.started = time.time()

    def _fifos(self) -> tuple[str, str]:
        return str(self.data.with_suffix(".ctl")), str(self.data.with_suffix(".ack"))

    def _command(self, command: str, timeout: float) -> bool:
        """Writes `command` to perf's control FIFO; true once perf answers "ack". perf
        holds both FIFOs open, so neither open blocks, and its exit ends the read."""
        ctl, ack = self._fifos()
        try:
            done = self.node.run(["sh", "-c", 'echo "$2" > "$0" && read -r a < "$1" && '
                                  '[ "$a" = ack ]', ctl, ack, command], timeout=timeout)
        except TimeoutError:
            return False
        return done.returncode == 0

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGINT makes perf write its data file and exit, as Ctrl-C would."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            # Its events off first: perf takes seconds to write its data in a TCG guest,
            # and what it would sample meanwhile is not the phase's.
            if self.started and not self.stopped and self._command("disable", 30.0):
                self.stopped = time.time()
            self.node.signal(self.proc, signal.SIGINT)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT_S)
            except TimeoutError:
                self.node.stop(self.proc, grace=0.0)
        if not self.stopped:
            self.stopped = time.time()

    def failure(self) -> str | None:
        """Why there is no profile, in perf's words, or None."""
        if self.node.run(["test", "-s", str(self.data)], timeout=10).returncode == 0:
            return None
        return self._log_text()[:300] or "perf wrote no data"

    def _log_text(self) -> str:
        text = ""
        for f in (self.log, self.data.with_suffix(".out")):
            if f is not None and f.exists():
                text += f.read_text(errors="replace")
        return " ".join(text.split())

    def script(self) -> str:
        """perf script of the recording, run on its node, its output copied back here;
        both files are then removed from the node."""
        return self._scripted(lambda out: out.read_text(errors="replace"))

    def folded(self, options: Sequence[str]) -> str:
        """The recording's folded stacks: hoplab-fold streams perf script's output from
        the copied-back file, which is never read into memory here."""
        return self._scripted(lambda out: fold.collapse_file(out, options))

    def _scripted(self, use: Callable[[Path], str]) -> str:
        perf = self._perf()
        out = self.data.with_suffix(".script")
        try:
            # The shell only redirects: every value is an argument ($0..$3), never code.
            done = self.node.run(["sh", "-c", 'exec "$0" script -i "$1" -F "$2" > "$3"',
                                  perf, str(self.data), SCRIPT_FIELDS, str(out)],
                                 timeout=600)
            if done.returncode != 0:
                raise HoplabError(f"perf script failed: {' '.join(done.stderr.split())[:300]}")
            self.node.copy_back(str(out), out)
            return use(out)
        finally:
            self.remove()

    def remove(self) -> bool:
        """Its files on the node (the recording, perf script's output, the FIFOs), and
        its directory when it is its own, in one command; once. True when the directory
        went too."""
        if not self._removed:
            files = [str(self.data), str(self.data.with_suffix(".script")), *self._fifos()]
            if self.own_dir:
                done = self.node.run(["sh", "-c", 'rm -f "$@" && rmdir "$0"',
                                      str(self.data.parent), *files], timeout=10)
                self._dir_gone = done.returncode == 0
            else:
                self.node.run(["rm", "-f", *files], timeout=10)
            self._removed = True
        return self._dir_gone


def script(data: Path) -> str:
    """perf script, on this machine, with the fields the folder needs."""
    perf = need("perf")
    proc = subprocess.run([perf, "script", "-i", str(data), "-F", SCRIPT_FIELDS],
                          capture_output=True, text=True, errors="replace", check=False,
                          timeout=600)
    if proc.returncode != 0:
        raise HoplabError(f"perf script failed: {' '.join(proc.stderr.split())[:300]}")
    return proc.stdout
