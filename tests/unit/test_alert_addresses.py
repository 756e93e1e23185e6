"""Where an alert may go (issue 29, part 5): never a link-local or metadata address
(literal, or what a name resolves to) unless the schedule allows it; a redirect is not
followed and not a delivery. Real HTTP servers on 127.0.0.1; names resolved through a
stand-in for getaddrinfo, so no DNS is asked."""

from __future__ import annotations

import json
import socket
from typing import Any

import pytest

from hoplab.errors import UsageError
from hoplab.fleet.schedule import alert_addresses
from hoplab.fleet.schedule.alert_post import post
from hoplab.fleet.schedule.schedules import check_alert
from tests.helpers.webhook import webhook

BODY = json.dumps({"text": "x"}).encode()


@pytest.mark.parametrize(("address", "refused"), [
    ("169.254.169.254", True), ("169.254.0.1", True), ("fe80::1", True),
    ("fe80::1%eth0", True), ("::ffff:169.254.169.254", True), ("fd00:ec2::254", True),
    ("100.100.100.200", True), ("0.0.0.0", True), ("::", True),
    ("127.0.0.1", False), ("::1", False), ("10.1.2.3", False), ("192.0.2.7", False),
    ("2001:db8::1", False), ("100.100.100.201", False),
])
def test_the_rule(address: str, refused: bool) -> None:
    assert alert_addresses.forbidden(address) is refused


@pytest.fixture
def names(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Names the test resolves: name -> address (anything else: as the system does)."""
    table: dict[str, str] = {}
    real = socket.getaddrinfo

    def fake(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host in table:
            host = table[host]
        return real(host, port, *args, **kwargs)
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return table


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data/s3cr3t",
                                 "http://[fe80::1]:8080/hook/s3cr3t",
                                 "https://metadata.test/computeMetadata/s3cr3t"])
def test_schedule_add_refuses_a_link_local_alert_url(names: dict[str, str],
                                                     url: str) -> None:
    names["metadata.test"] = "169.254.169.254"
    with pytest.raises(UsageError) as got:
        check_alert(url)
    assert "--alert http" in str(got.value) and "link-local or metadata" in str(got.value)
    assert "s3cr3t" not in str(got.value)
    assert check_alert(url, link_local=True) == url
    assert check_alert("https://hooks.test/s3cr3t") == "https://hooks.test/s3cr3t"


def test_a_redirect_is_not_followed_and_not_delivered() -> None:
    with webhook() as elsewhere:
        for status in (301, 302, 303, 307, 308):
            with webhook([status], location=elsewhere.url) as moving:
                said = post(moving.url, BODY)
            assert said is not None and said.startswith(f"HTTP {status} "), said
            assert "not followed" in said and "s3cr3t" not in said
        assert elsewhere.received == []     # neither as a POST nor as a GET


def test_a_name_resolving_to_a_metadata_address_is_refused_when_posted(
        names: dict[str, str]) -> None:
    with webhook() as hook:
        port = hook.url.split(":")[2].split("/")[0]
        names["hook.test"] = "127.0.0.1"
        assert post(f"http://hook.test:{port}/ok", BODY) is None   # resolved, checked
        names["hook.test"] = "169.254.169.254"                     # now it points there
        said = post(f"http://hook.test:{port}/s3cr3t", BODY)
        assert said is not None and said.startswith("not reached: ")
        assert "link-local or metadata" in said and "s3cr3t" not in said
        assert len(hook.received) == 1
