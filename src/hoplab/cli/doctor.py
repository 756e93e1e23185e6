"""`hoplab doctor`: what this machine can build, and how each impairment will be made."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from typing import TYPE_CHECKING, Any

from hoplab.cli.lab import QUEUE_UNITS
from hoplab.errors import HoplabError
from hoplab.lab.caps import (
    FEATURE_NAMES,
    QDISC_NAMES,
    TOOL_NAMES,
    TOOL_PACKAGES,
    Capabilities,
    probe,
)
from hoplab.lab.requirements import impairment_mechanisms, install_hint

if TYPE_CHECKING:
    from rich.console import Console

QDISC_USES: dict[str, str] = {
    "netem": "delay / jitter / loss",
    "htb": "rate (default shaper)",
    "tbf": "rate with qdisc = \"tbf\"",
    "pfifo": "qdisc = \"fifo\", queue limit in packets",
    "bfifo": "qdisc = \"fifo\", queue limit in bytes",
    "fq_codel": "qdisc = \"fq_codel\"",
    "cake": "qdisc = \"cake\"",
    "sfq": "qdisc = \"sfq\"",
    "codel": "qdisc = \"codel\"",
    "fq": "qdisc = \"fq\"",
    "prio": "qdisc = \"prio\"",
    "ingress": "ingress filters / policing",
    "clsact": "tc filters on ingress and egress",
}

FEATURE_USES: dict[str, str] = {
    "veth": "every link",
    "bridge": "shared segments",
    "vxlan": "overlay tunnels",
    "tun": "userspace WireGuard (wireguard-go)",
    "wireguard_kernel": "WireGuard links and tunnels (kernel module)",
    "nftables": "node firewall rules",
    "nat": "node nat (masquerade)",
    "conntrack": "stateful rules, NAT",
    "iptables": "iptables rules in node setup commands",
    "perf": "CPU profiles of runs",
}

ESSENTIAL_TOOLS = ("ip", "tc", "iperf3")
ESSENTIAL_FEATURES = ("veth",)
ESSENTIAL_QDISCS = ("htb",)


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("doctor", help="show what this machine can build",
                       description="Probe the kernel and tools and show what labs can use.")
    p.add_argument("lab", nargs="?", metavar="LAB",
                   help="a lab file: also show, per link, the emulator and queue discipline "
                        "each direction gets here")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.add_argument("--refresh", action="store_true",
                   help="probe again instead of using the cached result")
    p.set_defaults(func=run)


def _impairments(caps: Capabilities) -> dict[str, dict[str, Any]]:
    """Per impairment: what a link with emulator = "auto" gets (decided in
    hoplab.lab.requirements, as for a lab's links)."""
    return {key: {"mechanism": mechanism, "note": note}
            for key, (mechanism, note) in impairment_mechanisms(caps).items()}


def _feature_note(name: str, caps: Capabilities) -> str | None:
    """Why a feature is missing, when the cause is a tool rather than the kernel."""
    if caps.has_feature(name):
        return None
    tool = {"nftables": "nft", "nat": "nft", "conntrack": "nft", "perf": "perf"}.get(name)
    if tool is not None and not caps.has_tool(tool):
        return f"{tool} missing — {install_hint(tool)}"
    if name == "iptables" and shutil.which("iptables") is None:
        return "iptables missing — apt-get install --no-install-recommends iptables"
    return None


def _missing_essentials(caps: Capabilities) -> list[str]:
    return ([t for t in ESSENTIAL_TOOLS if not caps.has_tool(t)]
            + [f for f in ESSENTIAL_FEATURES if not caps.has_feature(f)]
            + [q for q in ESSENTIAL_QDISCS if not caps.has_qdisc(q)])


def report(caps: Capabilities) -> dict[str, Any]:
    """The doctor report as plain data; the keys are stable."""
    missing = _missing_essentials(caps)
    return {
        "kernel": caps.kernel,
        "qdiscs": {q: {"available": caps.has_qdisc(q), "used_for": QDISC_USES[q]}
                   for q in QDISC_NAMES},
        "features": {f: {"available": caps.has_feature(f), "used_for": FEATURE_USES[f],
                         "note": _feature_note(f, caps)}
                     for f in FEATURE_NAMES},
        "tools": {t: {"version": caps.tools.get(t), "package": TOOL_PACKAGES[t],
                      "install": None if caps.has_tool(t) else install_hint(t)}
                  for t in TOOL_NAMES},
        "wireguard": caps.wireguard_mode(),
        "impairments": _impairments(caps),
        "essentials": {"ok": not missing, "missing": missing},
        "probe_s": caps.probe_s,
        "vm": vm_ready(),
    }


def _yes(ok: bool) -> str:
    return "[green]yes[/]" if ok else "[red]no[/]"


def _print(rep: dict[str, Any], console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    # Versions, notes and the kernel's name are what the machine's tools printed: shown as
    # they are, never read as rich markup.
    console.print(f"[bold]kernel[/] {escape(rep['kernel'])}  "
                  f"(probe took {rep['probe_s'] * 1000:.0f} ms)")

    for title, key in (("qdisc", "qdiscs"), ("feature", "features")):
        t = Table(title=f"{title}s", title_justify="left")
        t.add_column(title)
        t.add_column("available")
        t.add_column("used for")
        for name, row in rep[key].items():
            note = row.get("note")
            t.add_row(escape(name), _yes(row["available"]) + escape(f" ({note})" if note else ""),
                      escape(row["used_for"]))
        console.print(t)

    t = Table(title="tools", title_justify="left")
    t.add_column("tool")
    t.add_column("version")
    for name, row in rep["tools"].items():
        shown = escape(row["version"]) if row["version"] else \
            f"[red]missing[/] — {escape(row['install'])}"
        t.add_row(escape(name), shown)
    console.print(t)

    wg = {"kernel": "kernel", "userspace": "userspace (wireguard-go)"}.get(rep["wireguard"] or "",
                                                                        "[red]unavailable[/]")
    console.print(f"[bold]WireGuard[/] {wg}")

    t = Table(title="impairments", title_justify="left")
    t.add_column("impairment")
    t.add_column("mechanism")
    labels = {"delay_jitter_loss": "delay / jitter / loss", "rate": "rate",
              "queue_limit": "queue limit", "delay": "delay", "jitter": "jitter",
              "loss": "loss", "loss_burst": "loss_burst (Gilbert-Elliott)",
              "duplicate": "duplicate", "reorder_false": "reorder = false", "trace": "trace",
              "codel": 'rate + qdisc = "codel"', "fq_codel": 'rate + qdisc = "fq_codel"',
              "fq_codel_keys_src": 'fq_codel, keys = "src" (per host)',
              "sfq_perturb": 'rate + qdisc = "sfq", perturb'}
    for key, row in rep["impairments"].items():
        t.add_row(labels[key], escape(row["mechanism"]) if row["mechanism"] else
                  f"[red]{escape(str(row['note']))}[/]")
    console.print(t)

    _print_vm(rep["vm"], console)
    ess = rep["essentials"]
    if ess["ok"]:
        console.print("[green]essentials present[/] (ip, tc, veth, htb, iperf3)")
    else:
        console.print(f"[red]missing essentials:[/] {escape(', '.join(ess['missing']))}")


def vm_ready() -> dict[str, Any]:
    from hoplab.lab.vm.ready import report as vm_report

    return vm_report()


def _print_vm(vm: dict[str, Any], console: Console) -> None:
    from rich.markup import escape

    if not vm["available"]:
        console.print(f"[bold]VMs[/] [red]no[/]: missing {escape('; '.join(vm['missing']))}")
        return
    how = ("accelerator not tried yet (KVM is tried at the first boot)" if vm["accel"] is None
           else f"accelerator {vm['accel']} ({vm['why']})")
    console.print(f"[bold]VMs[/] [green]yes[/], {escape(how)}")


def run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: rich would slow `doctor --help`.
    from rich.console import Console

    console = Console()
    err = Console(stderr=True)
    if os.geteuid() != 0:
        err.print("hoplab doctor needs root: it probes the kernel inside a network namespace. "
                  "Run it as root, e.g. sudo hoplab doctor", markup=False)
        return 2
    try:
        caps = probe(refresh=bool(getattr(args, "refresh", False)))
    except HoplabError as e:
        err.print(f"hoplab doctor: {e}", markup=False)
        return e.exit_code
    rep = report(caps)
    if getattr(args, "lab", None):
        try:
            rep["links"] = _links(args.lab, caps)
        except HoplabError as e:
            err.print(f"hoplab doctor: {e}", markup=False)
            return e.exit_code
    if getattr(args, "json", False):
        print(json.dumps(rep, indent=2))
    else:
        _print(rep, console)
        if "links" in rep:
            _print_links(rep["links"], console)
    return 0 if rep["essentials"]["ok"] else 1


def _links(path: str, caps: Capabilities) -> list[dict[str, Any]]:
    """Per link of a lab file: emulator and disciplines (decided in hoplab.lab.requirements)."""
    from hoplab.lab.requirements import link_disciplines, requirements_problems
    from hoplab.spec.loader import load_lab

    lab = load_lab(path)
    problems = requirements_problems(lab, caps)
    return [{"index": lk.index, "label": lk.label, **link_disciplines(lk, caps),
             "problems": [p for p in problems if p.startswith(lk.label)]} for lk in lab.links]


def _print_links(links: list[dict[str, Any]], console: Console) -> None:
    from rich.markup import escape
    from rich.table import Table

    t = Table(title="links of the lab", title_justify="left", caption=QUEUE_UNITS,
              caption_justify="left")
    for col in ("link", "emulator", "queue a->b", "queue b->a"):
        t.add_column(col)
    for lk in links:
        t.add_row(*map(escape, (lk["label"], lk["emulator"], lk["forward_queue"],
                                lk["reverse_queue"])))
    console.print(t)
    for lk in links:
        for p in lk["problems"]:
            console.print(f"problem: {p}", style="red", markup=False)
