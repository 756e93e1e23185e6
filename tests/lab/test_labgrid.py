"""A device named by a labgrid place, with a real coordinator and exporter (labgrid 26):
the exporter's NetworkService says where the emulated device's SSH server is, the lab
file names only the place, and hoplab holds the place while the lab is up (lab up, a
run, taken back after the run) and gives it back at lab down, at clean after a run
that did not end, and when the build fails. A place that cannot be had is refused with
exit 2 at the node's key, leaving nothing behind."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import replace
from ipaddress import ip_address
from pathlib import Path

import pytest

from hoplab.errors import SpecError
from hoplab.lab import build
from hoplab.lab.devices import labgrid
from hoplab.lab.state import LabState, find
from hoplab.spec import load_lab
from hoplab.store.store import open_store
from tests.helpers.device_labs import configure, nic_names
from tests.helpers.devices import Device, Farm, farm
from tests.helpers.lab import HOPLAB, hoplab, lab_namespaces
from tests.helpers.labgrid import Grid, grid

pytestmark = pytest.mark.root

LAB = '''name = "{name}"
[nodes.client]
[nodes.exit]
labgrid = "{place}"
ssh_options = {{ identity = "{identity}", known_hosts = "{known_hosts}" }}
[[links]]
between = ["client", "exit"]
attach = {{ client = "{nic}" }}
addresses = {{ client = "{client}/24" }}
'''

EXPERIMENT = '''lab = "lab.toml"
[[tests]]
name = "to-exit"
kind = "udp"
from = "client"
to = "exit"
rate = "10mbit"
length = 1200
duration = "1s"
'''


@pytest.fixture(scope="module")
def devices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Farm]:
    with farm(tmp_path_factory.mktemp("farm")) as f:
        yield f


@pytest.fixture(scope="module")
def coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Grid]:
    with grid(tmp_path_factory.mktemp("labgrid")) as g:
        yield g


@pytest.fixture(scope="module")
def exit_board(devices: Farm) -> tuple[Device, str]:
    """A server whose one address serves SSH and the flows (test_devices_remote_end's):
    a bridge of its management port and the port cabled to this machine holds it."""
    board = devices.add("linux-board")
    nic = nic_names("c")["c"]
    board.cable("wan0", nic)
    mgmt = f"{board.name}d"
    last = int(board.address.rsplit(".", 1)[1])
    gateway = board.address.rsplit(".", 1)[0] + f".{last - 1}"
    mac = board.exec("cat", f"/sys/class/net/{mgmt}/address").stdout.strip()
    configure(board, ["sh", "-c", " && ".join([
        f"ip link add br0 address {mac} type bridge", f"ip link set {mgmt} master br0",
        "ip link set wan0 master br0", "ip link set wan0 up", "ip link set br0 up",
        f"ip addr del {board.address}/30 dev {mgmt}",
        f"ip addr add {board.address}/24 dev br0",
        f"ip route replace default via {gateway} dev br0"])])
    return board, nic


@pytest.fixture(scope="module")
def place(coordinator: Grid, exit_board: tuple[Device, str]) -> str:
    """A place whose NetworkService is the board's SSH server, made as a person makes it."""
    board, _nic = exit_board
    return coordinator.place(coordinator.exporter("board", address=board.address,
                                                  username="root", port=22))


def _lab(tmp_path: Path, name: str, place: str, board: Device, nic: str) -> Path:
    here = ip_address(board.address)
    client = here + 128 if here.packed[3] < 128 else here - 128
    path = tmp_path / "lab.toml"
    path.write_text(LAB.format(name=name, place=place, identity=board.farm.identity,
                               known_hosts=board.farm.known_hosts, nic=nic, client=client))
    return path


def _hoplab(*args: str) -> tuple[int, str, str]:
    done = hoplab(*args)
    return done.returncode, done.stdout, done.stderr


def test_a_place_is_held_while_its_lab_is_up_and_a_run_reaches_its_device(
        coordinator: Grid, exit_board: tuple[Device, str], place: str, tmp_path: Path,
        lab_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    board, nic = exit_board
    # The coordinator as labgrid's own tools find it.
    monkeypatch.setenv("LG_COORDINATOR", coordinator.address)
    lab = _lab(tmp_path, lab_name, place, board, nic)
    # lab up: the place is acquired by this user on this machine, the device reached at
    # the address its NetworkService gives (the lab file has none).
    code, out, err = _hoplab("lab", "up", str(lab), "--json")
    assert code == 0, out + err
    exit_node = json.loads(out)["nodes"]["exit"]
    assert exit_node["ssh"]["destination"] == f"root@{board.address}"
    assert exit_node["labgrid"] == {"place": place}
    me = f"{socket.gethostname()}/root"
    assert coordinator.holder(place) == (me, 1)
    # A run takes the lab over (the place given back, then held for the runs' lab), and
    # builds it again after: the place is held again.
    (tmp_path / "exp.toml").write_text(EXPERIMENT)
    db = tmp_path / "runs.db"
    code, out, err = _hoplab("run", str(tmp_path / "exp.toml"), "--db", str(db),
                             "--lab-name", lab_name)
    assert code == 0, out + err
    with open_store(str(db)) as store:
        run = store.get_run(1, raw=True)
    assert run.status == "ok", run.error
    raw = next(r for r in run.raw if r.name.endswith("iperf3"))
    assert json.loads(raw.data)["start"]["connected"][0]["remote_host"] == board.address
    assert coordinator.holder(place) == (me, 1)
    # The lab's owner (lab up) has exited, as a killed run's has: clean gives the place
    # back and cancels the reservation, from the lab's record alone.
    code, out, err = _hoplab("clean", lab_name)
    assert code == 0, out + err
    assert coordinator.holder(place) == (None, 0)
    assert coordinator.acquired(place) is None
    assert find(lab_name) is None and not lab_namespaces(lab_name)


def test_a_place_held_by_someone_else_is_refused_naming_them(
        coordinator: Grid, exit_board: tuple[Device, str], place: str, tmp_path: Path,
        lab_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    board, nic = exit_board
    monkeypatch.setenv("LG_COORDINATOR", coordinator.address)
    coordinator.client("-p", place, "acquire", user="alice")
    try:
        lab = _lab(tmp_path, lab_name, place, board, nic)
        code, out, err = _hoplab("lab", "up", str(lab))
        assert code == 2, out + err
        assert f"{lab}:4: nodes.exit.labgrid:" in err, err
        assert f"is acquired by {socket.gethostname()}/alice" in err, err
        # Nothing left: no record, no namespace, no reservation; hers stays hers.
        assert find(lab_name) is None and not lab_namespaces(lab_name)
        assert coordinator.holder(place) == (f"{socket.gethostname()}/alice", 0)
        # A killed run's record naming this place, under a reservation of its own, and
        # its user: clean releases nothing that was acquired since without it.
        old = LabState(name=lab_name, source=str(lab), labgrid=[{
            "node": "exit", "place": place, "coordinator": coordinator.address,
            "user": f"{socket.gethostname()}/alice", "token": "HLOLDTOKEN"}])
        assert labgrid.release(old) == []
        assert coordinator.holder(place) == (f"{socket.gethostname()}/alice", 0)
    finally:
        coordinator.client("-p", place, "release", user="alice")


def test_a_run_stopped_by_sigterm_gives_the_place_back(
        coordinator: Grid, exit_board: tuple[Device, str], place: str, tmp_path: Path,
        lab_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    board, nic = exit_board
    monkeypatch.setenv("LG_COORDINATOR", coordinator.address)
    _lab(tmp_path, lab_name, place, board, nic)
    exp = tmp_path / "exp.toml"
    exp.write_text(EXPERIMENT.replace('duration = "1s"', 'duration = "30s"'))
    db = tmp_path / "runs.db"
    proc = subprocess.Popen([*HOPLAB, "run", str(exp), "--db", str(db), "--lab-name", lab_name],
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        # Once the lab is up, the run is under way on the device, holding its place.
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            state = find(lab_name)
            if state is not None and state.status == "up":
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the run ended before it could be stopped"
        assert coordinator.holder(place) == (f"{socket.gethostname()}/root", 1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, err
    assert coordinator.holder(place) == (None, 0)
    assert find(lab_name) is None and not lab_namespaces(lab_name)


def test_problems_with_a_place_are_refused_at_its_key(
        coordinator: Grid, exit_board: tuple[Device, str], place: str, tmp_path: Path,
        lab_name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    board, nic = exit_board
    monkeypatch.setenv("LG_COORDINATOR", coordinator.address)
    bare = coordinator.place()     # matches no NetworkService
    lab = load_lab(_lab(tmp_path, lab_name, bare, board, nic))

    def refused(at: str, *said: str) -> None:
        with pytest.raises(SpecError) as e:
            build.up(lab)
        assert e.value.exit_code == 2 and e.value.key == at, str(e.value)
        for words in said:
            assert words in str(e.value), str(e.value)
        assert find(lab.name) is None and not lab_namespaces(lab.name)

    refused("nodes.exit.labgrid", f"labgrid place {bare!r} has no NetworkService")
    # Held, then the device refuses (its host key is not known): the place is given back.
    (tmp_path / "known_hosts").write_text("")
    unknown = load_lab(_lab(tmp_path, lab_name, place, board, nic))
    unknown = replace(unknown, nodes=tuple(
        replace(n, labgrid=replace(n.labgrid, known_hosts=str(tmp_path / "known_hosts")))
        if n.labgrid else n for n in unknown.nodes))
    with pytest.raises(SpecError) as e:
        build.up(unknown)
    assert e.value.key == "nodes.exit.labgrid", str(e.value)
    assert f"device exit (root@{board.address}, labgrid place {place}):" in str(e.value)
    assert coordinator.holder(place) == (None, 0)
    assert find(lab_name) is None and not lab_namespaces(lab_name)
    lab = replace(lab, nodes=tuple(
        replace(n, labgrid=replace(n.labgrid, place="hl-nosuch")) if n.labgrid else n
        for n in lab.nodes))
    refused("nodes.exit.labgrid", "no labgrid place 'hl-nosuch'", bare)
    # Nothing listens there once the socket is closed: a refused connection.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("LG_COORDINATOR", f"127.0.0.1:{port}")
    refused("nodes.exit.labgrid", f"cannot reach the labgrid coordinator at 127.0.0.1:{port} "
                                  "(from $LG_COORDINATOR)")
    lab = replace(lab, nodes=tuple(
        replace(n, labgrid=replace(n.labgrid, coordinator=f"127.0.0.1:{port}"))
        if n.labgrid else n for n in lab.nodes))
    refused("nodes.exit.labgrid_coordinator", f"127.0.0.1:{port} (labgrid_coordinator)")
