"""A VM's configuration as one script (hoplab.lab.vm.script), run here by sh: steps in
order, each one's stdin, and the step that failed named with its own messages."""

from __future__ import annotations

import subprocess

from hoplab.lab.vm.script import Step, failed, script


def sh(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", text], capture_output=True, text=True, check=False)


def test_steps_run_in_order_with_their_input_and_environment() -> None:
    done = sh(script([Step("a", ["echo", "one"]),
                      Step("b", ["sh", "-c", "cat; echo \"$HOPLAB_NODE\""],
                           "x 'y' $z\nlast line", env=(("HOPLAB_NODE", "r 1"),)),
                      Step("c", ["sh", "-c", "cat"])]))   # stdin: /dev/null, not the script
    assert done.returncode == 0, done.stderr
    assert done.stdout == "one\nx 'y' $z\nlast line\nr 1\n"
    assert failed(done.stderr) is None


def test_the_first_failure_stops_the_script_and_is_named() -> None:
    done = sh(script([Step("a", ["sh", "-c", "echo warning >&2"]),
                      Step("b", ["sh", "-c", "echo 'no such device' >&2; exit 3"]),
                      Step("c", ["touch", "/nonexistent/never"])]))
    assert done.returncode == 3
    assert failed(done.stderr) == (1, "no such device")


def test_an_exit_without_the_mark_is_not_a_step() -> None:
    assert failed("sh: 1: Syntax error\n") is None
    assert failed("") is None
