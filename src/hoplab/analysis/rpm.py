"""The arithmetic of responsiveness under working conditions (RPM), as
draft-ietf-ippm-responsiveness-08 defines it: trimmed means of the probes' delays, the
responsiveness they make, the stability of goodput and of responsiveness, and the
confidence of a result. Pure: the client (hoplab.tools.rpm_client) decides with it while
it runs, and the kind's collector replays the client's recorded intervals and probes
through it, so both read one definition.

The draft's parameters (its section "Test Parameters"): MAD, the moving-average
distance in intervals; ID, the interval (1 s in -08; the authors' working copy for -09
tries 5 s); TMP, the single-sided trimmed mean's percentile; SDT, the standard deviation
tolerance; MNP, the most load-generating connections; MPS, probes a second at most; PTC,
the share of the capacity the probes may use.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

MAD = 4
ID_S = 1.0
TMP = 95.0
SDT = 0.05
MNP = 16
MPS = 100
PTC = 0.05
# What a probe weighs on the wire, TCP and TLS included (the draft's estimates): a
# foreign probe's new connection, and a self probe on a load-generating one.
FOREIGN_PROBE_BYTES = 5000
SELF_PROBE_BYTES = 1000

# The draft's confidence of a stage: "Low" when fewer than MAD intervals of it ran,
# "Medium" when MAD or more ran but it never became stable, "High" when it did.
LOW, MEDIUM, HIGH = 1, 2, 3
CONFIDENCE_WORDS = {LOW: "low", MEDIUM: "medium", HIGH: "high"}


@dataclass(frozen=True)
class Foreign:
    """A probe on a connection of its own: its TCP handshake, its TLS handshake divided
    by the round trips of its TLS version (1 for TLS 1.3, 2 for 1.2), and the GET of the
    small object on it, each in ms; `interval` is the one it completed in."""

    interval: int
    tcp_ms: float
    tls_ms: float | None   # None: no TLS (the draft's TCP-only case)
    http_ms: float


@dataclass(frozen=True)
class Self:
    """A GET of the small object multiplexed on a load-generating connection (ms)."""

    interval: int
    http_ms: float


def trimmed_mean(values: Sequence[float], tmp: float = TMP) -> float:
    """The single-sided trimmed mean at the `tmp` percentile: the mean of the values at or
    below it, by nearest rank (the smallest ceil(n * tmp / 100) of them); NaN for none.
    Ten values keep all ten; twenty drop the largest."""
    if not values:
        return math.nan
    keep = max(1, math.ceil(len(values) * tmp / 100 - 1e-9))
    return math.fsum(sorted(values)[:keep]) / keep


@dataclass(frozen=True)
class Responsiveness:
    """RPM and its parts: the foreign probes' mean round trip (the three trimmed means
    averaged, each with equal weight) and the self probes' trimmed mean, in ms."""

    rpm: float
    foreign_ms: float
    self_ms: float
    foreign_probes: int
    self_probes: int


def responsiveness(foreign: Sequence[Foreign], selfs: Sequence[Self], tmp: float = TMP
                   ) -> Responsiveness | None:
    """The draft's responsiveness of these probes (section "Aggregating the
    Measurements"): Foreign = 60000 / ((TM(tcp_f) + TM(tls_f) + TM(http_f)) / 3),
    Loaded = 60000 / TM(http_l), RPM = (Foreign + Loaded) / 2; without TLS the foreign
    part is (TM(tcp_f) + TM(http_f)) / 2. None without a probe of each kind."""
    if not foreign or not selfs:
        return None
    parts = [trimmed_mean([p.tcp_ms for p in foreign], tmp),
             trimmed_mean([p.http_ms for p in foreign], tmp)]
    tls = [p.tls_ms for p in foreign if p.tls_ms is not None]
    if tls:
        parts.append(trimmed_mean(tls, tmp))
    foreign_ms = math.fsum(parts) / len(parts)
    self_ms = trimmed_mean([p.http_ms for p in selfs], tmp)
    if foreign_ms <= 0 or self_ms <= 0:
        return None
    rpm = (60000 / foreign_ms + 60000 / self_ms) / 2
    return Responsiveness(rpm, foreign_ms, self_ms, len(foreign), len(selfs))


def stable(values: Sequence[float], mad: int = MAD, sdt: float = SDT) -> bool:
    """The draft's stability: the standard deviation of the last MAD values (moving
    averages, or responsiveness values) is less than SDT of the most recent one. The
    standard deviation is the population's, as goresponsiveness computes it."""
    if len(values) < mad:
        return False
    last = values[-mad:]
    return statistics.pstdev(last) < sdt * abs(last[-1])


def moving_average(per_interval: Sequence[float], i: int, mad: int = MAD) -> float | None:
    """The moving average aggregate of interval i (0-based): the mean of intervals
    i - MAD + 1 .. i; None before MAD intervals have run."""
    if i + 1 < mad:
        return None
    return math.fsum(per_interval[i + 1 - mad:i + 1]) / mad


@dataclass
class Stage:
    """One stage of the algorithm (goodput saturation, then responsiveness): the values
    it computed interval by interval, and where it became stable."""

    values: list[float] = field(default_factory=list)
    stable_at: int | None = None   # the interval at which it was declared stable

    def confidence(self, mad: int = MAD) -> int:
        if self.stable_at is not None:
            return HIGH
        return MEDIUM if len(self.values) >= mad else LOW


@dataclass
class Progress:
    """The algorithm's state after each interval (the draft's "Final Algorithm"): goodput
    saturation first, then responsiveness over the last MAD intervals of probes."""

    mad: int = MAD
    sdt: float = SDT
    tmp: float = TMP
    goodput_bps: list[float] = field(default_factory=list)   # each interval's
    goodput: Stage = field(default_factory=Stage)
    rpm: Stage = field(default_factory=Stage)
    # The responsiveness of each interval of the responsiveness stage.
    results: list[Responsiveness] = field(default_factory=list)

    @property
    def saturated(self) -> bool:
        return self.goodput.stable_at is not None

    @property
    def done(self) -> bool:
        return self.rpm.stable_at is not None

    def interval(self, i: int, goodput_bps: float, foreign: Sequence[Foreign],
                 selfs: Sequence[Self], force: bool = False) -> None:
        """Interval i has ended with `goodput_bps` and the probes completed so far. With
        `force`, the responsiveness stage begins though goodput is not stable (the time
        given to goodput is over)."""
        self.goodput_bps.append(goodput_bps)
        if not self.saturated:
            ma = moving_average(self.goodput_bps, i, self.mad)
            if ma is not None:
                self.goodput.values.append(ma)
                if stable(self.goodput.values, self.mad, self.sdt):
                    self.goodput.stable_at = i
            if not self.saturated and not force:
                return
        if self.done:
            return
        window = range(i + 1 - self.mad, i + 1)
        got = responsiveness([p for p in foreign if p.interval in window],
                             [p for p in selfs if p.interval in window], self.tmp)
        if got is None:
            return
        self.results.append(got)
        self.rpm.values.append(got.rpm)
        if stable(self.rpm.values, self.mad, self.sdt):
            self.rpm.stable_at = i

    def result(self, foreign: Sequence[Foreign], selfs: Sequence[Self]
               ) -> Responsiveness | None:
        """The reported responsiveness: the stable one, or else that of the last MAD
        intervals' probes (the test's time ran out first; the confidence says so)."""
        if self.done:
            return self.results[-1]
        last = len(self.goodput_bps) - 1
        window = range(last + 1 - self.mad, last + 1)
        return responsiveness([p for p in foreign if p.interval in window],
                              [p for p in selfs if p.interval in window], self.tmp)

    def confidence(self) -> int:
        """The result's confidence: the lower of its two stages' (a responsiveness
        measured before goodput was stable is no more certain than that goodput)."""
        return min(self.goodput.confidence(self.mad), self.rpm.confidence(self.mad))


def probe_pairs(goodput_bps: float, id_s: float = ID_S, mps: int = MPS, ptc: float = PTC
                ) -> int:
    """How many probe pairs (a foreign and a self probe) an interval may launch: MPS a
    second at most, and their bytes no more than PTC of the capacity measured; at least
    one."""
    budget = ptc * goodput_bps / 8 * id_s / (FOREIGN_PROBE_BYTES + SELF_PROBE_BYTES)
    return max(1, min(int(mps * id_s), int(budget)))
