"""RFC 2544's figures beside the NDR, known answers through a shaped link: the frame loss
curve (section 26.3), back-to-back frames (26.4) and the test frames' own one-way
latency (26.2), with hoplab-gen, the generator named in the run's metadata.

Through R frames/s behind HTB's bucket of B frames (hoplab.lab.shaping.burst_bytes over
the frame's 1514 bytes) and a queue of Q frames, a trial of T seconds at G frames/s
delivers R x T + B + Q frames at most: loss 1 - (R x T + B + Q) / (G x T). A burst at G
frames/s is forwarded whole while N <= (Q + B) / (1 - R / G). The delay is on the other
link: netem's queue holds the frames it delays, which would take the shaper's queue.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest

from hoplab.lab.shaping import burst_bytes
from hoplab.store import open_store
from hoplab.tools import hoplab_gen
from tests.helpers.lab import (
    HOPLAB,
    hoplab,
    lab_namespaces,
    live_pids,
    new_lab_name,
    one_ok_run,
    pids_in,
)

pytestmark = [pytest.mark.root, pytest.mark.slow,
              pytest.mark.skipif(hoplab_gen.binary() is None,
                                 reason="hoplab-gen is built by make setup (make gen)")]

RATE, QUEUE, FRAME, DELAY_MS = 50_000_000, 20, 1514, 5.0
R = RATE / (FRAME * 8)
B = burst_bytes(RATE) / FRAME
TRIAL_S = 1.0


RFC_OPTIONS = 'loss_curve = true\nback_to_back = true\n'


def _run(tmp_path: Path, options: str = RFC_OPTIONS, queue: int = QUEUE,
         trial_s: float = TRIAL_S, delay: str = f'delay = "{DELAY_MS:g}ms"\n'
         ) -> tuple[dict[str, float], dict[str, str]]:
    name = new_lab_name()
    (tmp_path / "lab.toml").write_text(
        f'name = "{name}"\n[addressing]\nipv6 = false\n[nodes.client]\n[nodes.r]\n'
        f'[nodes.server]\n[[links]]\nbetween = ["client", "r"]\n{delay}[[links]]\n'
        f'between = ["r", "server"]\nrate = "{RATE}bit"\nqueue = {queue}\n')
    (tmp_path / "exp.toml").write_text(
        'lab = "lab.toml"\n[[tests]]\nname = "rfc"\nkind = "throughput"\nfrom = "client"\n'
        f'to = "server"\nframe_sizes = [1518]\ntrial = "{trial_s:g}s"\ndrain = "0.5s"\n'
        f'precision = "1%"\ngenerator = "hoplab-gen"\n{options}')
    rec = one_ok_run(tmp_path, name, timeout=900)
    return ({f"{m.name} {m.key}": m.value for m in rec.metrics if m.flow is None},
            {k: str(v) for k, v in rec.metadata.items()})


@pytest.mark.alone
def test_loss_curve_back_to_back_and_tagged_latency_through_50_mbit(tmp_path: Path) -> None:
    got, meta = _run(tmp_path)
    assert meta["generator"] == "hoplab-gen (AF_PACKET)"
    curve = sorted(k.split()[-1] for k in got if k.startswith("frame_loss "))
    assert curve[0] == "100%" or "100%" in curve
    for key in (k for k in got if k.startswith("frame_loss ")):
        pct = key.split()[-1]
        g = got[f"frame_loss_offered_fps 1518 {pct}"]
        # The trial's frames over the rate achieved: its real length (a generator that
        # stalled sent them over longer than the trial, and the shaper passed more).
        took = float(pct.rstrip("%")) / 100 * got["generator_fps 1518"] * TRIAL_S / g
        want = 100 * max(0.0, 1 - (R * took + B + QUEUE) / (g * took))
        # r itself, a namespace on this shared 2-core machine, drops frames before its
        # shaper when it cannot keep up: that only adds loss. Measured with a busy loop
        # on one core, got - want: -0.31 to +0.43 points at every step but the lowest,
        # +0.41 to +0.95 at 10 % (5 runs), and +2.10 once in a fresh-clone CI run (the
        # test after others); at a load of 19, r forwarded 0.6 % of 166,000 frames/s
        # where the shaper passes 2.5 %. Beside the pool's Chromium page loads, +4.0 at
        # 10 % (1f06bbd's run): r, flooded at some 41,700 frames/s, is the CPU's, so
        # this test runs `alone`.
        assert -1.0 <= got[key] - want <= 3.0, (pct, got[key], want)
    g = got["back_to_back_fps 1518"]
    want = (QUEUE + B) / (1 - R / g)
    assert abs(got["back_to_back_frames 1518"] / want - 1) <= 0.1, (got, want)
    # One-way: the link's delay, plus at most what the queue and bucket hold at R.
    median = got["ndr_one_way_ms 1518 median"]
    assert DELAY_MS <= median <= DELAY_MS + 1000 * (QUEUE + B) / R + 1.0, got
    assert got["ndr_one_way_ms 1518 max"] >= got["ndr_one_way_ms 1518 p99"] >= median
    assert got["ndr_out_of_order 1518"] == 0.0


def test_both_directions_at_once_through_50_mbit(tmp_path: Path) -> None:
    """Each direction at the trial's rate at once; the link is shaped both ways, so the
    pair's NDR is one direction's: R + (B + Q) / T, and each direction's is beside it."""
    trial_s, queue = 2.0, 200
    got, meta = _run(tmp_path, 'direction = "both"\nlatency = false\n', queue, trial_s,
                     delay="")
    want = R + (B + queue) / trial_s
    assert abs(got["ndr_fps 1518"] / want - 1) <= 0.01, (got, want)
    for way in ("up", "down"):
        assert got["ndr_fps 1518"] <= got[f"ndr_fps 1518 {way}"] <= want * 1.01, (way, got)
    assert meta["generator"] == "hoplab-gen (AF_PACKET)"


# Alone: a queue of 20 64-byte frames at 10 Mbit/s holds 1.3 ms, so a stall of the
# generator or the router that long beside another test loses frames: 4.4 % and 9 %
# under the computed NDR in the pools of 0a62295 and 0739ea7, and failed in 3fda4f9's.
@pytest.mark.alone
def test_even_spacing_a_20_frame_queue_takes_whole(tmp_path: Path) -> None:
    """hoplab-gen's spacing: 64-byte frames through 10 Mbit/s behind a queue of only 20
    frames, where iperf3's catch-up bursts lose 16 % at the computed rate and trafgen's
    39 % (bench/generators.py). The NDR found is the computed one, R + (B + Q) / T."""
    # 1 s trials, as tests/lab/test_throughput.py's (31 to 143 s at 2 s; 10.5 to 21.6 at 1).
    rate, queue, trial_s, frame = 10_000_000, 20, 1.0, 60
    name = new_lab_name()
    (tmp_path / "lab.toml").write_text(
        f'name = "{name}"\n[addressing]\nipv6 = false\n[nodes.client]\n[nodes.r]\n'
        f'[nodes.server]\n[[links]]\nbetween = ["client", "r"]\n[[links]]\n'
        f'between = ["r", "server"]\nrate = "{rate}bit"\nqueue = {queue}\n')
    (tmp_path / "exp.toml").write_text(
        'lab = "lab.toml"\n[[tests]]\nname = "ndr"\nkind = "throughput"\nfrom = "client"\n'
        f'to = "server"\nframe_sizes = [64]\ntrial = "{trial_s:g}s"\ndrain = "0.5s"\n'
        'precision = "0.5%"\ngenerator = "hoplab-gen"\nlatency = false\n')
    db = tmp_path / "runs.db"
    proc = hoplab("run", str(tmp_path / "exp.toml"), "--db", str(db), "--json",
                  "--lab-name", name, timeout=900)
    assert lab_namespaces(name) == set(), "the run left namespaces behind"
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    with open_store(str(db)) as store:
        rec = store.get_run(run["id"])
    got = rec.metric("ndr_fps", key="64")
    want = rate / (frame * 8) + (burst_bytes(rate) / frame + queue) / trial_s
    assert got is not None and abs(got / want - 1) <= 0.01, (got, want)


def test_a_search_cut_short_is_stored_with_the_trials_it_ran(tmp_path: Path) -> None:
    """Ctrl-C during a search: the run is stored interrupted, with every trial that had
    finished (one sender per trial, after the ceiling's: the third sender seen means
    the first trial is done) and the generator's ceiling."""
    name = new_lab_name()
    (tmp_path / "lab.toml").write_text(
        f'name = "{name}"\n[addressing]\nipv6 = false\n[nodes.client]\n[nodes.r]\n'
        '[nodes.server]\n[[links]]\nbetween = ["client", "r"]\n[[links]]\n'
        'between = ["r", "server"]\nrate = "10mbit"\n')
    (tmp_path / "exp.toml").write_text(
        'lab = "lab.toml"\n[[tests]]\nname = "cut"\nkind = "throughput"\nfrom = "client"\n'
        'to = "server"\nframe_sizes = [64]\ntrial = "1s"\ndrain = "0.2s"\n'
        'precision = "0.1%"\ngenerator = "hoplab-gen"\nlatency = false\n')
    db = tmp_path / "runs.db"
    proc = subprocess.Popen([*HOPLAB, "run", str(tmp_path / "exp.toml"), "--db", str(db),
                             "--lab-name", name], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen: set[int] = set()
        deadline = time.monotonic() + 120
        while len(seen) < 3 and time.monotonic() < deadline and proc.poll() is None:
            seen |= pids_in(lab_namespaces(name)) & live_pids("hoplab-gen")
            time.sleep(0.01)
        assert len(seen) >= 3, "the search's second trial should have started"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert lab_namespaces(name) == set()
    with open_store(str(db)) as store:
        (run,) = store.list_runs()
        rec = store.get_run(run.id)
    assert rec.status == "interrupted" and rec.measurement_version == 4
    (asked,) = [s for s in rec.series if s.name == "throughput_trial"]
    (achieved,) = [s for s in rec.series if s.name == "throughput_trial_achieved"]
    assert len(asked.v) >= 1 and len(achieved.v) == len(asked.v)
    assert asked.v[0] == rec.metric("generator_fps", key="64")
    assert rec.metadata["generator"] == "hoplab-gen (AF_PACKET)"
