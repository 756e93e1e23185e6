"""A web flow whose server is a device reached over SSH: nginx's files are sent there,
nginx runs there, and both are gone after the run; a device without nginx is refused
before anything runs, naming the packages that bring it."""

from __future__ import annotations

import glob
import json
import tempfile
from pathlib import Path

import pytest

from hoplab.store import open_store
from hoplab.tools import pageload
from tests.helpers.device_labs import configure, nic_names
from tests.helpers.devices import Device, Farm
from tests.helpers.lab import hoplab

pytestmark = pytest.mark.root

LAB = '''name = "{name}"
[nodes.a]
[nodes.srv]
ssh = "root@{address}"
ssh_options = {{ identity = "{identity}", known_hosts = "{known_hosts}" }}
[[links]]
between = ["a", "srv"]
attach = {{ a = "{nic}" }}
addresses = {{ a = "192.168.77.2/24", srv = "192.168.77.1" }}
'''

EXPERIMENT = '''lab = "lab.toml"
[[tests]]
name = "page"
kind = "web"
from = "a"
to = "srv"
objects = 2
object_size = "1kb"
loads = 2
timeout = "10s"
'''


def cabled(farm: Farm, kind: str) -> tuple[Device, str]:
    """A device with port eth1 on 192.168.77.1/24, cabled to a fresh NIC here."""
    nic = nic_names("w")["w"]
    dev = farm.add(kind)  # type: ignore[arg-type]
    dev.cable("eth1", nic)
    configure(dev, ["ip", "addr", "add", "192.168.77.1/24", "dev", "eth1"],
              ["ip", "link", "set", "eth1", "up"])
    return dev, nic


def run(tmp_path: Path, lab_name: str, dev: Device, nic: str) -> tuple[int, str, Path]:
    (tmp_path / "lab.toml").write_text(LAB.format(
        name=lab_name, address=dev.address, identity=dev.farm.identity,
        known_hosts=dev.farm.known_hosts, nic=nic))
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    db = tmp_path / "runs.db"
    got = hoplab("run", str(tmp_path / "exp.toml"), "--db", str(db), "--lab-name", lab_name,
                 "--json", timeout=120)
    return got.returncode, got.stdout + got.stderr, db


def test_a_page_served_by_a_device(device_farm: Farm, tmp_path: Path, lab_name: str) -> None:
    board, nic = cabled(device_farm, "linux-board")
    code, out, db = run(tmp_path, lab_name, board, nic)
    assert code == 0, out
    with open_store(str(db)) as store:
        (summary,) = store.list_runs()
        rec = store.get_run(summary.id, raw=True)
    assert rec.status == "ok", rec.error
    (raw,) = [r for r in rec.raw if r.media_type == "application/x-ndjson"]
    res = pageload.parse(raw.data.decode())
    # The browser on a loaded the page from the board's address on the cable.
    assert res.url == "http://192.168.77.1:8080/", res.url
    assert [(x.ok, x.status, x.objects) for x in res.loads] == [(True, 200, 2)] * 2
    # nginx ran on the board and is gone; its directory there too.
    assert not {p for p in board.pids()
                if Path(f"/proc/{p}/comm").read_text().strip() == "nginx"}
    assert board.exec("sh", "-c", "ls -d /tmp/hoplab-run-*-server-* 2>/dev/null").stdout == ""
    assert not glob.glob(f"{tempfile.gettempdir()}/hoplab-run-*-server-*")
    json.loads(out[:out.rindex("}") + 1])  # --json printed the run


def test_a_device_without_nginx_is_refused_naming_its_packages(
        device_farm: Farm, tmp_path: Path, lab_name: str) -> None:
    # The OpenWrt-like device has BusyBox, dropbear, iperf3 and irtt: no nginx.
    owrt, nic = cabled(device_farm, "openwrt-like")
    code, out, db = run(tmp_path, lab_name, owrt, nic)
    assert code == 2, out
    assert (f"{tmp_path / 'lab.toml'}:4: nodes.srv.ssh: device srv lacks nginx, which test "
            "'page' needs: opkg install nginx-ssl (or nginx-full) (OpenWrt) or apt-get install "
            "nginx (Debian, Ubuntu)") in out, out
    # Refused before the first run: nothing stored.
    if db.exists():
        with open_store(str(db)) as store:
            assert store.list_runs() == []
