"""A store URL's password never reaches the terminal, whatever characters it holds."""

from __future__ import annotations

import os
import subprocess

import pytest

from hoplab.store.url import hide_password, redact, shown_url
from tests.helpers.web import HOPLAB

# Each fails in its own way: refused connection, a port that is no number, no database,
# an unsupported scheme.
URLS = ["postgresql://u:pa/ss@127.0.0.1:1/db", "postgresql://u:pa/ss@127.0.0.1:x/db",
        "postgresql://u:pa/ss@127.0.0.1:1", "mysql://u:pa/ss@127.0.0.1/db",
        "postgres://u:pa%2Fss@127.0.0.1:1/db",
        # The password as libpq's query parameter: the same four ways to fail.
        "postgresql://u@127.0.0.1:1/db?password=pa/ss",
        "postgresql://u@127.0.0.1:x/db?sslmode=disable&password=pa/ss",
        "postgresql://u@127.0.0.1:1?password=pa/ss", "mysql://u@127.0.0.1/db?password=pa/ss"]


@pytest.mark.parametrize("url", URLS)
@pytest.mark.parametrize("command", [["runs"], ["serve", "--port", "0"]])
def test_password_never_printed(url: str, command: list[str]) -> None:
    # The URL given with --db and in $HOPLAB_DB, both at once (each process spends its
    # time starting up).
    procs = [subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env)
             for argv, env in (([HOPLAB, *command, "--db", url], os.environ),
                               ([HOPLAB, *command], {**os.environ, "HOPLAB_DB": url}))]
    # Both reaped before anything is asserted, so a failure leaves no process behind.
    outputs = [proc.communicate(timeout=60) for proc in procs]
    for proc, (out, err) in zip(procs, outputs, strict=True):
        assert proc.returncode == 2, err
        assert "store" in err
        for secret in ("pa/ss", "pa%2Fss", "pa%2fss", "/ss@"):
            assert secret not in err + out, (proc.args, err)


def test_shown_url_uses_sqlalchemys_rendering() -> None:
    assert shown_url("postgresql://u:pa/ss@h:5/db") == "postgresql://u:***@h:5/db"
    assert shown_url("postgresql://u:p%40ss@h/db?sslmode=require") == \
        "postgresql://u:***@h/db?sslmode=require"
    assert shown_url("postgresql://u:pa/ss@h:x/db") == "postgresql://u:***@h:x/db"
    assert shown_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert hide_password("failed: postgresql://u:a:b/c@d@h/db refused") == \
        "failed: postgresql://u:***@h/db refused"
    assert shown_url("postgresql://u@h/db?password=pa/ss&sslmode=require") == \
        "postgresql://u@h/db?password=***&sslmode=require"
    assert shown_url("postgresql://u@h:x/db?Password=pa/ss") == "postgresql://u@h:x/db?Password=***"


def test_redact_masks_the_password_of_the_url_given_wherever_it_appears() -> None:
    # As written in the URL (percent-encoded) and decoded, on its own or in another URL.
    url = "postgresql://u:p%40ss-w0rd@h:5/db"
    text = "'--db' 'postgresql://u:p%40ss-w0rd@h:5/db' said p@ss-w0rd, and p%40ss-w0rd"
    shown = redact(text, url)
    assert "ss-w0rd" not in shown
    assert shown == "'--db' 'postgresql://u:***@h:5/db' said ***, and ***"
    assert redact("no secret here", url) == "no secret here"
    assert redact("see postgresql://v:x@h/db", None) == "see postgresql://v:***@h/db"
    assert redact("sqlite runs.db", "runs.db") == "sqlite runs.db"
    assert redact("'pa/ss' 'pa%2Fss'", "postgresql://u@h/db?password=pa%2Fss") == "'***' '***'"
