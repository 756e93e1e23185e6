"""hoplab-fold against stackcollapse-perf.pl itself on generated perf script text full of
the cases its regular expressions decide: command names with spaces, digits and
colons, PID/TID forms, periods and events, offsets, inlined frames, unknown symbols,
Java, Go and C++ names, JIT maps, lines it does not recognise, missing blank lines.

The script's outputs on these inputs are data in tests/data/flamegraph/
generated-reference.json.gz, made by running it (at FlameGraph commit 41fee1f) on
exactly these documents: the generator is seeded, so the inputs are the same on every
machine, and the test needs neither the script nor the network. Where the script is
at hand (`make flamegraph-ref` fetches it into build/flamegraph/, never committed;
$STACKCOLLAPSE_PL names another copy) it is run too, and must still agree with the
stored outputs. To make them again: `make flamegraph-ref` then
`python -m tests.unit.test_fold_reference`.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import tempfile
from functools import cache
from pathlib import Path

import pytest

from hoplab.profile import fold
from hoplab.profile.tools import find

REPO = Path(__file__).resolve().parents[2]
SCRIPT = Path(os.environ.get("STACKCOLLAPSE_PL")
              or REPO / "build" / "flamegraph" / "stackcollapse-perf.pl")

STORED = REPO / "tests" / "data" / "flamegraph" / "generated-reference.json.gz"

pytestmark = [
    pytest.mark.skipif(find("hoplab-fold") is None, reason="hoplab-fold is built by make setup"),
]

COMMS = ["java", "V8 WorkerThread", "kworker/0:1", "swapper", "a", "ab", "x y  z", ":-1",
         "perf 12", "java-1", "0", "9a", "t\tab", "weird\xffname", "sh:2", "ksoftirqd/0",
         "iperf3", "x  ", "java thread"]
PIDS = ["123", "123/456", "123/0", "0", "12/", "/5", "1-2", "", "7//8", "0/0", "00/1"]
PERIODS = ["", " 1", " 235", " 0", " 00", " 0012", "  77  "]
EVENTS = ["cycles:", "instructions:", "cpu-clock:ppp:", "sched:sched_switch:", "cycles::",
          "cycles: prev=1", "cycles:  ", "cycles:\t", ":"]
FUNCS = ["native_safe_halt", "foo+0x1f", "foo+0xAB", "+0x10", "[unknown]", "a->b", "a->b->",
         "->a", "inl_[i]->x", "f(int)", "ns::(anonymous namespace)::g(int)",
         "net/http.(*Client).Do", "Ljava/lang/Thread;::run", "LBusy;::main",
         "RegExp:[&<>\"']", "x;y", "(python3)", "(deleted)", "a b c", "x_[j]", "x)y",
         "cpu_startup_entry+0x800047c022ec", "f+0x1+0x2", "a.(b).c", "\xfe\xff", "x (y) z"]
MODULES = ["[kernel.kallsyms]", "/lib/x.so", "[unknown]", "/tmp/perf-123.map", "/tmp/perf-.map",
           "/boot/vmlinux", "vmlinux-x", "/usr/lib/unknown.so", "a (b)", "", "[nf_conntrack]",
           "/x/tmp/perf-9.mapx", "/lib/with space/l.so"]
ODD = ["", "#comment", "# cmdline : /usr/bin/perf record -g -- java -jar x", "   ", "\r",
       "garbage", "x (y)", "[unknown] ( )", "\t(z)", "  ffff (bar)", "  f (bar)", "#"]


def _header(r: random.Random) -> str:
    def sp() -> str:
        return r.choice([" ", "  ", "\t", " \t "])

    cpu = r.choice(["", f"{sp()}[00{r.randint(0, 3)}]"])
    return (f"{r.choice(COMMS)}{sp()}{r.choice(PIDS)}{cpu}{sp()}{r.randint(1, 99)}.123456:"
            f"{r.choice(PERIODS)}{sp()}{r.choice(EVENTS) if r.random() < 0.3 else 'cycles:'}")


def _frame(r: random.Random) -> str:
    ws = r.choice(["\t", "   ", "\t    ", "", " "])
    pc = r.choice(["ffffffff8103ce3b", "7f0", "0", "", "abc_1"])
    tail = r.choice(["", "", "", " (x)", ")", " trailing"])
    return f"{ws}{pc}{r.choice([' ', '  '])}{r.choice(FUNCS)} ({r.choice(MODULES)}){tail}"


def document(seed: int, records: int = 400) -> bytes:
    r = random.Random(seed)
    lines = []
    for _ in range(records):
        lines.append(_header(r) if r.random() > 0.03 else r.choice(ODD))
        for _ in range(r.randint(0, 6)):
            lines.append(_frame(r) if r.random() > 0.08 else r.choice(ODD))
        if r.random() > 0.05:
            lines.append("")
    # A few lines end in \r\n: the script keeps the \r (a blank line then ends nothing).
    text = "".join(ln + ("\r\n" if r.random() < 0.02 else "\n") for ln in lines)
    return text.encode("latin-1")[: None if seed % 3 else -1]


OPTION_SETS = [[], ["pid"], ["tid"], ["kernel"], ["jit"], ["all"], ["addrs"],
               ["all", "pid", "addrs"], ["tid", "jit"]]
CASES = [*OPTION_SETS, ["all", "event-filter=instructions"]]


@cache
def stored() -> dict[str, bytes]:
    data = json.loads(gzip.decompress(STORED.read_bytes()))
    return {k: v.encode("latin-1") for k, v in data.items()}


def _script(src: Path, opts: list[str]) -> bytes:
    return subprocess.run(["perl", str(SCRIPT), *[f"--{o}" for o in opts], str(src)],
                          capture_output=True, check=True).stdout


@pytest.mark.parametrize("seed", range(12))
def test_generated_input_folds_as_the_script_does(seed: int, tmp_path: Path) -> None:
    src = tmp_path / "in.txt"
    src.write_bytes(document(seed))
    for opts in CASES:
        flags = [f"--{o}" for o in opts]
        ref = stored()[f"{seed} {' '.join(opts)}"]
        if SCRIPT.is_file():
            assert _script(src, opts) == ref, f"the script's output changed: seed {seed} {opts}"
        mine = [*fold.argv([o for o in opts if o in fold.OPTIONS]),
                *[f for f in flags if f.startswith("--event-filter")], str(src)]
        got = subprocess.run(mine, capture_output=True, check=True).stdout
        assert got == ref, f"seed {seed}, options {opts}"
        # Cut into chunks of a few lines, folded on three threads: the same.
        cut = subprocess.run([*mine[:-1], "--threads=3", f"--block-size={50 + seed}", str(src)],
                             capture_output=True, check=True).stdout
        assert cut == ref, f"seed {seed}, options {opts}, in chunks"
        if not opts:
            assert ref.count(b"\n") > 20, "the generated input folds to little: fix it"


def _remake() -> None:
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.txt"
        for seed in range(12):
            src.write_bytes(document(seed))
            for opts in CASES:
                out[f"{seed} {' '.join(opts)}"] = _script(src, opts).decode("latin-1")
    STORED.write_bytes(gzip.compress(json.dumps(out, sort_keys=True).encode(), mtime=0))


if __name__ == "__main__":
    _remake()
