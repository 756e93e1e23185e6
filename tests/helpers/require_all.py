"""A pytest plugin: with HOPLAB_REQUIRE_ALL=1 a skipped test fails instead.

A machine that should run every test (CI, and `make test` as root, where `make setup`
installed PostgreSQL, Chromium, perf and the lab tools) must not pass quietly when the
root, PostgreSQL or browser tests skipped themselves because something is missing.
Under HOPLAB_REQUIRE_ALL=1 every skip, at collection or in a test, is reported as a
failure naming its reason, except the few in ALLOWED_SKIPS: the kernel lacks a feature
and no package can add it. tests/conftest.py loads this plugin for the whole suite.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest

REQUIRE_ALL = "HOPLAB_REQUIRE_ALL"

# The skip reasons (exactly as the test gives them) that stay skips under
# HOPLAB_REQUIRE_ALL=1, each with why it is legitimate on a machine that has everything.
ALLOWED_SKIPS: dict[str, str] = {
    "this kernel has no WireGuard module":
        "tests/lab/test_wireguard.py, kernel mode: the running kernel has no wireguard "
        "module and cannot load one (Debian 12's cloud kernel here); no package installs "
        "it into the running kernel. The same tests run in userspace mode (wireguard-go).",
    "control sockets exist only in userspace mode":
        "tests/lab/test_wireguard.py, kernel mode of a check about wireguard-go's control "
        "sockets: there is nothing to check in kernel mode, on any machine.",
}


def required() -> bool:
    return os.environ.get(REQUIRE_ALL, "") not in ("", "0")


def skip_reason(report: pytest.TestReport | pytest.CollectReport) -> str:
    """The reason a skip report gives: its longrepr is (path, line, "Skipped: reason")."""
    longrepr = report.longrepr
    message = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    return message.removeprefix("Skipped: ")


def _fail_unless_allowed(report: pytest.TestReport | pytest.CollectReport) -> None:
    if not report.skipped or hasattr(report, "wasxfail") or not required():
        return
    reason = skip_reason(report)
    if reason in ALLOWED_SKIPS:
        return
    report.outcome = "failed"
    report.longrepr = (f"skipped with {REQUIRE_ALL}=1 (this machine should run every test): "
                       f"{reason}\nInstall what is missing (make setup), or run with "
                       f"{REQUIRE_ALL}=0 to allow skips.")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    report = yield
    assert isinstance(report, pytest.TestReport)
    _fail_unless_allowed(report)
    return report


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector: pytest.Collector
                               ) -> Generator[None, object, object]:
    report = yield
    assert isinstance(report, pytest.CollectReport)
    _fail_unless_allowed(report)
    return report
