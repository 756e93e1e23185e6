"""Helpers for tests that build real labs in network namespaces: unique lab names,
the CLI as a user runs it, commands inside a node, and checks that nothing a test
made is left behind (namespaces, links, processes). The fixtures that use them are
in tests/lab/conftest.py."""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hoplab.analysis.rfc6349 import payload_rate
from hoplab.lab.build import UpResult
from hoplab.lab.plan import Plan
from hoplab.lab.state import ETC_NETNS, LABS_DIR, find
from hoplab.lab.teardown import teardown
from hoplab.lab.where import netns_prefix
from hoplab.nodes.procs import proc_start_time
from hoplab.record import RunRecord
from hoplab.spec.model import Lab
from hoplab.store import open_store

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
NETNS_DIR = Path("/run/netns")
_CLI = Path(sys.executable).with_name("hoplab")
HOPLAB = [str(_CLI)] if _CLI.exists() else [sys.executable, "-m", "hoplab.cli.main"]
# Lab names handed out in this session; the session check looks for their leftovers.
MADE: set[str] = set()


def missing_requirement() -> str | None:
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


# --- small helpers ---------------------------------------------------------------------


def new_lab_name() -> str:
    name = "t" + secrets.token_hex(4)
    MADE.add(name)
    return name


def hoplab(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """The command line tool, as a user runs it."""
    return subprocess.run([*HOPLAB, *args], capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, check=False)


def one_ok_run(tmp_path: Path, name: str, timeout: float = 600) -> RunRecord:
    """`hoplab run` of tmp_path/exp.toml into tmp_path/runs.db on lab `name`: its one
    run, which must be ok and leave none of the lab's namespaces behind."""
    db = tmp_path / "runs.db"
    proc = hoplab("run", str(tmp_path / "exp.toml"), "--db", str(db), "--json",
                  "--lab-name", name, timeout=timeout)
    assert lab_namespaces(name) == set(), "the run left namespaces behind"
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    assert run["status"] == "ok", run["error"]
    with open_store(str(db)) as store:
        return store.get_run(run["id"])


def run_in(ns: str, *argv: str, timeout: float = 30,
           input: str | None = None) -> subprocess.CompletedProcess[str]:
    """argv inside namespace ns, the way a user would (names resolve via the lab's hosts)."""
    return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True,
                          timeout=timeout, input=input,
                          stdin=None if input is not None else subprocess.DEVNULL, check=False)


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def lab_namespaces(name: str) -> set[str]:
    return {n for n in namespaces() if n.startswith(netns_prefix(name))}


# Names hoplab gives interfaces (veths, per-hop and end-to-end WireGuard).
_HOPLAB_IFNAME = re.compile(r"eth\d+|wg\d+|wg-[a-z0-9]+")


def root_links(all_names: bool = False) -> set[str]:
    """Interface names of the root namespace (`ip -o link`) that hoplab could have
    left there. Other tools on the machine (a Mininet benchmark, say) add and remove
    their own links concurrently; all_names=True returns those too."""
    out = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True,
                         check=True).stdout
    names = {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if line}
    return names if all_names else {n for n in names if _HOPLAB_IFNAME.fullmatch(n)}


def _stat(pid: int) -> tuple[str, str, int] | None:
    """A process's command name, state and parent."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm = raw[raw.index("(") + 1:raw.rindex(")")]
    state, ppid = raw[raw.rindex(")") + 2:].split()[:2]
    return comm, state, int(ppid)


WORKER = "PYTEST_XDIST_WORKER"
# Each worker of a parallel run writes its PID and start time here (tests/helpers/
# workers.py): a worker's own environment lacks WORKER, and some of what its tests start
# cannot show theirs (below).
WORKERS_DIR = Path("/tmp/hoplab-test-workers")


def register_worker(name: str | None, pid: int | None = None) -> None:
    """Note process `pid` (this one by default) as worker `name` of a parallel run, for
    worker_of; None forgets it."""
    pid = os.getpid() if pid is None else pid
    with suppress(OSError):  # worker_of then knows a worker by its environment alone
        if name is None:
            (WORKERS_DIR / str(pid)).unlink()
        else:
            WORKERS_DIR.mkdir(exist_ok=True)
            (WORKERS_DIR / str(pid)).write_text(f"{name} {proc_start_time(pid)}\n")


def _registered(pid: int) -> str | None:
    try:
        name, ticks = (WORKERS_DIR / str(pid)).read_text().split()
    except (OSError, ValueError):
        return None
    return name if str(proc_start_time(pid)) == ticks else None


def worker_of(pid: int) -> str | None:
    """The pytest-xdist worker (gw0, gw1...) whose test started process `pid`: its
    environment names it, as every process a worker's test starts inherits it, or its
    nearest ancestor's does, or the ancestor is the worker itself. The last is how a
    device's processes are told: their SSH session's environment is fresh, and nginx and
    sshd write their process titles over their environment, so none of them shows WORKER
    and the walk reaches the worker that started the device's SSH server. None for a
    process no worker started."""
    while pid > 1:
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            return None
        for var in env.split(b"\0"):
            if var.startswith(WORKER.encode() + b"="):
                return var.split(b"=", 1)[1].decode()
        name = _registered(pid)
        if name is not None:
            return name
        st = _stat(pid)
        if st is None:
            return None
        pid = st[2]
    return None


def live_pids(*comms: str, all_workers: bool = False) -> set[int]:
    """PIDs of running (not zombie) processes with one of these command names; in a
    worker of a parallel run, not those another worker's tests started (theirs to
    check), unless all_workers."""
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None and st[0] in comms and st[1] != "Z":
                out.add(int(entry.name))
    return out if all_workers else this_workers(out)


def this_workers(pids: Iterable[int]) -> set[int]:
    """Of `pids`, those no other worker of a parallel run started (all of them outside
    one): this worker's tests' and nobody's."""
    me = os.environ.get(WORKER)
    return set(pids) if me is None else {p for p in pids if worker_of(p) in (me, None)}


def netns_inode(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def pids_in(nss: set[str]) -> set[int]:
    """Processes (not zombies) living in any of these named namespaces."""
    inodes = set()
    for ns in nss:
        with suppress(OSError):
            inodes.add(os.stat(NETNS_DIR / ns).st_ino)
    out = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and netns_inode(int(entry.name)) in inodes:
            st = _stat(int(entry.name))
            if st is not None and st[1] != "Z":
                out.add(int(entry.name))
    return out


def holding(directory: Path) -> set[int]:
    """Running (not zombie) processes with a file open under `directory`, deleted or
    not: a lab's daemons keep their log in its run directory from their fork on (so
    through `ip netns exec` and every exec after it), which tells them from the daemons
    of other labs, whoever runs those, on this machine."""
    prefix = str(directory).rstrip("/") + "/"
    out = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with suppress(OSError):
            targets = [os.readlink(fd) for fd in (entry / "fd").iterdir()]
            st = _stat(int(entry.name))
            if st is not None and st[1] != "Z" and any(t.startswith(prefix) for t in targets):
                out.add(int(entry.name))
    return out


def foreign_labs() -> set[str]:
    """hoplab namespaces and lab records that are not from this test session: somebody
    else's labs, which `hoplab clean` would remove too."""
    ours = tuple(netns_prefix(name) for name in MADE)
    found = {n for n in namespaces() if n.startswith("hoplab-") and not n.startswith(ours)}
    if LABS_DIR.is_dir():
        found |= {f"record {p.stem}" for p in LABS_DIR.glob("*.json") if p.stem not in MADE}
    return found


def remove_lab(name: str) -> None:
    """Take a lab down whatever state it is in, touching only what carries its name."""
    state = find(name)
    if state is not None:
        with suppress(Exception):
            teardown(state)
    left = lab_namespaces(name)
    for pid in pids_in(left):
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    for ns in left:
        subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
    if ETC_NETNS.is_dir():
        for d in ETC_NETNS.glob(f"{netns_prefix(name)}*"):
            shutil.rmtree(d, ignore_errors=True)
    shutil.rmtree(LABS_DIR / name, ignore_errors=True)
    (LABS_DIR / f"{name}.json").unlink(missing_ok=True)


def link_stats(ns: str, dev: str) -> dict[str, int]:
    """rx/tx bytes and packets of one interface (`ip -s -j link show`)."""
    out = subprocess.run(["ip", "-n", ns, "-s", "-j", "link", "show", dev],
                         capture_output=True, text=True, check=True).stdout
    s = json.loads(out)[0]["stats64"]
    return {"rx_bytes": s["rx"]["bytes"], "tx_bytes": s["tx"]["bytes"],
            "rx_packets": s["rx"]["packets"], "tx_packets": s["tx"]["packets"]}


def wait_listening(ns: str, port: int, server: subprocess.Popen[str],
                   proto: str = "t", timeout: float = 10) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"server in {ns} exited with {server.returncode}")
        got = run_in(ns, "ss", f"-l{proto}nH", f"sport = :{port}", timeout=5).stdout
        if got.strip():
            return
        time.sleep(0.02)
    raise AssertionError(f"nothing listens on port {port} in {ns} after {timeout} s")


def wire_written_since(netns: str, since: float, timeout: float = 10) -> None:
    """Until the wire of namespace `netns` has written its counters at Unix time `since`
    or later (it rewrites its stats file every wire.STATS_INTERVAL_S, with a busy machine
    later): they then count everything that crossed it before `since`."""
    from hoplab.samplers.wire import stats_path

    path = stats_path(netns)
    deadline = time.monotonic() + timeout
    while True:
        with suppress(FileNotFoundError):
            if path.stat().st_mtime >= since:
                return
        assert time.monotonic() < deadline, f"{path}: not written in {timeout:g} s"
        time.sleep(0.01)


def stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def iperf3(server_ns: str, client_ns: str, target: str, *client_args: str,
           seconds: float | None = 3, port: int = 5201) -> dict[str, Any]:
    """One iperf3 test: `iperf3 -s -1` in server_ns, the client (-J) in client_ns.
    seconds=None leaves the end condition to client_args (e.g. "-n", "2M")."""
    server = subprocess.Popen(["ip", "netns", "exec", server_ns, "iperf3", "-s", "-1", "-J",
                               "-p", str(port)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, text=True)
    try:
        wait_listening(server_ns, port, server)
        duration = ["-t", str(seconds)] if seconds is not None else []
        proc = run_in(client_ns, "iperf3", "-c", target, "-p", str(port), *duration,
                      "-J", "--get-server-output", *client_args, timeout=(seconds or 30) + 30)
        try:
            data: dict[str, Any] = json.loads(proc.stdout)
        except ValueError:
            raise AssertionError(f"iperf3 client: {proc.stdout[-500:]} {proc.stderr}") from None
        assert proc.returncode == 0 and "error" not in data, data.get("error", proc.stderr)
        return data
    finally:
        stop(server)


def mbit_received(data: dict[str, Any]) -> float:
    return float(data["end"]["sum_received"]["bits_per_second"]) / 1e6


# A flow measured by steady_mbit: two seconds to become steady, three to measure.
STEADY_SECONDS = 5
# A steady flow's congestion control, chosen by the shaper.
# - A kernel shaper (HTB, TBF), on the sender's egress or a router's: BBR, this machine's
#   default. It paces, so the stack hands the qdisc skbs of a few segments. Cubic's 64 KB
#   GSO skbs leave an HTB in lumps (26 ms each at 20 Mbit/s): the receiver's seconds read
#   18.77 or 19.29 against 19.13, and the median took 19.29 in 5 of 6 runs. Through
#   examples/chain.toml with a busy loop on one core, cubic read 92.37 and 93.78 against
#   94.32 in 2 of 4 runs, BBR 94.15 to 94.49 in 4 of 4.
KERNEL_SHAPER_CC = "bbr"
# - The wire, a shaper in a namespace of its own: cubic. Loss-based, it keeps the wire's
#   queue occupied, so a stall of the hosts shorter than the queue costs no link time.
#   BBR paces at its estimate with a few ms queued: at 50 Mbit/s its steady figure read
#   45.4 to 47.8 against 47.82 (6 of 16 runs over 0.5 % low on a quiet machine); cubic's
#   47.81 to 47.84 in 18 of 18, 10 of them with a busy loop on one core. Cubic is also
#   Linux's default, which AQM (the wire's codel, fq_codel, sfq) is tuned for. A
#   namespace may not make it its default outside tcp_allowed_congestion_control (here
#   reno and bbr), but root may pick it per socket: iperf3 -C.
WIRE_CC = "cubic"


def steady_goodput(server_ns: str, client_ns: str, target: str, *client_args: str,
                   cc: str) -> float:
    """steady_mbit of one STEADY_SECONDS iperf3 flow under congestion control `cc`."""
    return steady_mbit(iperf3(server_ns, client_ns, target, "-C", cc, *client_args,
                              seconds=STEADY_SECONDS))


def steady_mbit(data: dict[str, Any]) -> float:
    """The receiver's goodput once the flow is steady: the median of the receiver's whole
    one-second intervals after the first two. The first carries slow start and the
    shaper's bucket (64 KiB at any rate: +0.5 Mbit/s at 20 Mbit/s); the second, the
    recovery from the loss that ends slow start: a 20 Mbit/s HTB's reverse flow read
    18.73 to 18.76 there in 5 of 5 runs (2 % low), then 19.04 to 19.18 in every later
    second, so a median that took it in could fall to the lower of the two others (19.03
    in a fresh-clone CI run with a busy loop on one core). The last interval is often a
    fraction. A median, because one retransmission timeout in a 3 s run took a whole-run
    figure of a 20 Mbit/s TBF to 16.1 in CI while every other second read 19.06 to 19.21.
    The receiver's seconds, not the sender's: those count what entered the socket, and
    its buffer grows for seconds (a 20 Mbit/s sender read 20.85 against 19.13 received).
    With -R the client is the receiver. Give the flow STEADY_SECONDS."""
    reverse = data["start"]["test_start"].get("reverse", 0)
    receiver = data["intervals"] if reverse else data["server_output_json"]["intervals"]
    intervals = [i["sum"] for i in receiver[2:] if i["sum"]["seconds"] >= 0.95]
    assert len(intervals) >= 3, receiver
    return float(statistics.median(i["bits_per_second"] for i in intervals)) / 1e6


def payload_mbit(rate_mbit: float, ipv6: bool = False) -> float:
    """What TCP carries through a shaper of rate_mbit that counts each frame with its
    Ethernet header (hoplab.analysis.rfc6349.payload_rate): a full segment is 1514 bytes
    for 1448 of payload over IPv4, 1428 over IPv6."""
    return payload_rate(rate_mbit * 1e6, 6 if ipv6 else 4) / 1e6


@dataclass
class UpLab:
    """A lab that is up; unpacks as (lab, plan)."""

    lab: Lab
    plan: Plan
    result: UpResult

    @property
    def name(self) -> str:
        return self.lab.name

    def ns(self, node: str) -> str:
        return self.plan.node(node).netns

    def run(self, node: str, *argv: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
        return run_in(self.ns(node), *argv, timeout=timeout)

    def __iter__(self) -> Iterator[Any]:
        return iter((self.lab, self.plan))


LabUp = Callable[..., UpLab]
