"""Devices named by a labgrid place (`labgrid = "PLACE"` in a lab file).

Where a team runs labgrid (OpenWrt's device farm does), its coordinator knows each
device as a place, and where the device's SSH server is as the place's NetworkService
resource (address, username, port). A lab with such a node reserves the place (a
reservation filtered on its name, as `labgrid-client reserve name=PLACE` makes) and
acquires it, takes the device's SSH destination from that resource, and at lab down
releases the place and cancels the reservation: also after a failed build, and at
`hoplab clean` after a killed one, since each place is written to the lab's state
record before it is reserved. A place acquired by anyone (this user too: another run
may hold it), or reserved for someone else, is refused at once, naming who holds it.

labgrid, and gRPC under it, is imported here only, and only for a lab naming a place.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Coroutine, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from hoplab.lab.devices.errors import spec_error
from hoplab.lab.state import LabState
from hoplab.nodes import ssh_address
from hoplab.spec.devices import coordinator as check_coordinator
from hoplab.spec.model import Lab, Node, SshTarget

# labgrid-client's coordinator without -x or $LG_COORDINATOR.
DEFAULT_COORDINATOR = "127.0.0.1:20408"
CONNECT_TIMEOUT_S = 10.0
RPC_TIMEOUT_S = 30.0
T = TypeVar("T")


@dataclass(frozen=True)
class _Want:
    """A node's place, and the coordinator that knows it (and where that came from)."""
    node: Node
    address: str
    said: str   # how the address was given, for messages
    key: str    # the lab file's key a problem with the coordinator is reported at
    lab: str    # the lab's name, for messages

    @property
    def place(self) -> str:
        assert self.node.labgrid is not None
        return self.node.labgrid.place


class _Refused(Exception):
    """A place that cannot be had, said as the message for the node's key."""

    def __init__(self, want: _Want, message: str, key: str = "labgrid") -> None:
        super().__init__(message)
        self.want, self.key = want, key


def named(lab: Lab) -> list[Node]:
    return [n for n in lab.nodes if n.labgrid is not None]


def look_up(lab: Lab) -> Lab:
    """`lab` with each place's device reached where its NetworkService says, touching
    nothing (hoplab check --devices, a run's checks before its first run): the same
    refusals as hold(), for a place someone holds now."""
    wants = _wants(lab)
    if not wants:
        return lab
    return _resolved(lab, _run(lab, _each(wants, None)))


def hold(lab: Lab, state: LabState) -> Lab:
    """Reserve and acquire every place `lab` names, each written to `state` (saved)
    before it is reserved; `lab` with each such device's SSH destination from its
    place. A place that cannot be had is a SpecError at its node's key; what was taken
    by then is in `state`, for the caller's teardown to give back (release())."""
    wants = _wants(lab)
    if not wants:
        return lab
    return _resolved(lab, _run(lab, _each(wants, state)))


def release(state: LabState) -> list[str]:
    """Release each place `state` says this lab acquired and cancel its reservation;
    one acquired by anyone else, or under another reservation, is left alone. Warnings
    say what could not be done and how to do it by hand."""
    entries = [e for e in state.labgrid if e.get("token")]
    if not entries:
        return []
    by_address: dict[str, list[dict[str, Any]]] = {}
    for e in entries:
        by_address.setdefault(str(e["coordinator"]), []).append(e)
    warnings: list[str] = []
    for address, some in by_address.items():
        try:
            with _labgrid_logs():
                warnings += _run_async(_release(address, some))
        except Exception as exc:  # teardown goes on: say what is left to do by hand
            warnings += [f"labgrid place {e['place']} (node {e['node']}): not released "
                         f"({exc}); labgrid-client -x {address} -p {e['place']} release, "
                         f"then labgrid-client -x {address} cancel-reservation {e['token']}"
                         for e in some]
    return warnings


# --- finding and taking places -------------------------------------------------------------


def _wants(lab: Lab) -> list[_Want]:
    out = []
    env = os.environ.get("LG_COORDINATOR")
    for node in named(lab):
        assert node.labgrid is not None
        if node.labgrid.coordinator:
            out.append(_Want(node, node.labgrid.coordinator, "labgrid_coordinator",
                             "labgrid_coordinator", lab.name))
            continue
        if env:
            try:
                check_coordinator(env)
            except ValueError as exc:
                raise spec_error(lab, ("nodes", node.name, "labgrid"),
                                 f"$LG_COORDINATOR: {exc}") from None
            out.append(_Want(node, env, "from $LG_COORDINATOR", "labgrid", lab.name))
        else:
            out.append(_Want(node, DEFAULT_COORDINATOR, "labgrid's default; set "
                             "$LG_COORDINATOR or labgrid_coordinator", "labgrid", lab.name))
    # One order for every lab: two labs naming the same places take them alike.
    return sorted(out, key=lambda w: (w.address, w.place))


def _run(lab: Lab, coro: Coroutine[Any, Any, dict[str, SshTarget]]) -> dict[str, SshTarget]:
    """Run `coro`; its refusal becomes the SpecError at the node's key."""
    try:
        with _labgrid_logs():
            return _run_async(coro)
    except _Refused as r:
        raise spec_error(lab, ("nodes", r.want.node.name, r.key),
                         f"device {r.want.node.name}: {r}") from None


def _resolved(lab: Lab, targets: Mapping[str, SshTarget]) -> Lab:
    nodes = tuple(replace(n, ssh=targets[n.name]) if n.name in targets else n
                  for n in lab.nodes)
    return replace(lab, nodes=nodes)


async def _each(wants: Sequence[_Want], state: LabState | None) -> dict[str, SshTarget]:
    """Each place found (and with `state`, reserved and acquired), coordinator by
    coordinator; the SSH target of each node."""
    targets: dict[str, SshTarget] = {}
    for address in dict.fromkeys(w.address for w in wants):
        mine = [w for w in wants if w.address == address]
        session = await _connect_for(mine[0])
        try:
            for want in mine:
                found = _find(session, want)
                if state is not None:
                    await _take(session, want, state)
                targets[want.node.name] = found
        finally:
            await _close(session)
    return targets


async def _connect_for(want: _Want) -> Any:
    try:
        return await _connect(want.address)
    except _Unreachable as exc:
        raise _Refused(want, f"cannot reach the labgrid coordinator at {want.address} "
                             f"({want.said}): {exc}", want.key) from None


def _find(session: Any, want: _Want) -> SshTarget:
    """The device's SSH target from the place's NetworkService; refused if the place
    is unknown, held, reserved for another, or has no one NetworkService."""
    place = session.places.get(want.place)
    if place is None:
        known = sorted(session.places)
        listed = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
        raise _Refused(want, f"no labgrid place {want.place!r} at the coordinator "
                             f"{want.address} (its places: {listed or 'none'})")
    me = f"{session.gethostname()}/{session.getuser()}"
    if place.acquired:
        raise _Refused(want, _held(want, place.acquired, place.changed, me))
    return _target(want, _service(session, want, place))


def _held(want: _Want, by: str, since: float, me: str) -> str:
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))
    said = f"labgrid place {want.place!r} is acquired by {by} (since {when})"
    if by == me:
        return (f"{said}: this user on this machine, in another hoplab run or "
                f"labgrid-client; if a killed run of lab {want.lab} held it, hoplab clean "
                f"{want.lab} releases it, else labgrid-client -p {want.place} release")
    return f"{said}; hoplab runs on a place nobody holds: ask {by.split('/')[-1]} to release it"


def _service(session: Any, want: _Want, place: Any) -> dict[str, Any]:
    """The params of the place's one NetworkService resource."""
    found = []
    for exporter, groups in sorted(session.resources.items()):
        for group, resources in sorted(groups.items()):
            for name, entry in sorted(resources.items()):
                path = (exporter, group, entry.data.get("cls", ""), name)
                if path[2] == "NetworkService" and place.hasmatch(path):
                    found.append(("/".join(path), entry))
    matches = ", ".join(repr(m) for m in place.matches) or "none"
    if not found:
        raise _Refused(want, f"labgrid place {want.place!r} has no NetworkService resource "
                             f"(its matches: {matches}; is its exporter running?): hoplab "
                             f"reaches a device over SSH where a NetworkService says")
    if len(found) > 1:
        raise _Refused(want, f"labgrid place {want.place!r} has {len(found)} NetworkService "
                             f"resources ({', '.join(p for p, _ in found)}): hoplab needs "
                             f"one, to know which address is the device's")
    where, entry = found[0]
    if not entry.avail:
        raise _Refused(want, f"labgrid place {want.place!r}: its NetworkService {where} is "
                             f"not available (is its exporter running?)")
    return dict(entry.params)


def _target(want: _Want, params: Mapping[str, Any]) -> SshTarget:
    """Where the NetworkService says, checked as a lab file's `ssh` is (the coordinator
    is a network service: nothing it says may read as an option or a second word)."""
    grid = want.node.labgrid
    assert grid is not None
    address, user, port = params.get("address"), params.get("username"), params.get("port", 22)
    host = f"[{address}]" if isinstance(address, str) and ":" in address else address
    destination = f"{user}@{host}" if user else str(host)
    try:
        ssh_address.split_destination(destination)
        ssh_address.port(port)
    except ValueError as exc:
        raise _Refused(
            want, f"labgrid place {want.place!r}: its NetworkService: {exc}") from None
    extra = params.get("extra") or {}
    if extra.get("proxy_required") and grid.jump is None:
        raise _Refused(want, f"labgrid place {want.place!r}: its NetworkService "
                             f"({destination}) is reached through its exporter's host "
                             f"{extra.get('proxy')!r} (labgrid's proxy): give "
                             f'ssh_options = {{ jump = "USER@{extra.get("proxy")}" }}',
                       "labgrid")
    return SshTarget(destination=destination, port=port, identity=grid.identity,
                     jump=grid.jump, known_hosts=grid.known_hosts)


async def _take(session: Any, want: _Want, state: LabState) -> None:
    """Reserve the place, then acquire it under that reservation; each step written to
    `state` first, so whatever a kill leaves is released by hoplab clean."""
    from labgrid.remote.common import Reservation, ReservationState
    from labgrid.remote.generated import labgrid_coordinator_pb2 as pb

    me = f"{session.gethostname()}/{session.getuser()}"
    entry: dict[str, Any] = {"node": want.node.name, "place": want.place,
                             "coordinator": want.address, "user": me, "token": None}
    state.labgrid.append(entry)
    state.save()
    got = await _rpc(want, session.stub.CreateReservation(pb.CreateReservationRequest(
        filters={"main": pb.Reservation.Filter(filter={"name": want.place})}, prio=0.0),
        timeout=RPC_TIMEOUT_S))
    reservation = Reservation.from_pb2(got.reservation)
    entry["token"] = reservation.token
    state.save()
    if reservation.state is not ReservationState.allocated:
        # Acquired since _find looked, or an older reservation is first in the queue.
        await session.sync_with_coordinator()
        place = session.places.get(want.place)
        if place is not None and place.acquired:
            raise _Refused(want, _held(want, place.acquired, place.changed, me))
        owner = await _reserved_for(session, want.place)
        raise _Refused(want, f"labgrid place {want.place!r} is reserved for "
                             f"{owner or 'another reservation'}; hoplab runs on a place "
                             f"nobody holds")
    await _rpc(want, session.stub.AcquirePlace(pb.AcquirePlaceRequest(
        placename=want.place), timeout=RPC_TIMEOUT_S))
    await session.sync_with_coordinator()
    place = session.places.get(want.place)
    if place is None or place.acquired != me:
        raise _Refused(want, f"labgrid place {want.place!r} was acquired but the coordinator "
                             f"says it is held by {getattr(place, 'acquired', None)}")


async def _reserved_for(session: Any, name: str) -> str | None:
    from labgrid.remote.generated import labgrid_coordinator_pb2 as pb

    place = session.places.get(name)
    token = getattr(place, "reservation", None)
    if not token:
        return None
    got = await session.stub.GetReservations(pb.GetReservationsRequest(),
                                             timeout=RPC_TIMEOUT_S)
    owner = next((r.owner for r in got.reservations if r.token == token), None)
    return f"{owner} (reservation {token})" if owner else f"reservation {token}"


async def _rpc(want: _Want, call: Any) -> Any:
    import grpc

    try:
        return await call
    except grpc.aio.AioRpcError as exc:
        raise _Refused(want, f"labgrid place {want.place!r}: the coordinator at "
                             f"{want.address} refused: {exc.details()}") from None


# --- releasing -----------------------------------------------------------------------------


async def _release(address: str, entries: Sequence[Mapping[str, Any]]) -> list[str]:
    import grpc
    from labgrid.remote.generated import labgrid_coordinator_pb2 as pb

    session = await _connect(address)
    warnings = []
    try:
        for e in entries:
            place = session.places.get(e["place"])
            try:
                if (place is not None and place.acquired == e["user"]
                        and place.reservation == e["token"]):
                    await session.stub.ReleasePlace(pb.ReleasePlaceRequest(
                        placename=e["place"], fromuser=e["user"]), timeout=RPC_TIMEOUT_S)
                await session.stub.CancelReservation(pb.CancelReservationRequest(
                    token=e["token"]), timeout=RPC_TIMEOUT_S)
            except grpc.aio.AioRpcError as exc:
                # A reservation the coordinator forgot (it expired, or the coordinator
                # restarted, which also drops every acquisition) is no longer held.
                if "does not exist" not in (exc.details() or ""):
                    warnings.append(f"labgrid place {e['place']} (node {e['node']}): "
                                    f"{exc.details()}")
        await session.sync_with_coordinator()
        for e in entries:
            place = session.places.get(e["place"])
            if (place is not None and place.acquired == e["user"]
                    and place.reservation == e["token"]):
                warnings.append(f"labgrid place {e['place']} (node {e['node']}): still "
                                f"acquired after release; labgrid-client -x {address} "
                                f"-p {e['place']} release")
    finally:
        await _close(session)
    return warnings


# --- the coordinator -----------------------------------------------------------------------


class _Unreachable(Exception):
    """No session with the coordinator; the message says why, as gRPC told it."""


async def _connect(address: str) -> Any:
    """A labgrid client session: every place and resource, as the coordinator sent them."""
    from labgrid.remote.client import ClientSession, ServerError
    from labgrid.util.proxy import proxymanager

    said = _said
    session = ClientSession(proxymanager.get_grpc_address(address, default_port=20408),
                            asyncio.get_running_loop())
    try:
        await asyncio.wait_for(session.start(), CONNECT_TIMEOUT_S)
    except (ServerError, TimeoutError) as exc:
        await _close(session)
        why = said[-1] if said else (str(exc) or "no answer within "
                                     f"{CONNECT_TIMEOUT_S:g} s")
        raise _Unreachable(why.removeprefix("coordinator is unavailable: ")) from None
    except BaseException:
        await _close(session)
        raise
    return session


async def _close(session: Any) -> None:
    try:
        if session.pump_task is not None:
            await session.stop()
    finally:
        await session.close()


# What labgrid logged while a session of ours ran (its own way of saying why).
_said: list[str] = []


@contextmanager
def _labgrid_logs() -> Iterator[list[str]]:
    """labgrid reports through the root logger (a refused connection is a
    logging.error, which on a root logger without handlers would add one printing to
    stderr for the rest of the process): its warnings are kept for our messages."""
    said = _said
    said.clear()

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.levelno >= logging.WARNING:
                said.append(record.getMessage())

    keep = Keep()
    root = logging.getLogger()
    root.addHandler(keep)
    try:
        yield said
    finally:
        root.removeHandler(keep)


def _run_async(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine on an event loop of its own: in this thread, or where this thread
    already runs one (a bench's queue worker may), in a thread of its own."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()

