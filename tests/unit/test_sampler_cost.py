"""The device sampler's own cost (sampler.cpu): read with the scheduler's ns clock where
the device has /proc/PID/schedstat, so a cost below one clock tick (10 ms) per sample
does not read as zero; in ticks where it has not. Known answers from scripted samples."""

from __future__ import annotations

from pathlib import Path

import pytest

from hoplab.nodes.fake import FakeExecutor
from hoplab.nodes.ssh_counters import _PROBE, END, DeviceCounterSource, spent_ns

DATA = Path(__file__).resolve().parents[1] / "data" / "tc"


def stat(pid: int, comm: str, utime: int, stime: int, cutime: int = 0, cstime: int = 0) -> str:
    """A /proc/PID/stat line: fields 14-17 are utime, stime, cutime, cstime."""
    return (f"{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 100 0 0 0 "
            f"{utime} {stime} {cutime} {cstime} 20 0 1 0 500 1000000 200")


def proc_stat(total_per_core: int) -> str:
    """Two cores, all time idle but for 1 tick of user each: totals grow by 2 per tick."""
    cpu = f"1 0 0 {total_per_core - 1} 0 0 0 0 0 0"
    return "\n".join([f"cpu  {2 * 1} 0 0 {2 * (total_per_core - 1)} 0 0 0 0 0 0",
                      f"cpu0 {cpu}", f"cpu1 {cpu}", "intr 0"])


def sample(core_ticks: int, ticks: tuple[int, int], runtimes: tuple[int, int] | None) -> list[str]:
    lines = ["==> /proc/stat <==", *proc_stat(core_ticks).splitlines(),
             "==> /proc/self/stat <==", stat(40, "awk", ticks[0], 0),
             "==> /proc/39/stat <==", stat(39, "dropbear", ticks[1], 0)]
    if runtimes is not None:
        lines += ["==> /proc/self/schedstat <==", f"{runtimes[0]} 5000 30",
                  "==> /proc/39/schedstat <==", f"{runtimes[1]} 7000 40"]
    return [*lines, END]


def costs(samples: list[list[str]]) -> list[float]:
    ex = FakeExecutor("owrt")
    ex.reply(["sh", "-c", _PROBE, "sh", "/proc/stat"], stdout="file /proc/stat\nawk\n")
    answers = iter(samples)
    ex.answer = lambda _line: next(answers)
    source = DeviceCounterSource(ex, frozenset())
    out = []
    for _ in samples:
        snap = source.read()
        out += [v for name, _unit, _key, v in snap.extra if name == "sampler.cpu"]
    source.close()
    return out


def test_a_cost_below_a_tick_is_read_in_ns() -> None:
    # 100 ms per core between the samples (10 ticks); no tick of the loop's or the
    # server's, but 300 + 200 us of their run time: 0.5 % of one core.
    got = costs([sample(1000, (7, 9), (100_000_000, 200_000_000)),
                 sample(1010, (7, 9), (100_300_000, 200_200_000))])
    assert got == [pytest.approx(0.5)]


def test_without_schedstat_the_cost_is_in_ticks() -> None:
    # One tick (10 ms) of the loop's in 100 ms: 10 %.
    got = costs([sample(1000, (7, 9), None), sample(1010, (8, 9), None)])
    assert got == [pytest.approx(10.0)]


def test_a_change_of_clock_between_two_samples_gives_no_value() -> None:
    got = costs([sample(1000, (7, 9), None), sample(1010, (8, 9), (1, 2)),
                 sample(1020, (8, 9), (1_000_001, 2))])
    assert got == [pytest.approx(1.0)]


def test_spent_counts_the_children_in_ticks_and_a_zero_schedstat_as_absent() -> None:
    stats = [stat(40, "sh", 1, 2, cutime=3, cstime=4), stat(39, "dropbear", 5, 6)]
    assert spent_ns(stats, ["1000 0 0", "2000 0 0"]) == (True, 3000 + 7 * 10_000_000)
    assert spent_ns(stats, ["0 0 0", "0 0 0"]) == (False, 21 * 10_000_000)
    assert spent_ns(stats, []) == (False, 21 * 10_000_000)


def test_a_tc_that_cannot_list_qdiscs_is_missing_and_the_rest_goes_on() -> None:
    """BusyBox's tc applet answers `tc -s qdisc show` with its usage (captured from
    Debian's BusyBox 1.35): the qdiscs are missing, with why, and the CPU sampling goes
    on (it ended the run)."""
    usage = (DATA / "busybox-1.35-tc-s-qdisc-show.txt").read_text().splitlines()
    ex = FakeExecutor("owrt")
    ex.reply(["sh", "-c", _PROBE, "sh", "/proc/stat"],
             stdout="file /proc/stat\nawk\ntc-text\n")
    answers = iter([[*sample(1000, (7, 9), None)[:-1], "==> tc-text <==", *usage, END],
                    sample(1010, (8, 9), None)])
    asked: list[str] = []

    def answer(line: str) -> list[str]:
        asked.append(line)
        return next(answers)

    ex.answer = answer
    source = DeviceCounterSource(ex, frozenset({"qdisc"}))
    first, second = source.read(), source.read()
    source.close()
    assert first.qdiscs is None and "BusyBox's tc" in first.missing["qdisc"]
    assert second.proc_stat is not None and "qdisc" in second.missing
    assert asked == ["t", "s"]  # not asked for the qdiscs again


def test_the_sessions_tc_is_counted_from_its_own_proc() -> None:
    """tc-batch: the session's tc is no child of the loop's, so its time comes from its
    own /proc/PID, in ns like the others; a sample that has lost it (it died: the loop
    forks tc from then on) gives no cost against one that had it."""
    stats = [stat(40, "awk", 1, 2, cutime=3, cstime=4), stat(39, "dropbear", 5, 6)]
    helper = (stat(41, "tc", 8, 9), "4000 0 0")
    assert spent_ns(stats, ["1000 0 0", "2000 0 0"], helper) == \
        (True, 1000 + 2000 + 4000 + 7 * 10_000_000)
    # Without its schedstat, all in ticks: 1+2+3+4 (the loop and its children), 5+6 (the
    # server), 8+9 (the session's tc).
    assert spent_ns(stats, ["1000 0 0", "2000 0 0"], (helper[0], "")) == \
        (False, 38 * 10_000_000)

    def with_tc(core_ticks: int, runtimes: tuple[int, int], tc_ns: int | None) -> list[str]:
        lines = sample(core_ticks, (7, 9), runtimes)[:-1]
        if tc_ns is not None:
            lines += ["==> tc-batch-stat <==", stat(41, "tc", 0, 0),
                      "==> tc-batch-schedstat <==", f"{tc_ns} 0 0"]
        return [*lines, END]

    # 100 ms per core between samples: the loop 300 us, the server 200, tc 500: 1 %.
    got = costs([with_tc(1000, (100_000_000, 200_000_000), 50_000_000),
                 with_tc(1010, (100_300_000, 200_200_000), 50_500_000),
                 with_tc(1020, (100_600_000, 200_400_000), None),
                 with_tc(1030, (100_900_000, 200_600_000), None)])
    assert got == [pytest.approx(1.0), pytest.approx(0.5)]
