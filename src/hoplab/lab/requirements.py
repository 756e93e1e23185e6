"""Whether a lab can be built on this machine, and with what.

`requirements_problems()` compares a lab with the machine's capabilities (see
`hoplab.lab.caps`) and says, in words, everything that stands in the way;
`impairment_backend()` says how each link's impairments will be made, and
`impairment_mechanisms()` says it per impairment for `hoplab doctor`.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from hoplab.lab import wire
from hoplab.lab.caps import TOOL_PACKAGES, Capabilities
from hoplab.spec.locate import Locator
from hoplab.spec.model import Direction, Lab, Link, QueueLimit

# The userspace link emulator (hoplab-wire, see hoplab.lab.wire) exists; whether
# its binary is built is checked per lab (`make setup` builds it).
WIRE_EMULATOR_AVAILABLE = True
# The disciplines the wire's rate limiter has (htb, tbf and netem name only a
# shaper or an emulator, whose queue is a fifo).
_WIRE_QDISCS = (None, "fifo", "htb", "tbf", "netem", "codel", "fq_codel", "sfq")
# Those that queue in front of a rate: on the wire they need one.
WIRE_AQM = ("codel", "fq_codel", "sfq")

_QDISC_MODULE = {"pfifo": "sch_fifo", "bfifo": "sch_fifo"}


def _module(qdisc: str) -> str:
    return _QDISC_MODULE.get(qdisc, f"sch_{qdisc}")


def install_hint(tool: str) -> str:
    return f"apt-get install --no-install-recommends {TOOL_PACKAGES.get(tool, tool)}"


def _wire_only(d: Direction) -> str | None:
    """An option only the wire has, by name: flow keys from a tunnel's inner headers
    (tc's flow classifier has none; they were a patch that never merged) and
    fq_codel's host buckets (tc needs an HTB class per bucket for that)."""
    opts = dict(d.qdisc_options)
    if "tunnel-" in str(opts.get("keys", "")) + str(opts.get("hosts", "")):
        return "keys with tunnel-... keys"
    return "hosts" if "hosts" in opts else None


def impairment_backend(link: Link, caps: Capabilities) -> str:
    """How a link's impairments will be built: "netem", "tc", "none" or "wire".

    "netem": delay/jitter/loss with the netem qdisc (plus tc for rate);
    "tc": only rate/queue/qdisc, no netem needed; "none": a plain link;
    "wire": the userspace link emulator.
    """
    if link.emulator == "wire":
        return "wire"
    directions = (link.forward, link.reverse)
    if link.emulator == "auto" and any(d.needs_wire() for d in directions):
        return "wire"
    if link.emulator == "auto" and WIRE_EMULATOR_AVAILABLE and any(
            (d.qdisc in WIRE_AQM and not caps.has_qdisc(d.qdisc) and d.rate_bps is not None)
            or _wire_only(d) for d in directions):
        # The kernel's qdisc when it has it; the wire's otherwise.
        return "wire"
    if any(d.needs_netem() for d in directions):
        if (link.emulator == "auto" and not caps.has_qdisc("netem")
                and WIRE_EMULATOR_AVAILABLE):
            return "wire"
        return "netem"
    if any(not d.is_plain() for d in directions):
        return "tc"
    return "none"


def _fifo_kinds(d: Direction) -> tuple[str, ...]:
    if d.queue is not None and d.queue.bytes is not None:
        return ("bfifo",)
    if d.queue is not None and d.queue.packets is not None:
        return ("pfifo",)
    return ("pfifo", "bfifo")


def _direction_problems(label: str, d: Direction, caps: Capabilities) -> list[str]:
    out: list[str] = []
    if d.qdisc is not None:
        kinds = _fifo_kinds(d) if d.qdisc == "fifo" else (d.qdisc,)
        if not any(caps.has_qdisc(k) for k in kinds):
            names = " or ".join(kinds)
            wire_too = ("; the userspace wire has it in front of a rate: add e.g. "
                        'rate = "20mbit"' if d.qdisc in WIRE_AQM else "" if d.qdisc in _WIRE_QDISCS
                        else "; the userspace wire has fifo, codel, fq_codel and sfq")
            out.append(f"{label}: qdisc = \"{d.qdisc}\" needs the {names} qdisc "
                       f"({_module(kinds[0])}), which this kernel lacks{wire_too}")
    if d.rate_bps is not None:
        shaper = "tbf" if d.qdisc == "tbf" else "htb"
        if d.qdisc != shaper and not caps.has_qdisc(shaper):
            out.append(f"{label}: rate limiting needs the {shaper} qdisc ({_module(shaper)}), "
                       "which this kernel lacks")
    return out


def _link_problems(link: Link, caps: Capabilities) -> list[str]:
    label = link.label
    out: list[str] = []
    backend = impairment_backend(link, caps)
    if backend == "wire":
        if wire.binary() is None:
            out.append(f"{label}: the userspace wire emulator is needed but {wire.BINARY} is not "
                       "built (make setup builds it; or set HOPLAB_WIRE to its path)")
        for name, d in (("forward", link.forward), ("reverse", link.reverse)):
            if d.qdisc not in _WIRE_QDISCS:
                kernel = ("" if caps.has_qdisc(d.qdisc or "") else
                          f" and this kernel lacks it ({_module(d.qdisc or '')})")
                out.append(f"{label}: {name}: qdisc = \"{d.qdisc}\" cannot be built on the "
                           f"userspace wire, which has fifo, codel, fq_codel and sfq{kernel}")
            elif d.qdisc in WIRE_AQM and d.rate_bps is None and d.pps is None:
                out.append(f"{label}: {name}: qdisc = \"{d.qdisc}\" on the userspace wire "
                           "needs a rate on the same direction (the queue builds in front of "
                           'the bottleneck); add e.g. rate = "20mbit"')
        return out + ([] if not link.wireguard
                      else _wireguard_problems(f"{label}: wireguard = true", caps))
    if backend == "netem":
        for name, d in (("forward", link.forward), ("reverse", link.reverse)):
            if d.needs_wire():
                what = ("trace" if d.trace is not None else "pps" if d.pps is not None
                        else "reorder = false")
                out.append(f"{label}: {name}: {what} needs the userspace wire, but "
                           "emulator = \"netem\"; netem has no traces, no frame-rate ceiling and "
                           "always reorders "
                           "with jitter (use emulator = \"wire\" or \"auto\")")
    if backend != "wire":
        for name, d in (("forward", link.forward), ("reverse", link.reverse)):
            only = _wire_only(d)
            if only:
                out.append(f"{label}: {name}: qdisc_options.{only} needs the userspace wire "
                           f'(tc has no such option), but emulator = "{link.emulator}"')
    if backend == "netem" and not caps.has_qdisc("netem"):
        if link.emulator == "netem":
            out.append(f"{label}: emulator = \"netem\": delay/jitter/loss need the netem "
                       "qdisc (sch_netem), which this kernel lacks")
        else:
            out.append(f"{label}: delay/jitter/loss need the netem qdisc (sch_netem), which "
                       "this kernel lacks")
    for d in (link.forward, link.reverse):
        out.extend(_direction_problems(label, d, caps))
    if link.wireguard:
        out.extend(_wireguard_problems(f"{label}: wireguard = true", caps))
    return out


def _wireguard_problems(what: str, caps: Capabilities) -> list[str]:
    if caps.wireguard_mode() is not None:
        return []
    if caps.has_feature("tun"):
        why = ("the kernel has no wireguard module and wireguard-go is missing "
               f"({install_hint('wireguard-go')})")
    elif caps.has_tool("wireguard-go"):
        why = "the kernel has no wireguard module and /dev/net/tun is not usable for wireguard-go"
    else:
        why = ("the kernel has no wireguard module, /dev/net/tun is not usable and "
               "wireguard-go is missing")
    return [f"{what} needs WireGuard: {why}"]


def _node_problems(lab: Lab, caps: Capabilities) -> list[str]:
    out: list[str] = []
    for node in lab.nodes:
        if not node.node_kind.local:
            continue  # its tools are its machine's, checked there (hoplab.lab.devices)
        label = f"node {node.name}"
        if node.nat is not None and not caps.has_feature("nat"):
            if not caps.has_tool("nft"):
                why = f"the nft tool is missing ({install_hint('nft')})"
            else:
                why = "this kernel cannot create an nftables nat table with masquerade (nft_nat)"
            out.append(f"{label}: nat needs nftables NAT: {why}")
        if node.offloads and not caps.has_tool("ethtool"):
            out.append(f"{label}: offloads need ethtool, which is missing "
                       f"({install_hint('ethtool')})")
    return out


def _base_problems(caps: Capabilities) -> list[str]:
    out = [f"every lab needs the {t} tool, which is missing ({install_hint(t)})"
           for t in ("ip", "tc") if not caps.has_tool(t)]
    if not caps.has_feature("veth"):
        out.append("every lab needs veth pairs, which this kernel lacks (veth module)")
    return out


class _QdiscWhere:
    """Where a link's qdisc keys were written, to point a problem with one at its line."""

    def __init__(self, source: str) -> None:
        self.source = source
        self._locator: Locator | None = None

    def _lines(self) -> dict[tuple[str | int, ...], int]:
        if self._locator is None:
            try:
                text = Path(self.source).read_text()
            except (OSError, ValueError):
                text = ""
            self._locator = Locator(text)
        return self._locator.lines

    def add(self, link: Link, problem: str) -> str:
        if "qdisc" not in problem or not self.source.endswith(".toml"):
            return problem
        # Explicit [[links]] entries are numbered as the file lists them (generated
        # links come after them and have no line of their own).
        dirs = [d for d in ("forward", "reverse") if f": {d}:" in problem] or ["forward",
                                                                                "reverse"]
        key = "qdisc_options" if "qdisc_options" in problem else "qdisc"
        candidates: list[tuple[str | int, ...]] = [("links", link.index, d, key) for d in dirs]
        candidates += [("links", link.index, key), ("link_defaults", key)]
        for path in candidates:
            line = self._lines().get(path)
            if line is not None:
                name = ".".join(str(p) for p in path).replace(f".{link.index}.",
                                                               f"[{link.index}].")
                return f"{problem} ({self.source}:{line}: {name})"
        return problem


def guest_ends(lab: Lab, link: Link) -> tuple[str, ...]:
    """The ends of `link` that are VMs (their NICs are configured in the guest)."""
    return tuple(n for n in (link.a, link.b) if lab.node(n).node_kind.links == "guest")


def for_host(lab: Lab, link: Link) -> Link:
    """What this machine builds of `link`: a direction a VM sends is shaped by the
    guest's own kernel (hoplab.lab.vm.guest), so it is plain here; a link to a VM never
    gets the userspace wire (the VM's queue is its kernel's, as on a real router)."""
    guests = guest_ends(lab, link)
    if not guests:
        return link
    return replace(link, forward=Direction() if link.a in guests else link.forward,
                   reverse=Direction() if link.b in guests else link.reverse,
                   emulator="netem" if link.emulator == "auto" else link.emulator)


def requirements_problems(lab: Lab, caps: Capabilities) -> list[str]:
    """Every reason `lab` cannot be built with `caps`, one sentence each; [] if it can."""
    problems = _base_problems(caps)
    where = _QdiscWhere(lab.source)
    for link in lab.links:
        host = for_host(lab, link)
        if host is not link and host.emulator == "wire":
            problems.append(f"{link.label}: emulator = \"wire\": a link to a VM is shaped by "
                            f"its own kernel's tc, never by the userspace wire")
            continue
        problems.extend(where.add(link, p) for p in _link_problems(host, caps))
    for i, t in enumerate(lab.tunnels):
        problems.extend(_wireguard_problems(f"tunnels[{i}] ({t.name}: {t.a} <-> {t.b})", caps))
    problems.extend(_node_problems(lab, caps))
    return list(dict.fromkeys(problems))  # drop repeats, keep order


# One link with one impairment on one direction, for each impairment `hoplab doctor`
# lists: the doctor asks the same questions a lab's link is asked, so it never
# describes a mechanism other than the one a lab would get.
IMPAIRMENT_SAMPLES: dict[str, Direction] = {
    "delay_jitter_loss": Direction(delay_s=0.01, jitter_s=0.001, loss_pct=1.0),
    "rate": Direction(rate_bps=10_000_000),
    "queue_limit": Direction(queue=QueueLimit(packets=100)),
    "delay": Direction(delay_s=0.01),
    "jitter": Direction(delay_s=0.01, jitter_s=0.001),
    "loss": Direction(loss_pct=1.0),
    "loss_burst": Direction(loss_pct=1.0, loss_burst=3.0),
    "duplicate": Direction(duplicate_pct=1.0),
    "reorder_false": Direction(delay_s=0.01, jitter_s=0.001, reorder=False),
    "trace": Direction(trace="trace.txt"),
    "codel": Direction(rate_bps=10_000_000, qdisc="codel"),
    "fq_codel": Direction(rate_bps=10_000_000, qdisc="fq_codel"),
    "fq_codel_keys_src": Direction(rate_bps=10_000_000, qdisc="fq_codel",
                                   qdisc_options=(("keys", "src"),)),
    "sfq_perturb": Direction(rate_bps=10_000_000, qdisc="sfq", qdisc_options=(("perturb", 5.0),)),
}


def impairment_mechanism(d: Direction, caps: Capabilities) -> tuple[str | None, str | None]:
    """(mechanism, None) for a link with emulator = "auto" and `d` on one direction, or
    (None, why not) when this machine cannot build it."""
    link = Link(index=0, a="a", b="b", forward=d)
    problems = _link_problems(link, caps)
    if problems:
        return None, "unavailable: " + problems[0].removeprefix(f"{link.label}: ")
    backend = impairment_backend(link, caps)
    if backend != "tc":
        return (f"wire ({d.qdisc})" if backend == "wire" and d.qdisc in WIRE_AQM
                else backend), None
    if d.rate_bps is not None:
        shaper = "tbf" if d.qdisc == "tbf" else "htb"
        return (f"{shaper} + {d.qdisc}" if d.qdisc in WIRE_AQM else shaper), None
    if d.qdisc in (None, "fifo"):
        return "/".join(_fifo_kinds(d)), None
    return d.qdisc, None


def _option_text(name: str, v: str | int | float | bool) -> str:
    if isinstance(v, bool):
        return "on" if v else "off"
    if name in ("target", "interval", "perturb", "ce_threshold"):
        return f"{float(v) * 1000:g}ms" if float(v) < 1 else f"{float(v):g}s"
    return str(v)


def discipline(d: Direction) -> str:
    """One direction's queue discipline as `lab status` and `doctor` show it: the
    qdisc with its options (tc's names), or the fifo and its bound."""
    if d.qdisc in WIRE_AQM or d.qdisc in ("cake", "fq", "prio"):
        opts = " ".join(f"{k} {_option_text(k, v)}" for k, v in d.qdisc_options)
        return f"{d.qdisc} {opts}".strip()
    if d.rate_bps is None and d.qdisc is None and d.queue is None:
        return "-"
    q = d.queue
    bound = (f"{q.bytes} bytes" if q is not None and q.bytes is not None
             else f"{q.packets if q is not None and q.packets else 1000} packets")
    return f"fifo {bound}"


def link_disciplines(link: Link, caps: Capabilities) -> dict[str, str]:
    """Which emulator carries a link and each direction's discipline."""
    return {"emulator": impairment_backend(link, caps),
            "forward_queue": discipline(link.forward), "reverse_queue": discipline(link.reverse)}


def impairment_mechanisms(caps: Capabilities) -> dict[str, tuple[str | None, str | None]]:
    return {key: impairment_mechanism(d, caps) for key, d in IMPAIRMENT_SAMPLES.items()}
