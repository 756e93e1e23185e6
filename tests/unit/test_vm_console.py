"""What a VM's boot error shows of its console (hoplab.lab.vm.qemu.console_tail): the
end of QEMU's messages and the guest's console, and when the guest kernel oopsed or
panicked, the lines that say what and where, which its last 25 lines may not hold.

Real consoles (tests/data/vm/, Debian's 6.12 under TCG, 2 vCPUs, resumed from a
snapshot):
- panic_nf_nat_tail.txt: the 25 lines a failed `hoplab run examples/vm/kernels.toml`
  stored, the guest panicking in nf_nat while its lab came up;
- sysrq_crash_serial.log: the whole console of `hoplab lab up examples/vm/lab.toml`,
  then `hoplab lab exec vm-nat r1 -- sh -c 'echo c > /proc/sysrq-trigger'`."""

from __future__ import annotations

from pathlib import Path

from hoplab.lab.vm.qemu import SERIAL_LOG, console_tail, oops

DATA = Path(__file__).resolve().parents[1] / "data" / "vm"
TAIL = (DATA / "panic_nf_nat_tail.txt").read_text()
SYSRQ = (DATA / "sysrq_crash_serial.log").read_text()


def test_the_lines_of_a_panic_name_where_and_what() -> None:
    assert oops(TAIL) == [
        "[    8.954740] RIP: 0010:hash_by_src+0x4b/0x130 [nf_nat]",
        "[    8.954740] Kernel panic - not syncing: Fatal exception in interrupt"]
    assert oops(SYSRQ) == [
        "[   15.968402] RIP: 0033:0x7fd8d7a79350",
        "[   15.964843] Kernel panic - not syncing: sysrq triggered crash"]


def test_a_console_without_a_panic_says_none() -> None:
    # The same console up to the crash: hoplab's lines, dropbear's, none the kernel's.
    before = SYSRQ[:SYSRQ.index("sysrq: Trigger a crash")]
    assert "hoplab-configured 0" in before
    assert oops(before) == []


def test_the_error_leads_with_the_panic_then_the_consoles_end(tmp_path: Path) -> None:
    (tmp_path / SERIAL_LOG).write_text(SYSRQ)
    shown = console_tail(tmp_path)
    assert shown.index("the guest kernel oopsed or panicked:\n[   15.968402] RIP: 0033") < \
        shown.index("(last 25 lines)")
    assert "sysrq triggered crash" in shown
    assert shown.rstrip().endswith("Kernel Offset: disabled")
    assert "Pubkey auth succeeded" not in shown      # before the console's last 25 lines
