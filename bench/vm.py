"""VM nodes' costs (docs/vm.md): the first fetch of a Debian kernel and the first
initramfs, boot to SSH-ready of one VM router (1 and 2 vCPUs), `lab up` of a chain of
four VM routers, and what one VM router forwards unshaped (TCP, iperf3 h1 -> h2,
cubic) with 1 and 2 vCPUs.

Run as root: .venv/bin/python bench/vm.py [--fetch] [--reps 3] [--seconds 10]
--fetch measures the first fetch into an empty cache of its own (downloads ~100 MB).
--firmware N: only N `lab up`s of a router booted from a firmware's disk image.
--perf N: only N perf recordings of 0.5 s in a VM router (2 vCPUs) as a profile makes
them (build IDs off, the guest's modules tree hidden from perf: hoplab.lab.vm.guest),
each from perf's start to its data written, then its perf script; and the anchor, the
guest's own /usr/bin/perf with build IDs, as profiles ran it before, in the same lab.
--commands N: only N runs of the facts script in a VM router (2 vCPUs), hoplab's (/proc
read by one grep) and the anchor's (a cat per file), and N clock offset estimates, from
bash's $EPOCHREALTIME and (the anchor) date +%s.%N, alternated.
--boots N: only N boots of a lone VM (2 vCPUs, no lab links) to its SSH banner, with
where the time went from its console: the kernel to /init, the initramfs's modules,
the guest set up (ready), each as the guest's uptime; then N starts of it resumed from
its snapshot (hoplab.lab.vm.snapshot); then --reps `lab up`s of four VM routers each
way, alternating: booted (the anchor, HOPLAB_VM_SNAPSHOTS=0) and resumed.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from hoplab.lab import build
from hoplab.lab.vm import guest, initramfs, kernel, qemu, resume, snapshot
from hoplab.nodes import clock, ssh_facts
from hoplab.nodes.executor import SYSCTLS, Executor
from hoplab.nodes.registry import executors
from hoplab.spec import load_lab

KERNEL = "debian:6.12.100+deb12-amd64"


def _router(name: str, vcpus: int) -> str:
    return (f"[nodes.{name}]\nvm = {{ kernel = \"{KERNEL}\", vcpus = {vcpus}, "
            f"memory = \"512M\" }}\n")


def chain(routers: int, vcpus: int) -> str:
    names = [f"r{i + 1}" for i in range(routers)]
    text = "name = \"benchvm\"\n[nodes.h1]\n[nodes.h2]\n"
    text += "".join(_router(n, vcpus) for n in names)
    path = ["h1", *names, "h2"]
    text += "".join(f"[[links]]\nbetween = [\"{a}\", \"{b}\"]\n"
                    for a, b in itertools.pairwise(path))
    return text


def first_fetch() -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        os.environ["HOPLAB_CACHE_DIR"] = d
        try:
            t = time.monotonic()
            k = kernel.resolve(KERNEL)
            fetch = time.monotonic() - t
            t = time.monotonic()
            initramfs.image(k)
            return {"kernel_fetch_s": fetch, "initramfs_s": time.monotonic() - t}
        finally:
            del os.environ["HOPLAB_CACHE_DIR"]


def up_down(text: str, work: Path, measure: bool = False, seconds: int = 10
            ) -> tuple[float, dict[str, float], float | None]:
    """(lab up s, its steps, TCP Mbit/s h1 -> h2 or None)."""
    file = work / "lab.toml"
    file.write_text(text)
    lab = load_lab(file)
    result = build.up(lab)
    try:
        mbit = _tcp(result.plan.node("h1").netns, result.plan.node("h2").netns,
                    seconds) if measure else None
        return result.seconds, result.steps, mbit
    finally:
        build.down(lab.name)


def _tcp(client: str, server: str, seconds: int) -> float:
    srv = subprocess.Popen(["ip", "netns", "exec", server, "iperf3", "-s", "-1"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            done = subprocess.run(["ip", "netns", "exec", client, "iperf3", "-c", "h2", "-t",
                                   str(seconds), "-C", "cubic", "-J"],
                                  capture_output=True, text=True, check=False)
            if done.returncode == 0:
                data = json.loads(done.stdout)
                return float(data["end"]["sum_received"]["bits_per_second"]) / 1e6
            time.sleep(0.1)   # the server is not listening yet
        raise RuntimeError(done.stdout[-300:])
    finally:
        srv.kill()
        srv.wait()


def boot_once(work: Path, resumed: bool = False) -> dict[str, float]:
    """One lone VM to its SSH banner, booted or resumed from its snapshot (made by a
    boot the first time): host seconds, and the console's markers."""
    keys = work / "keys"
    guest.make_keys(keys)
    k = kernel.resolve(KERNEL)
    d = Path(tempfile.mkdtemp(dir=work))
    exe = qemu.binary()
    b = qemu.Boot("bench", k, initramfs.image(k), 2, "512M", "tcg", qemu.free_port(), d)
    b = replace(b, restore=snapshot.stored(b, exe) if resumed else None)
    guest.write_dir(d, hostname="bench", nics=[(qemu.MGMT_MAC, guest.MGMT_IF)], keys=keys,
                    modules=k.modules is not None)
    t = time.monotonic()
    started = qemu.start(b)
    try:
        deadline = t + qemu.BOOT_TIMEOUT_S
        resume.release(resume.plan([(b, started)], exe), deadline)
        qemu.wait_ready(b, started.proc, deadline)
        out = {"ssh_banner_s": time.monotonic() - t, "resumed": float(b.restore is not None)}
    finally:
        started.proc.kill()
        started.proc.wait()
    for line in (d / qemu.SERIAL_LOG).read_text(errors="replace").splitlines():
        word = line.split()
        if len(word) == 2 and word[0].startswith("hoplab-"):
            out[f"guest_{word[0].removeprefix('hoplab-')}_s"] = float(word[1])
    return out


def firmware_ups(n: int) -> dict[str, object]:
    """`lab up` of h1 - r - h2 with r a firmware's own disk image (the stand-in of
    tests/helpers/firmware.py, 1 vCPU, forwarding unshaped), n times: to SSH-ready and
    configured, and what it forwards (TCP h1 -> h2, 5 s)."""
    import sys

    # The stand-in is the tests' (tests/helpers): the repository's root is on the path.
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.helpers import firmware

    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f",
                        str(work / "key")], check=True, capture_output=True)
        t0 = time.monotonic()
        img, _ = firmware.build(work / "img", (work / "key.pub").read_text())
        built = time.monotonic() - t0
        text = (f'name = "benchfw"\n[nodes.h1]\n[nodes.h2]\n[nodes.r]\n'
                f'vm = {{ image = "{img}", identity = "{work / "key"}", vcpus = 1, '
                f'memory = "256M" }}\n[[links]]\nbetween = ["h1", "r"]\n'
                f'[[links]]\nbetween = ["r", "h2"]\n')
        runs = [up_down(text, work, True, 5) for _ in range(n)]
    return {"stand_in_build_s": built, "lab_up_s": [r[0] for r in runs],
            "vms_step_s": [r[1].get("vms") for r in runs],
            "tcp_mbit": [r[2] for r in runs]}


@contextmanager
def one_router() -> Iterator[Executor]:
    """h1 - r1 - h2, r1 a VM router of 2 vCPUs, up; r1's executor."""
    with tempfile.TemporaryDirectory() as d:
        file = Path(d) / "lab.toml"
        file.write_text(chain(1, 2))
        lab = load_lab(file)
        result = build.up(lab)
        try:
            yield executors(result.plan)["r1"]
        finally:
            build.down(lab.name)


def perf_runs(n: int) -> dict[str, object]:
    """Seconds of `perf record` (0.5 s of it sampling) and of `perf script` in r1, n
    times each way, alternated: hoplab's (the wrapper on PATH, -B) and the anchor."""
    ways = {"hoplab": ["perf", "record", "-B"], "anchor": ["/usr/bin/perf", "record"]}
    took: dict[str, list[float]] = {f"{w}_{step}_s": [] for w in ways for step in
                                    ("record", "script")}
    with one_router() as r1:
        for _ in range(n):
            for way, record in ways.items():
                t = time.monotonic()
                done = r1.run([*record, "-a", "-g", "-F", "99", "-o", "/tmp/b.data",
                               "--", "sleep", "0.5"], timeout=300)
                took[f"{way}_record_s"].append(time.monotonic() - t)
                assert done.returncode == 0, done.stderr
                t = time.monotonic()
                done = r1.run(["sh", "-c", f'exec {record[0]} script -i /tmp/b.data '
                               '> /dev/null'], timeout=300)
                took[f"{way}_script_s"].append(time.monotonic() - t)
                assert done.returncode == 0, done.stderr
    return {"runs": took, "median": {k: statistics.median(v) for k, v in took.items()}}


# The facts script as it was before /proc was read by one grep (the anchor of
# --commands): a cat per /proc file, uname -r and -v, and a cat for each absent file.
_FACTS_PARTS = (
    ("if [ -r /tmp/sysinfo/model ]; then cat /tmp/sysinfo/model\n"
     "elif [ -r /proc/device-tree/model ]; then cat /proc/device-tree/model; fi",
     "cat /tmp/sysinfo/model 2>/dev/null || cat /proc/device-tree/model 2>/dev/null"),
    ("[ -r /etc/openwrt_release ] && cat /etc/openwrt_release",
     "cat /etc/openwrt_release 2>/dev/null"),
    ("s proc; grep -H '' $PROC_FILES 2>/dev/null",
     'uname -r; uname -v\nfor f in $PROC_FILES; do s "$f"; cat "$f" 2>/dev/null; done'),
)


def _anchor_facts(argv: list[str]) -> list[str]:
    script = argv[-1]
    for now, before in _FACTS_PARTS:
        assert now in script, now
        script = script.replace(now, before)
    return [*argv[:-1], script]


def command_costs(n: int) -> dict[str, object]:
    """Seconds of the facts script in a VM router (2 vCPUs), n times each way,
    alternated: hoplab's (/proc read by one grep) and the anchor's (_FACTS_PARTS); then
    of a clock offset estimate with its uncertainty, from bash's $EPOCHREALTIME
    (hoplab's) and from date +%s.%N (the anchor)."""
    took: dict[str, list[float]] = {k: [] for k in (
        "facts_s", "facts_anchor_s", "clock_s", "clock_anchor_s",
        "clock_uncertainty_ms", "clock_anchor_uncertainty_ms")}
    facts = ssh_facts.script_argv(SYSCTLS, ssh_facts.versions_here(
        {initramfs.PERF_AT: "perf"}))
    ways = {"facts_s": facts, "facts_anchor_s": _anchor_facts(facts)}
    with one_router() as r1:
        for _ in range(n):
            for key, argv in ways.items():
                t = time.monotonic()
                done = r1.run(argv, timeout=60)
                took[key].append(time.monotonic() - t)
                assert done.returncode == 0, done.stderr
            for key, method in (("clock", None), ("clock_anchor", "date-ns")):
                t = time.monotonic()
                got = clock.estimate(r1, method=method)
                took[f"{key}_s"].append(time.monotonic() - t)
                took[f"{key}_uncertainty_ms"].append(got.uncertainty_s * 1e3)
                assert got.method == (method or "epochrealtime"), got
    return {"runs": took, "median": {k: statistics.median(v) for k, v in took.items()}}


def boots(n: int) -> dict[str, object]:
    out: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as d:
        for way in ("booted", "resumed"):
            runs = [boot_once(Path(d), way == "resumed") for _ in range(n)]
            out[way] = {"runs": runs, "median": {k: statistics.median(r[k] for r in runs)
                                                 for k in runs[0]}}
    return out


def four_routers(reps: int) -> dict[str, list[float]]:
    """`lab up` of four VM routers (2 vCPUs each), booted (the anchor) and resumed,
    alternating; a first resumed one makes the snapshot if none is made."""
    out: dict[str, list[float]] = {"booted": [], "resumed": []}
    with tempfile.TemporaryDirectory() as d:
        up_down(chain(4, 2), Path(d))
        for _ in range(reps):
            for way in ("booted", "resumed"):
                os.environ[snapshot.ENV] = "0" if way == "booted" else "1"
                try:
                    out[way].append(up_down(chain(4, 2), Path(d))[0])
                finally:
                    del os.environ[snapshot.ENV]
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fetch", action="store_true")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--boots", type=int, default=0)
    ap.add_argument("--perf", type=int, default=0,
                    help="only N perf recordings in a VM router, and the anchor's")
    ap.add_argument("--commands", type=int, default=0,
                    help="only N facts in a VM router, and the anchor's")
    ap.add_argument("--firmware", type=int, default=0,
                    help="only N lab ups of a router that is a firmware disk image")
    args = ap.parse_args()
    out: dict[str, object] = {"loadavg": os.getloadavg()}
    # One measurement alone, where asked for.
    for n, measure in ((args.firmware, firmware_ups), (args.commands, command_costs),
                       (args.perf, perf_runs)):
        if n:
            out.update(measure(n))
            _print(out)
            return
    if args.boots:
        out.update(boots(args.boots))
        out["four_routers_2vcpu_lab_up_s"] = four_routers(args.reps)
        _print(out)
        return
    if args.fetch:
        out.update(first_fetch())
    with tempfile.TemporaryDirectory() as d:
        for vcpus in (1, 2):
            ups, rates = [], []
            for _ in range(args.reps):
                secs, _steps, mbit = up_down(chain(1, vcpus), Path(d), True, args.seconds)
                ups.append(secs)
                rates.append(mbit or 0.0)
            out[f"one_router_{vcpus}vcpu"] = {"lab_up_s": statistics.median(ups),
                                              "tcp_mbit": statistics.median(rates)}
        secs, steps, _ = up_down(chain(4, 2), Path(d))
        out["four_routers_2vcpu"] = {"lab_up_s": secs, "steps": steps}
    _print(out)


def _print(out: dict[str, object]) -> None:
    out["loadavg_after"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
