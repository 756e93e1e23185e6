"""`hoplab lab fetch`: what a lab's VMs boot, made ahead of `lab up` (docs/vm.md).

`make setup` runs it on examples/vm/kernels.toml, so here both of its kernels are in
the cache and the accelerator is remembered: the command says so and takes well under
a second a kernel. A cold cache (the first fetch, 6.5 and 12.8 s here) is
bench/vm.py's."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from hoplab.lab.vm import accel, fetch
from hoplab.spec.check import check_file
from tests.helpers.lab import hoplab

pytestmark = [pytest.mark.root,
              pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None,
                                 reason="qemu-system-x86 is not installed")]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "vm"
KERNELS = ["debian:6.1.0-47-amd64", "debian:6.12.100+deb12-amd64"]


def test_every_variants_kernel_once_and_firmware_images_none() -> None:
    labs = check_file(str(EXAMPLES / "kernels.toml")).labs()
    assert len(labs) == 2
    assert fetch.kernels(labs + labs) == [(k, None) for k in KERNELS]
    firmware = check_file(str(EXAMPLES / "firmware-lab.toml"))
    assert firmware.problems == [] and fetch.kernels(firmware.labs()) == []


def test_a_second_fetch_finds_everything_in_the_cache() -> None:
    first = hoplab("lab", "fetch", str(EXAMPLES / "kernels.toml"), timeout=600)
    assert first.returncode == 0, first.stderr
    t0 = time.monotonic()
    proc = hoplab("lab", "fetch", str(EXAMPLES / "kernels.toml"), str(EXAMPLES / "lab.toml"))
    took = time.monotonic() - t0
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert [line.rsplit(" ", 2)[0] for line in lines[:2]] == [
        f"kernel {k}: release {k.removeprefix('debian:')}, in the cache; ready in"
        for k in KERNELS], lines
    # Reading the cache: a few ms.
    assert all(float(line.split()[-2]) < 1 for line in lines[:2]), lines
    known = accel.remembered()
    assert known is not None and lines[2] == f"accelerator {known['accel']} ({known['why']})"
    assert len(lines) == 3
    # The CLI's start and the files' checks: 0.43 s here.
    assert took < 3, took


def test_bad_input_names_the_file_and_fetches_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "nope.toml"
    proc = hoplab("lab", "fetch", str(missing))
    assert proc.returncode == 2
    assert str(missing) in proc.stderr and proc.stdout == ""
    lab = tmp_path / "lab.toml"
    lab.write_text('name = "x"\n[nodes.r1]\nvm = { kernel = "debian:6.12", vcpus = 0 }\n')
    proc = hoplab("lab", "fetch", str(lab))
    assert proc.returncode == 2 and f"{lab}:3: " in proc.stderr, proc.stderr
    proc = hoplab("lab", "fetch", str(EXAMPLES.parent / "router.toml"))
    assert proc.returncode == 0 and proc.stdout.startswith("no VM in these files boots"), \
        proc.stdout
