"""What a VM's boot error shows of its console (hoplab.lab.vm.qemu.console_tail): the
end of QEMU's messages and the guest's console, and when the guest kernel oopsed, the
lines that say what and where, which its last 25 lines may not hold.
tests/data/vm/panic_nf_nat_tail.txt is the end of a real console: Debian's 6.12 guest
under TCG, panicking in nf_nat while a `lab up` of examples/vm/lab.toml waited for its
SSH server."""

from __future__ import annotations

from pathlib import Path

from hoplab.lab.vm.qemu import SERIAL_LOG, console_tail, oops

DATA = Path(__file__).resolve().parents[1] / "data" / "vm"
TAIL = (DATA / "panic_nf_nat_tail.txt").read_text()
HEAD = """[    8.951012] int3: 0000 [#1] PREEMPT SMP NOPTI
[    8.951013] CPU: 1 UID: 0 PID: 0 Comm: swapper/1 Not tainted 6.12.100+deb12-amd64 #1
[    8.951014] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI
[    8.951020] RIP: 0010:hash_by_src+0x4b/0x130 [nf_nat]
"""


def test_the_oops_lines_of_a_panic_name_where_and_what() -> None:
    assert oops(TAIL) == [
        "[    8.954740] RIP: 0010:hash_by_src+0x4b/0x130 [nf_nat]",
        "[    8.954740] Kernel panic - not syncing: Fatal exception in interrupt"]
    # With its start on the console too, the kind of oops comes first, and the first RIP.
    assert oops("[    1.0] booting\n" + HEAD + TAIL) == [
        "[    8.951014] Oops: int3: 0000 [#1] PREEMPT SMP NOPTI",
        "[    8.951020] RIP: 0010:hash_by_src+0x4b/0x130 [nf_nat]",
        "[    8.954740] Kernel panic - not syncing: Fatal exception in interrupt"]


def test_a_console_without_an_oops_says_none() -> None:
    clean = "[    0.5] RIP: 0010:in_a_warning+0x1\n[    2.1] hoplab-ready 2.1\n"
    assert oops(clean) == []


def test_the_error_leads_with_the_oops_then_the_consoles_end(tmp_path: Path) -> None:
    (tmp_path / SERIAL_LOG).write_text("[    1.0] booting\n" * 100 + HEAD + TAIL)
    shown = console_tail(tmp_path)
    assert shown.index("the guest kernel oopsed:\n[    8.951014] Oops: int3") < \
        shown.index("(last 25 lines)")
    assert shown.rstrip().endswith("Kernel Offset: disabled")
    assert "booting" not in shown
