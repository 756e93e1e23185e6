"""What this machine can build: kernel qdiscs and features, and userspace tools.

`probe()` finds out by really trying, inside a throw-away network namespace,
and caches the answer per kernel and boot. Whether a given lab can be built
with the answer is for `hoplab.lab.requirements`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hoplab.errors import CapabilityError, LabError
from hoplab.nodes.executor import ExecutorError
from hoplab.nodes.registry import in_namespace
from hoplab.tool_table import debian, version_args

if TYPE_CHECKING:
    from hoplab.nodes.netns_exec import NetnsExecutor

QDISC_NAMES = ("netem", "htb", "tbf", "pfifo", "bfifo", "fq_codel", "cake", "sfq", "codel",
               "fq", "prio", "ingress", "clsact")
FEATURE_NAMES = ("veth", "bridge", "vxlan", "tun", "wireguard_kernel", "nftables", "nat",
                 "conntrack", "iptables", "perf")
TOOL_NAMES = ("ip", "tc", "iperf3", "irtt", "fping", "ping", "nft", "ethtool", "wg",
              "wireguard-go", "perf", "nginx", "chromium")

# The Debian package of each tool probed here (hoplab.tool_table has them all).
TOOL_PACKAGES: dict[str, str] = {t: debian(t) for t in TOOL_NAMES}

CACHE_DIR = Path("/run/hoplab")
CACHE_PATH = CACHE_DIR / "caps.json"
_CACHE_SCHEMA = 1
_BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
_EXTRA_PATH = ("/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/local/bin")
_TIMEOUT_S = 10.0

WireguardMode = Literal["kernel", "userspace"]


@dataclass(frozen=True)
class Capabilities:
    kernel: str
    qdiscs: dict[str, bool] = field(default_factory=dict)
    features: dict[str, bool] = field(default_factory=dict)
    tools: dict[str, str | None] = field(default_factory=dict)
    # Wall time the real probe took (kept when the result comes from the cache).
    probe_s: float = field(default=0.0, compare=False)

    def has_qdisc(self, name: str) -> bool:
        return self.qdiscs.get(name, False)

    def has_feature(self, name: str) -> bool:
        return self.features.get(name, False)

    def has_tool(self, name: str) -> bool:
        return self.tools.get(name) is not None

    def wireguard_mode(self) -> WireguardMode | None:
        if self.has_feature("wireguard_kernel"):
            return "kernel"
        if self.has_feature("tun") and self.has_tool("wireguard-go"):
            return "userspace"
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "qdiscs": {k: self.qdiscs.get(k, False) for k in _ordered(QDISC_NAMES, self.qdiscs)},
            "features": {k: self.features.get(k, False)
                         for k in _ordered(FEATURE_NAMES, self.features)},
            "tools": {k: self.tools.get(k) for k in _ordered(TOOL_NAMES, self.tools)},
            "probe_s": self.probe_s,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Capabilities:
        """Inverse of to_json. Raises ValueError on anything malformed."""
        kernel = data.get("kernel")
        if not isinstance(kernel, str):
            raise ValueError("kernel: expected a string")
        probe_s = data.get("probe_s", 0.0)
        if not isinstance(probe_s, int | float) or isinstance(probe_s, bool):
            raise ValueError("probe_s: expected a number")
        return cls(
            kernel=kernel,
            qdiscs=_bool_map(data.get("qdiscs"), "qdiscs"),
            features=_bool_map(data.get("features"), "features"),
            tools=_tool_map(data.get("tools")),
            probe_s=float(probe_s),
        )


def _ordered(known: Sequence[str], present: Iterable[str]) -> list[str]:
    return list(known) + sorted(k for k in present if k not in known)


def _bool_map(value: object, what: str) -> dict[str, bool]:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, bool) for k, v in value.items()):
        raise ValueError(f"{what}: expected an object of booleans")
    return dict(value)


def _tool_map(value: object) -> dict[str, str | None]:
    if not isinstance(value, dict) or not all(
            isinstance(k, str) and (v is None or isinstance(v, str)) for k, v in value.items()):
        raise ValueError("tools: expected an object of strings or nulls")
    return dict(value)


# --------------------------------------------------------------------------- probing


@dataclass(frozen=True)
class _Result:
    rc: int
    out: str
    err: str


def _run(argv: Sequence[str], stdin: str | None = None,
         ex: NetnsExecutor | None = None) -> _Result:
    """argv on this machine, or in the probe namespace through its executor `ex`."""
    if ex is not None:
        return _run_in(ex, argv, stdin)
    try:
        p = subprocess.run(list(argv), input=stdin, capture_output=True, text=True,
                           timeout=_TIMEOUT_S, check=False)
    except FileNotFoundError as e:
        return _Result(127, "", str(e))
    except subprocess.TimeoutExpired:
        return _Result(124, "", f"timed out after {_TIMEOUT_S:g} s")
    return _Result(p.returncode, p.stdout, p.stderr)


def _run_in(ex: NetnsExecutor, argv: Sequence[str], stdin: str | None) -> _Result:
    try:
        done = ex.run(argv, input=stdin, timeout=_TIMEOUT_S)
    except TimeoutError:
        return _Result(124, "", f"timed out after {_TIMEOUT_S:g} s")
    except ExecutorError as e:
        return _Result(1, "", str(e))
    return _Result(done.returncode, done.stdout, done.stderr)


def _which(tool: str) -> str | None:
    path = os.pathsep.join([os.environ.get("PATH", ""), *_EXTRA_PATH])
    return shutil.which(tool, path=path)


_VERSION_RE = re.compile(r"(?<![\w.])v?(\d+(?:\.\d+)+|\d{6,})")


def _parse_version(text: str) -> str:
    for line in text.splitlines():
        m = _VERSION_RE.search(line)
        if m:
            return m.group(1)
    return "unknown"


# Tools whose `--version` starts the whole program: a browser reads some 250 MB on a
# cold start (over 10 s, the probe's timeout, on a freshly set-up CI machine, which then
# recorded Chromium as missing). Their version is the package's when a package owns them.
_PACKAGE_VERSION_FIRST = frozenset({"chromium"})


def _package_version(path: str) -> str | None:
    """The version of the Debian package that installed `path`, without running it."""
    dpkg = _which("dpkg-query")
    if dpkg is None:
        return None
    owner = _run([dpkg, "-S", os.path.realpath(path)])
    package = owner.out.split(":", 1)[0].strip() if owner.rc == 0 else ""
    if not package or "," in package:
        return None
    got = _run([dpkg, "-W", "-f", "${Version}", package])
    return _parse_version(got.out) if got.rc == 0 and got.out.strip() else None


def _tool_version(path: str | None, tool: str) -> str | None:
    """Version of a tool, or None when it is missing or does not run."""
    if path is None:
        return None
    if tool in _PACKAGE_VERSION_FIRST:
        known = _package_version(path)
        if known is not None:
            return known
    r = _run([path, *version_args(tool)])
    if r.rc != 0:
        return None
    return _parse_version(r.out + "\n" + r.err)


def _batch(argv: Sequence[str], lines: Sequence[str], ex: NetnsExecutor) -> list[bool]:
    """Run `ip`/`tc` in -force -batch mode; return success per line.

    Failed lines are reported as "Command failed -:N". If the exit code says
    something failed but no line is named, fall back to one call per line.
    """
    if not lines:
        return []
    r = _run([*argv, "-force", "-batch", "-"], stdin="".join(f"{ln}\n" for ln in lines), ex=ex)
    if r.rc == 0:
        return [True] * len(lines)
    failed = {int(n) for n in re.findall(r"Command failed \S*?:(\d+)", r.err + r.out)}
    if failed and r.rc in (1, 2):
        return [i + 1 not in failed for i in range(len(lines))]
    return [_run([*argv, *ln.split()], ex=ex).rc == 0 for ln in lines]


_LINK_PROBES: dict[str, str] = {
    "bridge": "link add hpbr0 type bridge",
    "vxlan": "link add hpvx0 type vxlan id 42 dstport 4789",
    "wireguard_kernel": "link add hpwg0 type wireguard",
    "tun": "tuntap add mode tun name hptun0",
}

_TBF_ARGS = "rate 1mbit burst 10kb latency 50ms"
_ROOT_QDISCS = ("netem", "htb", "tbf", "pfifo", "bfifo", "fq_codel", "cake", "sfq", "codel",
                "fq", "prio")

_NFT_TABLE = "add table inet hoplab_probe\nlist tables\n"
_NFT_NAT = """table ip hoplab_probe_nat {
  chain postrouting {
    type nat hook postrouting priority 100; policy accept;
    oifname "p0" masquerade
  }
}
"""
_NFT_CT = """table inet hoplab_probe_ct {
  chain forward {
    type filter hook forward priority 0; policy accept;
    ct state established,related accept
  }
}
"""


def _probe_links_and_qdiscs(ip: str, tc: str | None, ex: NetnsExecutor) -> dict[str, bool]:
    """veth, other link kinds and every qdisc, in two batched calls."""
    names = ["veth", *_LINK_PROBES]
    ok = _batch([ip], ["link add p0 type veth peer name p1", *_LINK_PROBES.values()], ex)
    found = dict(zip(names, ok, strict=True))
    if found["tun"] and not os.path.exists("/dev/net/tun"):
        found["tun"] = False
    if tc is None:
        return found | {q: False for q in QDISC_NAMES}
    # Without veth, lo still takes qdiscs; ingress and clsact share a handle,
    # so they go on different devices.
    dev, dev2 = ("p0", "p1") if found["veth"] else ("lo", "lo")
    lines = [f"qdisc replace dev {dev} root {q}" + (f" {_TBF_ARGS}" if q == "tbf" else "")
             for q in _ROOT_QDISCS]
    lines.append(f"qdisc add dev {dev} ingress")
    if dev2 == dev:
        lines.append(f"qdisc del dev {dev} ingress")
    lines.append(f"qdisc add dev {dev2} clsact")
    ok = _batch([tc], lines, ex)
    found |= dict(zip(_ROOT_QDISCS, ok, strict=False))
    found["ingress"] = ok[len(_ROOT_QDISCS)]
    found["clsact"] = ok[-1]
    return found


def _probe_firewall(nft: str | None, iptables: str | None, ex: NetnsExecutor
                    ) -> dict[str, bool]:
    """nftables (table, NAT, conntrack) and iptables, inside the namespace."""
    found = {"nftables": False, "nat": False, "conntrack": False, "iptables": False}
    if nft is not None:
        r = _run([nft, "-f", "-"], stdin=_NFT_TABLE, ex=ex)
        found["nftables"] = r.rc == 0 and "hoplab_probe" in r.out
        if found["nftables"]:
            found["nat"] = _run([nft, "-f", "-"], stdin=_NFT_NAT, ex=ex).rc == 0
            found["conntrack"] = _run([nft, "-f", "-"], stdin=_NFT_CT, ex=ex).rc == 0
    if iptables is not None:
        found["iptables"] = _run([iptables, "-w", "-A", "FORWARD", "-j", "ACCEPT"],
                                 ex=ex).rc == 0
    return found


def _perf_allowed() -> bool:
    if os.geteuid() == 0:
        return True
    try:
        return int(Path("/proc/sys/kernel/perf_event_paranoid").read_text()) <= 1
    except (OSError, ValueError):
        return False


def _probe_fresh() -> Capabilities:
    """Probe for real. Needs root (it creates a network namespace)."""
    if os.geteuid() != 0:
        raise CapabilityError("probing capabilities needs root (it creates a network namespace); "
                              "run as root, e.g. with sudo")
    start = time.perf_counter()
    paths = {t: _which(t) for t in TOOL_NAMES}
    iptables = _which("iptables")
    ip, tc = paths["ip"], paths["tc"]
    ns = f"hoplab-probe-{os.getpid()}"
    found: dict[str, bool] = {}
    with ThreadPoolExecutor(max_workers=len(TOOL_NAMES) + 2) as pool:
        versions = {t: pool.submit(_tool_version, paths[t], t) for t in TOOL_NAMES}
        if ip is not None:
            try:
                _run([ip, "netns", "del", ns])  # a leftover from a recycled pid
                r = _run([ip, "netns", "add", ns])
                if r.rc != 0:
                    raise LabError(f"cannot create the probe namespace {ns}: "
                                   f"ip netns add: {r.err.strip() or f'exit {r.rc}'}")
                probe_ns = in_namespace("probe", ns)
                links = pool.submit(_probe_links_and_qdiscs, ip, tc, probe_ns)
                fw = pool.submit(_probe_firewall, paths["nft"], iptables, probe_ns)
                found = links.result() | fw.result()
            finally:
                _run([ip, "netns", "del", ns])
        tools = {t: f.result() for t, f in versions.items()}
    features = {f: found.get(f, False) for f in FEATURE_NAMES}
    features["perf"] = tools["perf"] is not None and _perf_allowed()
    return Capabilities(
        kernel=os.uname().release,
        qdiscs={q: found.get(q, False) for q in QDISC_NAMES},
        features=features,
        tools=tools,
        probe_s=round(time.perf_counter() - start, 4),
    )


def _cache_key() -> dict[str, Any]:
    """What must not change for a cached probe to hold.

    Kernel and boot decide the kernel side; the tools' paths and mtimes make
    an installed or removed tool show up without --refresh.
    """
    try:
        boot_id = _BOOT_ID.read_text().strip()
    except OSError:
        boot_id = ""
    tools: dict[str, list[Any] | None] = {}
    for t in (*TOOL_NAMES, "iptables"):
        path = _which(t)
        try:
            st = os.stat(path) if path else None
        except OSError:
            st = None
        tools[t] = [path, st.st_mtime_ns, st.st_size] if path and st else None
    return {"schema": _CACHE_SCHEMA, "kernel": os.uname().release, "boot_id": boot_id,
            "tools": tools}


def _read_cache(path: Path, key: Mapping[str, Any]) -> Capabilities | None:
    try:
        data = json.loads(path.read_text())
        if not isinstance(data, dict) or data.get("key") != key:
            return None
        return Capabilities.from_json(data["caps"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_cache(path: Path, key: Mapping[str, Any], caps: Capabilities) -> None:
    try:
        path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}")
        tmp.write_text(json.dumps({"key": key, "caps": caps.to_json()}, indent=2) + "\n")
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache we cannot write only costs time


def probe(refresh: bool = False, cache_path: Path = CACHE_PATH) -> Capabilities:
    """This machine's capabilities, from the cache when kernel, boot and tools match."""
    key = _cache_key()
    if not refresh:
        cached = _read_cache(cache_path, key)
        if cached is not None:
            return cached
    caps = _probe_fresh()
    _write_cache(cache_path, key, caps)
    return caps
