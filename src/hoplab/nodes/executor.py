"""The one seam between hoplab and the place a node's commands run.

Traffic, samplers, profiles, metadata, setup and teardown call a node's
Executor and never ask which kind it is. A kind supplies only a Transport
(hoplab.nodes.transport: run, start, signal, read, copy and what only it can do);
hoplab.nodes.client writes the rest once on top (stop, stop_recorded, which, facts,
check_rebooted). Kinds: a network namespace on this machine
(hoplab.nodes.netns_exec), a device or VM over SSH (hoplab.nodes.ssh_exec) and, for
unit tests, hoplab.nodes.fake.

Every argv is a list; an implementation that crosses a shell (SSH) quotes it
once, at that boundary, so no name, address or option from a lab file can run a
shell command on either side. Every call has a timeout.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from hoplab.errors import HoplabError

if TYPE_CHECKING:
    # Only named in annotations: `lab up` imports this module and need not load the parsers.
    from hoplab.tools.ss import Socket
    from hoplab.tools.tc import QdiscStats


# The sysctls a run records of every node: a device's facts read them, a namespace's
# settings through read_file (hoplab.lab.ready).
SYSCTLS = (
    "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
    "net.core.rmem_max", "net.core.wmem_max", "net.core.default_qdisc",
    "net.ipv4.tcp_ecn", "net.ipv4.ip_forward", "net.ipv4.tcp_mtu_probing",
)


# The `machine` of every node that shares this machine's kernel (a namespace here).
LOCAL_MACHINE = "local"

class ExecutorError(HoplabError):
    """A node could not be reached or did not answer: names the node and what failed."""


class NotReached(ExecutorError):
    """No connection to the node was made (refused, no answer, its host key or our keys
    refused): nothing of the command ran there."""


class NotReachedInTime(NotReached, TimeoutError):
    """The connection was still being made when the command's time ran out: a timeout to
    callers that wait, and nothing ran (NotReached)."""


@dataclass(frozen=True)
class Completed:
    """A finished command: its exit status and output, as subprocess gives them."""
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class ProcessId:
    """A process on a node, told apart from a later one with the same PID by its start
    time (clock ticks since the node booted, field 22 of /proc/PID/stat): what a state
    file records, so `hoplab clean` stops that process and never another."""
    node: str
    pid: int
    start_ticks: int


@runtime_checkable
class Process(Protocol):
    """A long-lived process on a node (a tool server or client, perf, a sampler).
    Its stdout and stderr go to local files, so a chatty tool never blocks."""

    name: str
    argv: list[str]
    ident: ProcessId
    out: Path
    err: Path
    started: float          # this machine's Unix time just before it was started

    def poll(self) -> int | None:
        """Its exit status, or None while it runs."""

    def wait(self, timeout: float) -> int:
        """Wait up to timeout s for it to exit; raises TimeoutError."""


@runtime_checkable
class LineChannel(Protocol):
    """A long-lived request/response process: one request line in, a reply out,
    ended by a terminator line. Samplers pace a device with it from this side."""

    def ask(self, line: str, timeout: float) -> list[str]:
        ...

    def close(self) -> None:
        ...


@dataclass
class Facts:
    """What a node is: filled once per lab build, stored in every run's metadata.
    Anything that could not be read is absent from `values` and named in `missing`
    with the reason, never guessed."""
    values: dict[str, Any] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)


@dataclass
class Snapshot:
    """One sample of a node's counters, as text of the files the parsers in
    hoplab.samplers read (hoplab.tools.proc_stat, ifaces.parse_net_dev,
    tcp.tcp_counters, wire.series) plus parsed qdiscs (hoplab.tools.tc). `proc_stat` is
    None on a node that shares this machine's CPUs (a namespace: the host CPU series
    covers it). What a node cannot give is None here and named in `missing` with the
    reason, never zero. `wire` is the counters file of a userspace wire (hoplab-wire's
    JSON) that a node was made with. `extra` carries series only some nodes have:
    (name, unit, key, value), e.g. the sampler's own CPU share on a device. `sockets`
    are the node's established TCP sockets with their tcp_info (the tcp_info sampler
    picks each flow's among them)."""
    proc_stat: str | None = None
    net_dev: str | None = None
    snmp: str | None = None
    netstat: str | None = None
    qdiscs: list[QdiscStats] | None = None
    wire: str | None = None
    sockets: list[Socket] | None = None
    extra: list[tuple[str, str, str | None, float]] = field(default_factory=list)
    missing: dict[str, str] = field(default_factory=dict)


@runtime_checkable
class CounterSource(Protocol):
    """A node's counters, read once per tick by one sampler thread (opened in that
    thread: a namespace source enters the namespace there; a device source keeps one
    long-lived SSH session and asks for one sample per request line, so pacing and
    timestamps are this machine's)."""

    def read(self) -> Snapshot:
        ...

    def close(self) -> None:
        ...


@runtime_checkable
class Executor(Protocol):
    node: str       # the lab node's name
    kind: str       # "netns", "ssh" or "fake": for display only, never for branching
    machine: str    # the kernel its commands share: one perf profiles all nodes of one
                    # machine ("local" for every namespace here, the SSH target of a device)

    def run(self, argv: Sequence[str], *, input: str | None = None,
            timeout: float = 60.0, env: Mapping[str, str] | None = None,
            cwd: str | None = None) -> Completed:
        """Run argv to completion, in directory `cwd` of the node when given (a
        variant's setup script named relative to its experiment file); raises
        ExecutorError when the node cannot be reached and TimeoutError after
        `timeout`, having stopped the command. A command that does not exist is
        exit 127 with "NAME: command not found", as a shell says it."""

    def interact(self, argv: Sequence[str], *, stdin: int, stdout: int, stderr: int,
                 timeout: float | None = None) -> int:
        """Run argv with its input and output streamed from and to these local file
        descriptors as they come (`hoplab lab exec`); its exit status, a signal as
        128 + N as a shell says it. On KeyboardInterrupt the command is stopped on the
        node before the interrupt goes on. No timeout unless given (a person's command)."""

    def start(self, name: str, argv: Sequence[str], *, out: Path, err: Path,
              noted: Callable[[Process], None] | None = None) -> Process:
        """Start a long-lived process; it is tracked until stop() or exit. `noted` is
        called with it once its PID is known and before its tool runs (on a device the
        tool is exec'd only after `noted` returned): a record written there cannot miss
        a process that a SIGKILL of hoplab would leave running."""

    def stop(self, proc: Process, grace: float = 2.0) -> None:
        """SIGTERM, then SIGKILL after `grace` s; a process already gone is no error."""

    def signal(self, proc: Process, signum: int) -> None:
        """Send one signal (perf writes its data on SIGINT)."""

    def stop_recorded(self, ident: ProcessId, grace: float = 2.0) -> None:
        """Stop a process a state file recorded (`hoplab clean` after a crash, when
        no Process object is left): SIGTERM, then SIGKILL, and only while that PID
        still has the recorded start time."""

    def written(self, proc: Process) -> int | None:
        """Bytes proc has written so far (/proc/PID/io wchar), polled every ms to see
        when a flow's data starts to move; None where the node cannot answer that
        cheaply (a device over SSH) or the process is gone: the caller then places
        the flow by its tool's report."""

    def pids(self) -> set[int] | None:
        """PIDs of the processes living in the node (a profile's per-node share);
        None where the node is a whole machine and every PID is its own."""

    def channel(self, argv: Sequence[str], terminator: str) -> LineChannel:
        """Start argv as a request/response process (see LineChannel)."""

    def read_file(self, path: str, timeout: float = 10.0) -> bytes | None:
        """A file's bytes on the node, None when it does not exist."""

    def copy_back(self, remote: str, local: Path, timeout: float = 600.0) -> None:
        """Copy a file from the node to this machine (SCP or cat where there is no SFTP)."""

    def which(self, tools: Sequence[str]) -> dict[str, str | None]:
        """Each tool's path on the node, None where it is missing."""

    def facts(self) -> Facts:
        """Model, firmware, kernel, CPU, drivers and offloads, sysctls, qdiscs,
        tool versions, uptime."""

    def counters(self, kinds: frozenset[str]) -> CounterSource:
        """A counter source for the sampler kinds (ifaces, qdisc, tcp, tcp_info, wire, cpu);
        call it in the thread that will read it."""

    def check_rebooted(self) -> bool:
        """Whether the node's machine rebooted since this executor last looked (its
        uptime went back or its boot id changed): a rebooted device lost what lab up
        set on it, and the run says so. False for a node that shares this machine's
        kernel (a namespace: hoplab would not be running). The first look only
        records what it saw. Raises ExecutorError when the node cannot be reached."""

    def ignore_reboots(self) -> None:
        """No looks for a reboot at its connections: a one-off executor of a node whose
        boot is known, closed after its command."""

    def close(self) -> None:
        """Stop every process still tracked and release connections."""
