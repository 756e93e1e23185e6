"""What a kind of node supplies: the way commands and files reach it.

A kind of node is one class that implements this Transport and inherits
hoplab.nodes.client.Client, which writes the rest of the Executor once on top of it
(stopping a process, which tools a node has, its facts, whether it rebooted), as an
HTTP client's transport carries only the request while the client does the rest. The
registry (hoplab.nodes.registry) names the class; nothing else asks which kind a node is.

Beyond running a command, starting, signalling a process and reading and copying a
file, a transport supplies what only the kind can do cheaply or at all:
- interact: a person's command, streamed both ways (a namespace execs in place, SSH
  streams over a channel);
- channel: a long-lived request/response process (a pipe here, a session over SSH);
- counters: one sampler's reads, every few ms (a namespace reads /proc and netlink in a
  thread that entered it, a device keeps one SSH session that answers each request);
- close: release connections, having stopped what it still tracks (Client.stop_all).

The client has a default for the rest, which a kind replaces where it can do better:
- signal_recorded: a signal to processes a record names, each only while it still has
  its recorded start time. The default reads /proc/PID/stat through read_file and then
  runs `kill`; the namespace and SSH transports check and send in one step on the node
  (one shell on a device), so that a PID reused in between is never hit;
- release: what a stopped process held (its SSH connection, its entry in the list of
  processes close() stops); the default holds nothing;
- written and pids: None (see Executor), unless the kind can tell.

And states two facts the client reads instead of asking for the kind's name:
- shares_kernel: the node is a namespace of this machine, so its kernel, CPUs and tools
  are this machine's (every run's host metadata records them): `which` is this
  machine's lookup, `facts` only `where`, it never rebooted under a running hoplab and
  its counters have no CPU series of their own;
- where: what places it on the machine it shares (a namespace's name), in its facts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from hoplab.nodes.executor import Completed, CounterSource, LineChannel, Process, ProcessId


class Transport(Protocol):
    node: str       # the lab node's name
    kind: str       # for display only, never for branching
    machine: str    # the kernel its commands share (see Executor.machine)
    shares_kernel: bool
    where: Mapping[str, str]

    def run(self, argv: Sequence[str], *, input: str | None = None,
            timeout: float = 60.0, env: Mapping[str, str] | None = None,
            cwd: str | None = None) -> Completed:
        """See Executor.run."""
        ...

    def interact(self, argv: Sequence[str], *, stdin: int, stdout: int, stderr: int,
                 timeout: float | None = None) -> int:
        """See Executor.interact."""
        ...

    def start(self, name: str, argv: Sequence[str], *, out: Path, err: Path,
              noted: Callable[[Process], None] | None = None) -> Process:
        """See Executor.start; tracked until release()."""
        ...

    def signal(self, proc: Process, signum: int) -> None:
        """One signal to a process it started (its process group where the kind makes
        one); a process already gone is no error."""
        ...

    def signal_recorded(self, signum: int, idents: Sequence[ProcessId]) -> set[ProcessId]:
        """Send signum (0: none, only look) to each process still alive with its
        recorded start time; those that were. A zombie is gone."""
        ...

    def release(self, proc: Process) -> None:
        """Forget a process that was stopped and free what it held."""
        ...

    def channel(self, argv: Sequence[str], terminator: str) -> LineChannel:
        """See Executor.channel."""
        ...

    def read_file(self, path: str, timeout: float = 10.0) -> bytes | None:
        """See Executor.read_file."""
        ...

    def copy_back(self, remote: str, local: Path, timeout: float = 600.0) -> None:
        """See Executor.copy_back."""
        ...

    def counters(self, kinds: frozenset[str]) -> CounterSource:
        """See Executor.counters."""
        ...

    def close(self) -> None:
        """See Executor.close."""
        ...
