"""`hoplab lab up|status|exec|down`."""

from __future__ import annotations

import argparse
import json
import os
import sys

from hoplab.errors import UsageError
from hoplab.spec.names import given, lab_name, node_name

# Not typing.TYPE_CHECKING: importing typing (3 ms) is a tenth of what `lab exec`
# costs; mypy treats a name TYPE_CHECKING as true whatever defines it.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

# What a queue's packets are, said under every table of queues (lab status, doctor).
QUEUE_UNITS = ("queue packets: the kernel's qdiscs (emulator tc or netem) count a GSO "
               "super-frame of up to 64 KiB as one packet; hoplab-wire (wire) counts "
               "wire-size frames (docs/lab-format.md)")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("lab", help="build, inspect and remove labs")
    lsub = p.add_subparsers(dest="lab_command", metavar="ACTION", required=True)

    up = lsub.add_parser("up", help="build the lab described by a TOML file")
    up.add_argument("file")
    up.add_argument("--name", help="lab name (default: the file's name key)")
    up.add_argument("--json", action="store_true", help="machine-readable output")
    up.add_argument("--accept-new-host-keys", action="store_true",
                    help="trust a device's SSH host key the first time it is seen (it is "
                         "then pinned in known_hosts); a changed key is still refused")
    up.set_defaults(func=run_up, needs_root=True)

    st = lsub.add_parser("status", help="labs that are up, their nodes and links")
    st.add_argument("--json", action="store_true")
    st.set_defaults(func=run_status, needs_root=True)

    ex = lsub.add_parser("exec", help="run a command inside a node")
    ex.add_argument("lab")
    ex.add_argument("node")
    ex.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD [ARG...]")
    ex.set_defaults(func=run_exec, needs_root=True)

    dn = lsub.add_parser("down", help="take a lab down")
    dn.add_argument("lab")
    dn.set_defaults(func=run_down, needs_root=True)

    fe = lsub.add_parser("fetch", help="fetch and build what the labs' VMs boot, ahead of "
                                       "lab up",
                         description="For every VM that boots a kernel in these lab or "
                                     "experiment files (every variant of a matrix): fetch "
                                     "and unpack the kernel (debian:RELEASE), build its "
                                     "initramfs, and find which accelerator boots a guest "
                                     "here (KVM is tried once). The first lab up would do "
                                     "the same; done ahead, it starts at once.")
    fe.add_argument("files", nargs="+", metavar="FILE", help="lab or experiment files")
    fe.set_defaults(func=run_fetch, needs_root=True)


def run_fetch(args: argparse.Namespace) -> int:
    import hoplab.kinds  # noqa: F401  (the registry's built-in kinds, for experiments)
    from hoplab.lab.vm import fetch
    from hoplab.spec.check import check_file

    checked = [check_file(path) for path in args.files]
    problems = [str(p) for c in checked for p in c.problems]
    if problems:
        print("\n".join(problems), file=sys.stderr)
        return 2
    wanted = fetch.kernels(lab for c in checked for lab in c.labs())
    if not wanted:
        print("no VM in these files boots a kernel: nothing to fetch (a firmware image "
              "boots as it is)")
        return 0
    first = None
    for spec, modules in wanted:
        got, k = fetch.fetch(spec, modules)
        first = first or k
        how = "in the cache" if got.was_cached else "fetched and unpacked"
        print(f"kernel {spec}: release {got.release}, {how}; ready in {got.took_s:.1f} s")
    assert first is not None
    chosen, why = fetch.accelerator(first)
    print(f"accelerator {chosen} ({why})")
    return 0


def _addr_cell(addrs: list[str]) -> str:
    return "\n".join(addrs)


def run_up(args: argparse.Namespace) -> int:
    if args.name is not None:
        given(lab_name, args.name, "lab up --name")
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from hoplab.lab import build
    from hoplab.nodes.registry import kind_of
    from hoplab.spec import load_lab

    lab = load_lab(args.file, name=args.name)
    if args.accept_new_host_keys:
        import dataclasses

        lab = dataclasses.replace(lab, accept_new_host_keys=True)
    console = Console(stderr=args.json)
    # Names come from the lab file and progress from the devices: shown as they are,
    # never read as rich markup.
    with console.status(escape(f"building lab {lab.name}")) as spinner:
        result = build.up(lab, progress=lambda s: spinner.update(
            escape(f"building lab {lab.name}: {s}")))
    summary = result.state.summary
    for w in result.warnings:
        print(f"warning: {w}", file=sys.stderr)
    if args.json:
        print(json.dumps({"name": lab.name, "seconds": round(result.seconds, 4),
                          "steps": result.steps, **summary}, indent=1))
        return 0
    if len(summary["nodes"]) <= 60:
        table = Table(title=escape(f"lab {lab.name}"))
        table.add_column("node")
        table.add_column("role")
        table.add_column("interface")
        table.add_column("peer")
        table.add_column("addresses")
        for name, info in summary["nodes"].items():
            role = "router" if info["forward"] else "host"
            # Where a node that is not a namespace of this machine is (a device's SSH).
            role = kind_of(name, info).describe(info) or role
            if info["nat"]:
                role += f", NAT out {info['nat']}"
            for k, iface in enumerate(info["interfaces"]):
                table.add_row(*map(escape, (name if k == 0 else "", role if k == 0 else "",
                                            iface["name"], iface["peer"],
                                            _addr_cell(iface["addresses"]))))
        console.print(table)
    console.print(f"lab [bold]{escape(lab.name)}[/] is up: {len(summary['nodes'])} nodes, "
                  f"{len(summary['links'])} links, built in {result.seconds:.2f} s")
    console.print(f"try: hoplab lab exec {lab.name} NODE -- ping -c1 OTHER; "
                  f"hoplab lab down {lab.name}", markup=False)
    return 0


def _fmt_rate(d: dict[str, Any]) -> str:
    parts = []
    if "rate_bps" in d:
        parts.append(f"{d['rate_bps'] / 1e6:g}Mbit")
    if "delay_s" in d:
        parts.append(f"{d['delay_s'] * 1e3:g}ms")
    if "loss_pct" in d:
        parts.append(f"{d['loss_pct']:g}% loss")
    return " ".join(parts) or "-"


def run_status(args: argparse.Namespace) -> int:
    from hoplab.lab.status import status_all

    labs = status_all()
    if args.json:
        print(json.dumps(labs, indent=1))
        return 0
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    # What the state files and the devices say is shown as it is, never read as markup.
    console = Console()
    if not labs:
        console.print("no labs are up")
        return 0
    for lab in labs:
        console.print(f"[bold]{escape(lab['name'])}[/] "
                      + escape(f"({lab['status']}) from {lab['source']}: "
                               f"{len(lab['nodes'])} nodes, {len(lab['links'])} links, "
                               f"{len(lab['processes'])} processes"))
        table = Table(caption=QUEUE_UNITS, caption_justify="left")
        for col in ("link", "between", "a->b", "b->a", "emulator", "queue a->b", "queue b->a",
                    "state"):
            table.add_column(col)
        nodes = lab["nodes"]
        for link in lab["links"][:200]:
            a, b = link["between"]
            states = []
            for n in (a, b):
                for iface in nodes[n]["interfaces"]:
                    if iface["link"] == link["index"] and iface["kind"] == "veth":
                        states.append(nodes[n]["link_state"].get(iface["name"], "missing"))
            state = "up" if all(s == "up" for s in states) else "/".join(states)
            if "wire" in link:
                state = f"{state} (wire)" if link["wire"]["running"] else "down (wire stopped)"
            wg = " (wireguard)" if link["wireguard"] else ""
            table.add_row(*map(escape, (
                str(link["index"]), f"{a} <-> {b}{wg}", _fmt_rate(link["forward"]),
                _fmt_rate(link["reverse"]), str(link.get("emulator", "-")),
                str(link.get("forward_queue", "-")), str(link.get("reverse_queue", "-")),
                state)))
        console.print(table)
        for problem in lab["problems"]:
            console.print(f"[red]problem:[/] {escape(problem)}")
    return 0


def run_exec(args: argparse.Namespace) -> int:
    # `lab exec` is typed many times a session and should cost hardly more than the
    # `ip netns exec` it becomes: it reads the node's namespace with hoplab.lab.where
    # (os and json only), not with the full record (hoplab.lab.state).
    from hoplab.lab import where

    cmd = list(args.cmd)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise UsageError("lab exec: give a command after --")
    given(lab_name, args.lab, "lab exec LAB")
    given(node_name, args.node, "lab exec LAB NODE")
    spaces = where.node_namespaces(args.lab)
    if spaces is None:
        raise UsageError(f"no lab named {args.lab!r} is up (see hoplab lab status)")
    if args.node not in spaces:
        raise UsageError(f"lab {args.lab} has no node {args.node!r} (nodes: {', '.join(spaces)})")
    ns = spaces[args.node]
    if ns is None:  # no namespace here (a device): through the node's executor
        return _exec_device(args.lab, args.node, cmd)
    if not where.netns_exists(ns):
        raise UsageError(f"node {args.node} of lab {args.lab} is gone; run hoplab clean")
    sys.stdout.flush()
    env = dict(os.environ, HOPLAB_LAB=args.lab, HOPLAB_NODE=args.node)
    argv = where.exec_argv(ns, cmd)
    os.execvpe(argv[0], argv, env)


def _exec_device(lab: str, node: str, cmd: list[str]) -> int:
    """The command on a device through its SSH executor, as recorded at lab up (its host
    key checked against the same known_hosts): argv quoted once, its input and output
    streamed, its exit status ours."""
    from hoplab.lab import where
    from hoplab.nodes.registry import executor_for

    ex = executor_for(node, where.node_entry(lab, node))
    try:
        sys.stdout.flush()
        return ex.interact(cmd, stdin=sys.stdin.fileno(), stdout=sys.stdout.fileno(),
                           stderr=sys.stderr.fileno())
    except KeyboardInterrupt:
        return 130     # stopped on the device by interact()
    finally:
        ex.close()


def run_down(args: argparse.Namespace) -> int:
    from hoplab.lab import build

    given(lab_name, args.lab, "lab down NAME")
    warnings = build.down(args.lab)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"lab {args.lab} is down")
    return 0
