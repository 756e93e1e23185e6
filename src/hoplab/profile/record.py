"""perf record during one phase of a test, then perf script.

A lab's nodes are namespaces on one kernel, so perf samples the whole host
(-a): forwarding and WireGuard in softirq run in whatever task the CPU was in,
and cannot be told apart by namespace. Samples are therefore kept host-wide;
what can be attributed is the user-space processes living in a node (its
iperf3, its wireguard-go), listed by PID while the phase runs.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from hoplab.errors import HoplabError
from hoplab.profile.tools import need


@dataclass
class Recording:
    data: Path
    frequency: int
    started: float = 0.0
    stopped: float = 0.0
    proc: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    pids: dict[str, set[int]] = field(default_factory=dict)

    def start(self) -> None:
        perf = need("perf")
        self.log = self.data.with_suffix(".log")
        with self.log.open("wb") as log:
            # -g: frame-pointer call graphs, which the kernel always has; user stacks of
            # binaries built without frame pointers end early, and say so ([unknown]).
            self.proc = subprocess.Popen(
                [perf, "record", "-a", "-g", "-F", str(self.frequency), "-o", str(self.data)],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        self.started = time.time()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        """SIGINT makes perf write its data file and exit, as Ctrl-C would."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.stopped = time.time()

    def failure(self) -> str | None:
        """Why there is no profile, in perf's words, or None."""
        if self.data.exists() and self.data.stat().st_size > 0:
            return None
        text = self.log.read_text(errors="replace") if self.log and self.log.exists() else ""
        return " ".join(text.split())[:300] or "perf wrote no data"


def script(data: Path) -> str:
    """perf script with the fields the folder needs (pid and tid included). Without the
    period field, every sample counts one, as in perf report's sample counts."""
    perf = need("perf")
    proc = subprocess.run([perf, "script", "-i", str(data), "-F",
                           "comm,pid,tid,cpu,time,event,ip,sym,dso"],
                          capture_output=True, text=True, errors="replace", check=False,
                          timeout=600)
    if proc.returncode != 0:
        raise HoplabError(f"perf script failed: {' '.join(proc.stderr.split())[:300]}")
    return proc.stdout
