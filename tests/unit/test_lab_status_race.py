"""`hoplab lab status` while another command takes a lab down: a namespace that is gone
by the time status enters it is reported missing, never an error (a CI run's `lab
status` failed with "network namespace ... does not exist" on another test's lab)."""

from __future__ import annotations

from typing import Any

import pytest

from hoplab.errors import LabError
from hoplab.lab import status
from hoplab.lab.state import LabState
from hoplab.nodes import netns


def _state() -> LabState:
    node = {"netns": "hoplab-gone.a", "forward": False, "interfaces": [
        {"name": "eth0", "kind": "veth", "peer": "b", "link": 0, "addresses": []}]}
    return LabState(name="gone", source="lab.toml", status="up", created=0.0,
                    summary={"nodes": {"a": node}, "links": []})


def test_a_namespace_gone_while_status_reads_it_is_missing(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(netns, "exists", lambda _ns: True)

    def vanished(_node: str, ns: str) -> dict[str, Any]:
        raise LabError(f"network namespace {ns} does not exist")

    monkeypatch.setattr(status, "_links_state", vanished)
    got = status.lab_status(_state())
    assert got["nodes"]["a"]["present"] is False and got["nodes"]["a"]["link_state"] == {}
    assert got["status"] == "degraded"
    assert "namespace hoplab-gone.a is missing" in got["problems"]
