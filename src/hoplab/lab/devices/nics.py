"""Host NICs a lab's links attach (cabled to a device): checked free before lab up,
moved into the lab's namespaces with their state written down, given back at lab down."""

from __future__ import annotations

from pathlib import Path

from hoplab.lab.devices.errors import spec_error
from hoplab.lab.plan import Plan
from hoplab.lab.state import LabState, all_states
from hoplab.nodes import netns
from hoplab.nodes.executor import ExecutorError
from hoplab.nodes.registry import in_namespace
from hoplab.spec.model import Lab


def _sysfs(nic: str, name: str) -> str | None:
    try:
        return (Path("/sys/class/net") / nic / name).read_text().strip()
    except OSError:
        return None


def check_nics(lab: Lab) -> None:
    """Each attached NIC exists here and is free: down, or up with no address in use."""
    import subprocess

    for link in lab.links:
        for node, nic in link.attach:
            where = ("links", link.index, "attach", node)
            if _sysfs(nic, "ifindex") is None:
                holder = next((st.name for st in all_states()
                               if any(a.get("nic") == nic for a in st.attached)), None)
                if holder is not None:
                    raise spec_error(lab, where, f"{nic} is attached to lab {holder!r}, which "
                                                 f"is up: hoplab lab down {holder}")
                raise spec_error(lab, where, f"no network interface {nic!r} on this machine "
                                             f"(see ip link)")
            flags = int(_sysfs(nic, "flags") or "0", 16)
            if not flags & 1:  # IFF_UP
                continue
            out = subprocess.run(["ip", "-o", "addr", "show", "dev", nic, "scope", "global"],
                                 capture_output=True, text=True, check=False).stdout
            used = [line.split()[3] for line in out.splitlines() if len(line.split()) > 3]
            if used:
                raise spec_error(lab, where, f"{nic} is up with addresses in use "
                                             f"({', '.join(used)}): it would be taken from "
                                             f"this machine; name a free NIC, or free it "
                                             f"(ip addr flush dev {nic})")


def attach_nics(state: LabState, plan: Plan) -> list[tuple[str, str]]:
    """Record, then return the (NIC, namespace) moves to make; the caller moves them."""
    moves = []
    for link in plan.lab.links:
        for node, nic in link.attach:
            ns = plan.node(node).netns
            state.attached.append({"nic": nic, "netns": ns, "node": node,
                                   "up": bool(int(_sysfs(nic, "flags") or "0", 16) & 1),
                                   "mtu": int(_sysfs(nic, "mtu") or "0")})
            moves.append((nic, ns))
    if moves:
        state.save()
    return moves


def give_back_nics(state: LabState) -> list[str]:
    """Return every attached NIC to this machine, as it was (before its namespace goes:
    a veth would die with it). Goes on past a failure; returns warnings."""
    import subprocess

    warnings = []
    for rec in state.attached:
        nic, ns = str(rec["nic"]), str(rec["netns"])
        if netns.exists(ns):
            failed = _take_back(str(rec.get("node", ns)), ns, nic)
            if failed is not None and _sysfs(nic, "ifindex") is None:
                warnings.append(f"{nic} could not be taken back from {ns}: {failed}")
                continue
        if _sysfs(nic, "ifindex") is None:
            warnings.append(f"{nic} is gone from this machine")
            continue
        lines = [f"addr flush dev {nic}"]
        if rec.get("mtu"):
            lines.append(f"link set {nic} mtu {int(rec['mtu'])}")
        lines.append(f"link set {nic} {'up' if rec.get('up') else 'down'}")
        done = subprocess.run(["ip", "-force", "-batch", "-"], input="\n".join(lines) + "\n",
                              capture_output=True, text=True, check=False)
        if done.returncode != 0:
            warnings.append(f"{nic}: {' '.join(done.stderr.split())}")
    return warnings


def _take_back(node: str, ns: str, nic: str) -> str | None:
    """Move `nic` from namespace `ns` back to this machine's; what went wrong, if it did."""
    try:
        moved = in_namespace(node, ns).run(
            ["ip", "-force", "-batch", "-"], timeout=60,
            input=f"link set {nic} down\naddr flush dev {nic}\nlink set {nic} netns 1\n")
    except (ExecutorError, TimeoutError) as exc:
        return str(exc)    # its namespace went meanwhile
    return " ".join(moved.stderr.split()) if moved.returncode != 0 else None
