"""A device's settings: changed as the lab file asks (sysctls, offloads, setup
commands), each previous value written to the lab's state record before the new one is
set, and put back at lab down or by `hoplab clean`."""

from __future__ import annotations

from collections.abc import Mapping

from hoplab.errors import LabError
from hoplab.lab.devices.reach import close, ssh_entry
from hoplab.lab.plan import Plan
from hoplab.lab.state import LabState
from hoplab.nodes.executor import Executor, Process
from hoplab.nodes.procs import Proc
from hoplab.nodes.registry import executor_for
from hoplab.spec.model import Lab

# `ethtool -k` prints features by their long names; `ethtool -K` takes the short ones.
FEATURE_NAMES = {
    "gro": "generic-receive-offload", "gso": "generic-segmentation-offload",
    "tso": "tcp-segmentation-offload", "lro": "large-receive-offload",
    "sg": "scatter-gather", "rx": "rx-checksumming", "tx": "tx-checksumming",
    "rxvlan": "rx-vlan-offload", "txvlan": "tx-vlan-offload",
    "ntuple": "ntuple-filters", "rxhash": "receive-hashing",
}

SETUP_TIMEOUT_S = 300.0


def _device_ifaces(plan: Plan, node: str) -> list[str]:
    return [i.name for i in plan.node(node).ifaces if i.kind == "device"]


def parse_ethtool_k(text: str) -> dict[str, bool]:
    """`ethtool -k IFACE`: long feature name -> on."""
    out: dict[str, bool] = {}
    for line in text.splitlines():
        name, sep, rest = line.strip().partition(":")
        words = rest.split()
        if sep and words and words[0] in ("on", "off"):
            out[name] = words[0] == "on"
    return out


def _check(ex: Executor, argv: list[str], what: str, *, input: str | None = None,
           timeout: float = 60.0) -> str:
    done = ex.run(argv, input=input, timeout=timeout)
    if done.returncode != 0:
        tail = " ".join((done.stderr or done.stdout).split())[-300:]
        raise LabError(f"device {ex.node}: {what}: exit {done.returncode}: {tail}")
    return done.stdout


def apply(state: LabState, plan: Plan, executors: Mapping[str, Executor]) -> None:
    """Change what the lab file asks of each device: each previous value is written to
    the state record before the new one is set; setup commands run last."""
    for node in plan.lab.devices():
        ex = executors[node.name]
        rec = state.devices[node.name]
        for key, value in node.sysctls:
            path = "/proc/sys/" + key.replace(".", "/")
            old = ex.read_file(path)
            if old is None:
                raise LabError(f"device {node.name}: sysctl {key} does not exist there")
            rec["sysctls"].append([key, old.decode().strip()])
            state.save()
            _check(ex, ["tee", path], f"sysctl {key} = {value}", input=f"{value}\n")
        wanted = [(i, f, on) for i in _device_ifaces(plan, node.name) for f, on in node.offloads]
        wanted += list(node.iface_offloads)
        current: dict[str, dict[str, bool]] = {}
        for iface, feat, on in wanted:
            if iface not in current:
                current[iface] = parse_ethtool_k(_check(ex, ["ethtool", "-k", iface],
                                                        f"offloads of {iface}"))
            long = FEATURE_NAMES[feat]
            if long not in current[iface]:
                raise LabError(f"device {node.name}: {iface} has no {feat} ({long}) offload")
            rec["offloads"].append([iface, feat, current[iface][long]])
            state.save()
            _check(ex, ["ethtool", "-K", iface, feat, "on" if on else "off"],
                   f"ethtool -K {iface} {feat} {'on' if on else 'off'}")
        rec["setup_started"] = True
        state.save()
        for k, argv in enumerate(node.setup):
            _tracked(state, ex, list(argv), k)


def _tracked(state: LabState, ex: Executor, argv: list[str], k: int) -> None:
    """A setup command, written into the lab's record while it runs: a SIGKILL of hoplab
    leaves it running on the device, and clean stops it there."""
    what = f"setup {' '.join(argv)}"
    logs = state.rundir / "devices"
    logs.mkdir(parents=True, exist_ok=True)
    recs: list[Proc] = []

    def note(p: Process) -> None:
        # Saved before the command runs on the device (it waits for this).
        recs.append(Proc(p.ident.pid, p.ident.start_ticks, argv, ex.node, what))
        state.processes.append(recs[0])
        state.save()

    proc = ex.start(what, argv, out=logs / f"{ex.node}-setup{k}.out",
                    err=logs / f"{ex.node}-setup{k}.err", noted=note)
    rec = recs[0]
    try:
        code = proc.wait(SETUP_TIMEOUT_S)
    except TimeoutError:
        ex.stop(proc)
        raise LabError(f"device {ex.node}: {what} did not finish in {SETUP_TIMEOUT_S:g} s; "
                       f"stopped") from None
    finally:
        state.processes.remove(rec)
        state.save()
    if code != 0:
        said = proc.err.read_text(errors="replace") if proc.err.exists() else ""
        if not said.strip() and proc.out.exists():
            said = proc.out.read_text(errors="replace")
        raise LabError(f"device {ex.node}: {what}: exit {code}: "
                       f"{' '.join(said.split())[-300:]}")


def record_devices(state: LabState, lab: Lab) -> None:
    """Write down, before anything changes, how to reach each device again and which
    teardown commands undo its setup."""
    for node in lab.devices():
        state.devices[node.name] = {**ssh_entry(node, lab), "sysctls": [], "offloads": [],
                                    "teardown": [list(c) for c in node.teardown],
                                    "setup_started": False}
    if lab.devices():
        state.save()


def restore(state: LabState, nodes: Mapping[str, Executor], *,
            run_hooks: bool = True) -> list[str]:
    """Put every device back as the record says: teardown commands (when its setup
    began), then offloads and sysctls, newest first. Uses the executors in `nodes`
    (teardown's, from the summary) or reconnects from the record; never stops half
    way: what could not be done comes back as warnings that say what is left."""
    warnings: list[str] = []
    for node, rec in state.devices.items():
        todo: list[tuple[list[str], str | None, str]] = []
        if run_hooks and rec.get("setup_started"):
            todo += [(list(argv), None, f"teardown {' '.join(argv)}")
                     for argv in rec.get("teardown", [])]
        for iface, feat, on in reversed(rec.get("offloads", [])):
            todo.append((["ethtool", "-K", iface, feat, "on" if on else "off"], None,
                         f"offload {feat} of {iface} back {'on' if on else 'off'}"))
        for key, old in reversed(rec.get("sysctls", [])):
            todo.append((["tee", "/proc/sys/" + key.replace(".", "/")], f"{old}\n",
                         f"sysctl {key} back to {old}"))
        if not todo:
            continue
        own = node not in nodes
        try:
            ex = nodes[node] if not own else executor_for(node, rec)
        except Exception as exc:  # unreachable now: say what is left to do by hand
            warnings.append(f"device {node}: cannot reconnect ({exc}); not done: "
                            + "; ".join(what for _a, _i, what in todo))
            continue
        try:
            for argv, data, what in todo:
                try:
                    done = ex.run(argv, input=data, timeout=120)
                    if done.returncode != 0:
                        warnings.append(f"device {node}: {what}: exit {done.returncode}: "
                                        + " ".join(done.stderr.split())[-200:])
                except Exception as exc:
                    warnings.append(f"device {node}: {what}: {exc}")
        finally:
            if own:
                close([ex])
    return warnings
