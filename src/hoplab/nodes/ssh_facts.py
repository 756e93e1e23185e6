"""What a device is, read over SSH in one command with BusyBox ash alone.

One script prints sections ("@@@ NAME" lines) that `parse_facts` turns into Facts:
model (/tmp/sysinfo/model as OpenWrt writes it, else /proc/device-tree/model),
firmware (/etc/openwrt_release, else /etc/os-release), kernel, CPU, uptime and boot
id, sysctls (hoplab.nodes.executor.SYSCTLS), drivers and offloads (ethtool -i / -k, when
ethtool is installed), qdiscs (tc, when installed) and tool versions. Whatever the
device cannot tell is named in `missing` with the reason and the package to install.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import stat
import subprocess
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from hoplab.nodes.executor import SYSCTLS, Facts
from hoplab.nodes.ssh_quote import SH_WHICH
from hoplab.tool_table import debian, openwrt, version_args
from hoplab.tools.tc import parse_tc_text

if TYPE_CHECKING:
    from hoplab.nodes.executor import Executor

# The tools whose versions a device's facts carry; their version options and packages
# are hoplab.tool_table's.
TOOLS: tuple[str, ...] = ("iperf3", "irtt", "perf", "tc", "ethtool", "ping")

_SCRIPT = r'''s() { echo "@@@ $*"; }
has() { w "$1" >/dev/null; }
s model
if [ -r /tmp/sysinfo/model ]; then cat /tmp/sysinfo/model
elif [ -r /proc/device-tree/model ]; then cat /proc/device-tree/model; fi
s openwrt_release; [ -r /etc/openwrt_release ] && cat /etc/openwrt_release
s os_release
if [ -r /etc/os-release ]; then cat /etc/os-release
elif [ -r /usr/lib/os-release ]; then cat /usr/lib/os-release; fi
s machine; uname -m
s proc; grep -H '' $PROC_FILES 2>/dev/null
s ifaces; for i in /sys/class/net/*; do echo "${i##*/}"; done
if has ethtool; then
  for i in /sys/class/net/*; do
    n=${i##*/}; [ "$n" = lo ] && continue
    s ethtool_i "$n"; ethtool -i "$n" 2>&1
    s ethtool_k "$n"; ethtool -k "$n" 2>&1
  done
fi
has tc && { s tc; tc -s qdisc show 2>&1; }
for t in $TOOLS; do
  n=${t%%:*}
  p=$(w "$n") || continue
  case " $KNOWN " in
    *" $n:$p "*) s tool_here "$n"; echo "$p" ;;
    *) s tool "$n"; "$n" "${t#*:}" 2>&1 </dev/null ;;
  esac
done
s end
'''


# What an SSH session's PATH is on a Debian or OpenWrt machine (and a VM's).
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Versions known here: {tool: {path on the node: its version line}}.
Known = Mapping[str, Mapping[str, str]]


def script_argv(sysctls: tuple[str, ...], known: Known | None = None) -> list[str]:
    """The facts script; a tool the node would run from a path in `known` is named with
    that path instead of run for its version (see versions_here)."""
    tools = " ".join(f"{t}:{version_args(t)[0]}" for t in TOOLS)
    here = " ".join(f"{t}:{path}" for t, paths in (known or {}).items() for path in paths)
    return ["env", f"PROC_FILES={' '.join(proc_files(sysctls))}", f"TOOLS={tools}",
            f"KNOWN={here}", "sh", "-c", SH_WHICH + _SCRIPT]


# What the kernel tells in files under /proc: all of them are read by one `grep -H ''`
# (each line as PATH:LINE). Under TCG each exec in a VM router costs 50 to 100 ms, and a
# cat apiece (with `uname -r` and `-v`) was 14 of them. Not the shell's own `read`:
# dash and BusyBox read a byte at a time, and an integer sysctl answers a read past its
# start with nothing (proc_dointvec). osrelease and version are what uname -r and -v
# print (the UTS namespace's); the machine is only uname's.
_PROC = {"kernel": "/proc/sys/kernel/osrelease", "kernel_build": "/proc/sys/kernel/version",
         "cpuinfo": "/proc/cpuinfo", "uptime": "/proc/uptime",
         "boot_id": "/proc/sys/kernel/random/boot_id"}


def _sysctl_file(key: str) -> str:
    return "/proc/sys/" + key.replace(".", "/")


def proc_files(sysctls: tuple[str, ...]) -> list[str]:
    return [*_PROC.values(), *(_sysctl_file(k) for k in sysctls)]


def _proc(lines: list[str], sysctls: tuple[str, ...]) -> dict[str, list[str]]:
    """grep -H's lines, back into each file's lines, by _PROC's names and `sysctl KEY`."""
    by_path: dict[str, list[str]] = {}
    names = {path: name for name, path in _PROC.items()}
    names |= {_sysctl_file(k): f"sysctl {k}" for k in sysctls}
    for line in lines:
        path, sep, rest = line.partition(":")
        if sep and path in names:
            by_path.setdefault(names[path], []).append(rest)
    return by_path


def _sections(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    cur: list[str] | None = None
    for line in text.split("\n"):
        if line.startswith("@@@ "):
            cur = out.setdefault(line[4:].strip(), [])
        elif cur is not None:
            cur.append(line)
    return {k: [x for x in v if x.strip()] for k, v in out.items()}


# Shell assignments of os-release and openwrt_release (a file format, not user input:
# hoplab.kv is for the latter), and "key: value" lines of ethtool -i.
_ASSIGN = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)=(.*)")
_COLON = re.compile(r"\s*([^:]+?):\s?(.*)")


def _kv(lines: list[str], pattern: re.Pattern[str] = _ASSIGN) -> dict[str, str]:
    out = {}
    for line in lines:
        if m := pattern.fullmatch(line):
            out[m.group(1).strip()] = m.group(2).strip().strip("'\"")
    return out


def _cpu(lines: list[str]) -> tuple[str | None, int]:
    model = None
    count = 0
    for line in lines:
        k, _, v = line.partition(":")
        k = k.strip().lower()
        if k == "processor":
            count += 1
            # ARM's old kernels print "Processor : ARMv7 ..." once, no per-core index.
            if not v.strip().isdigit() and model is None:
                model = v.strip()
                count -= 1
        elif k in ("model name", "cpu model", "hardware") and model is None:
            model = v.strip()
    return model, count


def _offloads(lines: list[str]) -> dict[str, str]:
    out = {}
    for line in lines[1:]:
        k, sep, v = line.strip().partition(":")
        if sep and v.split():
            out[k.strip()] = v.split()[0]
    return out


def parse_facts(text: str, sysctls: tuple[str, ...], known: Known | None = None) -> Facts:
    sec = _sections(text)
    sec.update(_proc(sec.pop("proc", []), sysctls))
    f = Facts()
    if "end" not in sec:
        f.missing["facts"] = "the facts script did not finish"
    _machine(sec, f.values, f.missing)
    _sysctls(sec, sysctls, f.values, f.missing)
    _interfaces(sec, f.values, f.missing)
    _tools(sec, f.values, f.missing, known or {})
    return f


Sections = dict[str, list[str]]


def _machine(sec: Sections, v: dict[str, Any], miss: dict[str, str]) -> None:
    """Model, firmware, kernel, CPU, uptime and boot id."""
    model = " ".join(x.replace("\0", "").strip() for x in sec.get("model", [])).strip()
    if model:
        v["model"] = model
    else:
        miss["model"] = "neither /tmp/sysinfo/model nor /proc/device-tree/model on the device"
    owrt = _kv(sec.get("openwrt_release", []))
    osr = _kv(sec.get("os_release", []))
    if owrt:
        v["firmware"] = owrt.get("DISTRIB_DESCRIPTION") or owrt.get("DISTRIB_RELEASE", "")
        v["firmware_release"] = owrt
    elif osr:
        v["firmware"] = osr.get("PRETTY_NAME") or osr.get("NAME", "")
        v["firmware_release"] = osr
    else:
        miss["firmware"] = "neither /etc/openwrt_release nor /etc/os-release on the device"
    if sec.get("kernel") and sec.get("kernel_build") and sec.get("machine"):
        v["kernel"], v["kernel_build"] = sec["kernel"][0].strip(), sec["kernel_build"][0].strip()
        v["machine"] = sec["machine"][0].strip()
    else:
        miss["kernel"] = "neither /proc/sys/kernel/osrelease nor uname -m answered on the device"
    cpu_model, cpus = _cpu(sec.get("cpuinfo", []))
    if cpu_model:
        v["cpu_model"] = cpu_model
    else:
        miss["cpu_model"] = "/proc/cpuinfo names no model"
    v["cpus"] = max(cpus, 1)
    up = sec.get("uptime", [])
    if up:
        v["uptime_s"] = float(up[0].split()[0])
    if sec.get("boot_id"):
        v["boot_id"] = sec["boot_id"][0].strip()


def _sysctls(sec: Sections, sysctls: tuple[str, ...], v: dict[str, Any],
             miss: dict[str, str]) -> None:
    v["sysctls"] = {k: " ".join(" ".join(sec[f"sysctl {k}"]).split())
                    for k in sysctls if sec.get(f"sysctl {k}")}
    for k in sysctls:
        if not sec.get(f"sysctl {k}"):
            miss[f"sysctl {k}"] = "not in /proc/sys on the device"


def _interfaces(sec: Sections, v: dict[str, Any], miss: dict[str, str]) -> None:
    """Interfaces, their drivers and offloads (ethtool), and qdiscs (tc)."""
    ifaces = [i for i in sec.get("ifaces", []) if i != "lo"]
    v["interfaces"] = ifaces
    if any(k.startswith("ethtool_i ") for k in sec):
        v["drivers"] = {i: _kv(sec.get(f"ethtool_i {i}", []), _COLON) for i in ifaces}
        v["offloads"] = {i: _offloads(sec.get(f"ethtool_k {i}", [])) for i in ifaces}
    else:
        why = "ethtool not installed on the device (OpenWrt package ethtool)"
        miss["drivers"] = miss["offloads"] = why
    if "tc" in sec:
        qd: list[dict[str, Any]] = []
        try:
            qd = [q.__dict__ | {"key": q.key}
                  for q in parse_tc_text("\n".join(sec["tc"]))]
        except ValueError as e:
            miss["qdiscs"] = f"tc output not understood: {e}"
        v["qdiscs"] = qd
    else:
        miss["qdiscs"] = f"tc not installed on the device (OpenWrt package {openwrt('tc')})"


def _tools(sec: Sections, v: dict[str, Any], miss: dict[str, str], known: Known) -> None:
    tools = {}
    for name in TOOLS:
        out = sec.get(f"tool {name}")
        if name in known and (at := sec.get(f"tool_here {name}")):
            line = known[name].get(at[0].strip())
            out = [line] if line else []
        if out:
            first = out[0].strip()
            # BusyBox applets (ping) know no version option: installed, version unknown.
            tools[name] = "installed (no version option)" if re.search(
                r"(invalid|unrecognized|unknown) option", first) else first
        else:
            miss[f"tool {name}"] = (f"not installed (OpenWrt package {openwrt(name)}, "
                                    f"Debian package {debian(name)})")
    v["tools"] = tools


@functools.cache
def _version_line(path: str, tool: str, _stamp: tuple[int, int]) -> str:
    """The first line `path VERSION-OPTION` prints, as the facts script reads it; one
    run per file and process (_stamp: the file's mtime and size)."""
    try:
        done = subprocess.run([path, version_args(tool)[0]], stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, errors="replace", timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (done.stdout.strip().splitlines() or [""])[0].strip()


def _here(path: str, tool: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or not os.access(path, os.X_OK):
        return None
    return _version_line(path, tool, (st.st_mtime_ns, st.st_size))


def versions_here(wrappers: Mapping[str, str]) -> dict[str, dict[str, str]]:
    """For a node whose root file system is this machine's (a VM booting a kernel, its
    root this one's over 9p): each tool's version line by every path its PATH may find
    it at, read here. Under TCG each version the guest ran alone took 0.35 s, perf's
    0.9 s; together they were 1.0 s of a VM router's 3.0 s of facts. `wrappers` are the
    node's own files that run a tool from SYSTEM_PATH ({"/usr/local/bin/perf": "perf"}:
    hoplab's perf wrapper). A file the node changed at one of these paths would be
    misread: a VM's overlay is in memory, and nothing but its setup commands writes
    there."""
    out: dict[str, dict[str, str]] = {}
    for tool in TOOLS:
        paths = {f"{d}/{tool}": v for d in SYSTEM_PATH.split(":")
                 if (v := _here(f"{d}/{tool}", tool)) is not None}
        for at, runs in wrappers.items():
            found = shutil.which(runs, path=SYSTEM_PATH)
            if runs == tool and found and (v := _here(found, tool)) is not None:
                paths[at] = v
        if paths:
            out[tool] = paths
    return out


def collect_facts(ex: Executor, timeout: float = 30.0,
                  known: Known | None = None) -> Facts:
    res = ex.run(script_argv(SYSCTLS, known), timeout=timeout)
    return parse_facts(res.stdout, SYSCTLS, known)
