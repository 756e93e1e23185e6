"""`hoplab run` of a responsiveness test as a user runs it, with the known answer of the
issue: through a 20 Mbit/s hoplab-wire link, fq_codel gives at least 3 times the RPM of
a 1000-packet FIFO, and the FIFO's path reads alike at the client's pace (the draft's
100 probe pairs a second) and at a tenth of it. One run of one experiment, the queues
and paces as the matrix's variants: the lab, the CLI and the store cost once (about
30 s in all on the loaded machine).

The load is downloads with cubic (set on the server's listening socket): bbr, this
machine's default, keeps a FIFO nearly empty. A full FIFO of 1000 frames of 1514 bytes
at 20 Mbit/s holds 606 ms, and a foreign probe's handshakes and GET each wait in it;
fq_codel gives a new connection's few packets their own queue.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hoplab.store import open_store
from tests.helpers.lab import hoplab, lab_namespaces, new_lab_name, this_workers

pytestmark = [pytest.mark.root, pytest.mark.slow]

Figures = dict[str, dict[tuple[str, str | None], float]]
PAYLOAD_BPS = 20e6 * 1448 / 1514   # 19.13 Mbit/s of TCP payload in 1514-byte frames
FULL_FIFO_MS = 1000 * 1514 * 8 / 20e6 * 1000   # 606 ms

LAB = """name = "rpm"
[nodes.a]
[nodes.b]
[[links]]
between = ["a", "b"]
emulator = "wire"
rate = "20mbit"
queue = "1000p"
"""

EXPERIMENT = """lab = "lab.toml"
pause = "0s"
shuffle = false
[matrix.queue.fifo]
[matrix.queue.fq_codel]
"lab.links.0.qdisc" = "fq_codel"
[matrix.queue.fifo_few]
"tests.rpm.probes" = 10
[[tests]]
name = "rpm"
kind = "responsiveness"
from = "a"
to = "b"
direction = "down"
congestion = "cubic"
duration = "8s"
"""


def _ours() -> list[str]:
    """Command lines of this kind's client and server processes still running."""
    found = {}
    for entry in Path("/proc").iterdir():
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "hoplab.tools.rpm_" in cmd and entry.name.isdigit():
            found[int(entry.name)] = cmd
    # Another worker's tests' servers are theirs to check (tests/helpers/alone.py).
    return [found[pid] for pid in sorted(this_workers(found))]


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> Figures:
    tmp = tmp_path_factory.mktemp("rpm")
    (tmp / "lab.toml").write_text(LAB)
    (tmp / "exp.toml").write_text(EXPERIMENT)
    name = new_lab_name()
    proc = hoplab("run", str(tmp / "exp.toml"), "--db", str(tmp / "runs.db"), "--json",
                  "--lab-name", name, timeout=240)
    assert lab_namespaces(name) == set(), "the run left namespaces behind"
    assert proc.returncode == 0, proc.stderr
    # The client, the server and its nginx are stopped and reaped.
    assert _ours() == []
    out: Figures = {}
    with open_store(str(tmp / "runs.db")) as store:
        for r in json.loads(proc.stdout)["runs"]:
            rec = store.get_run(r["id"])
            out[r["variant"]["queue"]] = {(m.name, m.key): m.value for m in rec.metrics
                                          if m.flow is None}
            assert r["status"] == "ok", r
    return out


def test_fq_codel_gives_at_least_three_times_the_rpm_of_a_1000_packet_fifo(
        runs: Figures) -> None:
    fifo, fq = runs["fifo"], runs["fq_codel"]
    assert fq[("rpm", None)] >= 3 * fifo[("rpm", None)], (fifo, fq)
    # Why: the foreign probes' round trips wait in the FIFO, which cubic's growing windows
    # fill towards its 606 ms over the test (168-496 ms over the last 4 s measured), and
    # not behind fq_codel, which serves a new connection's few packets at once: 6-21 ms
    # measured, the lab's own sub-millisecond RTT, TLS and the client's Python; 60 ms
    # with the unit tests running beside it, the client's event loop lagging.
    assert fifo[("rpm_foreign_ms", None)] > 100, fifo
    assert fq[("rpm_foreign_ms", None)] < 100, fq


def test_the_load_fills_the_link_in_all(runs: Figures) -> None:
    # The last four intervals' goodput: the link's payload rate, counted by the load
    # sockets' kernels (TLS and HTTP/2 framing included): 18.90-18.97 of 19.13 Mbit/s
    # measured. A hole a drop leaves is counted when its retransmission fills it, so one
    # interval may read 9.8 and the next 28.1; four of them even it out.
    for queue, m in runs.items():
        assert 0.9 * PAYLOAD_BPS <= m[("rpm_goodput", "down")] <= 1.02 * PAYLOAD_BPS, queue
        assert m[("rpm_confidence", None)] in (1.0, 2.0, 3.0)


def test_the_drafts_pace_and_a_tenth_of_it_read_one_path_alike(runs: Figures) -> None:
    """The client's pace is not what it measures: on the FIFO's path, 10 probe pairs a
    second give the RPM of the draft's 100 (the client's own) within 25 %, the spread
    of the FIFO's RPM between runs here (99-118 RPM over 8 runs at a load average of
    8-18; the two paces' ratio 0.98-1.01 over 4 runs)."""
    many, few = runs["fifo"], runs["fifo_few"]
    ratio = few[("rpm", None)] / many[("rpm", None)]
    assert 0.75 <= ratio <= 1.25, (many, few)
