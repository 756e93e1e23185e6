"""`hoplab worker --concurrency N`: a bench of N workers, each a process of its own (its
own lab, its own run, its own signals), one row each in the fleet (NAME#1 ... NAME#N);
their runs are all labelled bench=NAME. This process hands each signal on to them and
waits for them all."""

from __future__ import annotations

import hashlib
import signal
import subprocess
from collections.abc import Mapping, Sequence
from types import FrameType

_STOPS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def slot_lab(lab: str, slot: int) -> str:
    """The lab name of a bench's worker `slot`: LAB-SLOT, or one made from it when that
    would be longer than a lab name may be."""
    name = f"{lab}-{slot}"
    return name if len(name) <= 20 else "b" + hashlib.sha256(name.encode()).hexdigest()[:10]


def supervise(argv: Sequence[str], n: int, env: Mapping[str, str]) -> int:
    """Run `argv` + ["--slot", K] for K in 1..n; every stop signal handed on to each.
    130 if one was interrupted, else the highest exit status."""
    procs: list[subprocess.Popen[bytes]] = []

    def hand_on(signum: int, _frame: FrameType | None) -> None:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signum)

    old = {sig: signal.signal(sig, hand_on) for sig in _STOPS}
    try:
        for k in range(1, n + 1):
            procs.append(subprocess.Popen([*argv, "--slot", str(k)], env=dict(env),
                                          stdin=subprocess.DEVNULL))
        codes = [p.wait() for p in procs]
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    return 130 if 130 in codes else max(codes)
