"""Known answers over IPv6: `family = 6` on tcp and udp flows through links shaped to
20 Mbit/s give the payload rate IPv6's larger headers leave, told apart from IPv4's.

HTB counts whole Ethernet frames (tests/lab/test_runs.py). A full TCP segment in a
1500-byte MTU carries 1500 - 40 (IPv6) - 20 (TCP) - 12 (timestamps) = 1428 bytes over
IPv6 (the MSS iperf3 reports, from the kernel), 1448 over IPv4, each in a 1514-byte
frame; a 400-byte UDP datagram is a 400 + 8 + 40 + 14 = 462-byte frame over IPv6, 442
over IPv4. One run of one lab carries the four flows at once, each through a shaped
link of its own behind a router, whose FIFO keeps the link busy while a sender on this
shared machine is descheduled (a sender's own qdisc would hold only its socket buffer).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hoplab.lab.shaping import burst_bytes
from hoplab.store import open_store
from tests.helpers.lab import hoplab, lab_namespaces, new_lab_name

pytestmark = [pytest.mark.root, pytest.mark.alone]

RATE_BPS = 20_000_000
DURATION_S = 3
LENGTH = 400
# The flows: (name, kind, family, payload bytes per frame, frame bytes).
FLOWS = (("tcp4", "tcp", 4, 1448, 1514), ("tcp6", "tcp", 6, 1428, 1514),
         ("udp4", "udp", 4, LENGTH, LENGTH + 8 + 20 + 14),
         ("udp6", "udp", 6, LENGTH, LENGTH + 8 + 40 + 14))
# A link carries no more than its rate, so above the figure only the measurement errs
# (0.01-0.2 % below it in 17 runs on the shared 2-core VM, worst 0.46 %; the UDP flows
# counted from their first datagram, 0.00-0.44 % below in 6 more). Below, a
# sender or HTB's timer descheduled on a busy machine can leave the link idle for a
# moment. Each bound is under half the 1.4 % between IPv6's and IPv4's TCP payload: a
# flow with the other family's headers fails (a tcp6 flow run over IPv4 read +1.2 %).
HIGH_PCT, LOW_PCT = 0.3, 0.7
# UDP's families differ by 4.5 % (400 B in 442-byte frames against 462), so its low bound
# is set by what a busy machine gives, still under half that gap: a fresh-clone CI run
# read udp6 -0.77 % (a moment of idle link while the sender was descheduled), where 6
# runs on a quieter machine read 0.00 to -0.44 %.
UDP_LOW_PCT = 1.5


def expected_goodput(kind: str, payload: int, frame: int, seconds: float) -> float:
    """The link's rate in payload. A TCP receiver counts for its whole test (`seconds`),
    in which HTB's full bucket (hoplab.lab.shaping.burst_bytes) passes once above the
    rate, at the start; a UDP flow's first report interval, which holds that burst, is
    counted at the rate of the others (docs/data-format.md, "UDP goodput")."""
    rate = RATE_BPS * payload / frame
    if kind == "udp":
        return rate
    return rate * (1 + 8 * burst_bytes(RATE_BPS) / (RATE_BPS * seconds))


def lab_text(name: str) -> str:
    """a1..a4 - r - b1..b4, r's links to the b nodes shaped."""
    pairs = range(1, len(FLOWS) + 1)
    return (f'name = "{name}"\n[nodes.r]\n'
            + "".join(f"[nodes.a{i}]\n[nodes.b{i}]\n" for i in pairs)
            + "".join(f'[[links]]\nbetween = ["a{i}", "r"]\n[[links]]\nbetween = ["r", "b{i}"]\n'
                      f'rate = "{RATE_BPS}bit"\n' for i in pairs))


def experiment() -> str:
    text = (f'lab = "lab.toml"\n[[tests]]\nname = "fam"\nkind = "custom"\n'
            f'duration = "{DURATION_S}s"\n')
    for i, (name, kind, family, _, _) in enumerate(FLOWS, 1):
        text += (f'[[tests.flows]]\nname = "{name}"\nkind = "{kind}"\nfrom = "a{i}"\n'
                 f'to = "b{i}"\nfamily = {family}\n')
        if kind == "udp":
            # Above the link's rate: the link, not the sender, sets what arrives.
            text += f'rate = "{RATE_BPS * 3 // 2}bit"\nlength = {LENGTH}\n'
    return text


def test_ipv6_payload_rates_through_a_shaped_link(tmp_path: Path) -> None:
    name = new_lab_name()
    (tmp_path / "lab.toml").write_text(lab_text(name))
    (tmp_path / "exp.toml").write_text(experiment())
    db = tmp_path / "runs.db"
    proc = hoplab("run", str(tmp_path / "exp.toml"), "--db", str(db), "--json",
                  "--lab-name", name, timeout=120)
    assert lab_namespaces(name) == set(), "the run left namespaces behind"
    assert proc.returncode == 0, proc.stderr
    (run,) = json.loads(proc.stdout)["runs"]
    assert run["status"] == "ok", run["error"]
    with open_store(str(db)) as store:
        rec = store.get_run(run["id"], raw=True)
    for flow, kind, family, payload, frame in FLOWS:
        got = rec.metric("goodput", flow=f"fam.{flow}")
        assert got is not None, flow
        out = json.loads(next(r.data for r in rec.raw if r.name == f"fam.{flow} iperf3"))
        expected = expected_goodput(kind, payload, frame,
                                    out["end"]["sum_received"]["seconds"])
        low = UDP_LOW_PCT if flow.startswith("udp") else LOW_PCT
        assert -low <= 100 * (got / expected - 1) <= HIGH_PCT, (flow, got, expected)
        # iperf3 went over the family asked for, to the address of that family.
        assert (":" in out["start"]["connected"][0]["remote_host"]) is (family == 6)
        if flow.startswith("tcp"):
            # The kernel's MSS is the payload per segment computed above.
            assert out["start"]["tcp_mss_default"] == payload, flow
