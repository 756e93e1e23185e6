"""Folding and reading a real `perf script` capture (tests/data/profile), and categories."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from hoplab.errors import HoplabError, SpecError
from hoplab.profile import analyze, fold
from hoplab.profile.tools import find

DATA = Path(__file__).resolve().parents[1] / "data" / "profile"
SCRIPT = (DATA / "burner.perf-script.txt").read_text()
needs_folder = pytest.mark.skipif(find("hoplab-fold") is None,
                                   reason="hoplab-fold is built by make setup")


def leaf_counts(text: str, comm: str) -> Counter[str]:
    """An independent reading of perf script: the first frame under each sample header."""
    out: Counter[str] = Counter()
    for block in text.split("\n\n"):
        lines = [ln for ln in block.splitlines() if ln.strip()]
        if len(lines) < 2 or not lines[0].startswith(comm + " "):
            continue
        m = re.match(r"\s*[0-9a-f]+ (\S+?)(\+0x[0-9a-f]+)? \(", lines[1])
        if m:
            out[m.group(1)] += 1
    return out


@needs_folder
def test_folded_counts_match_the_capture() -> None:
    stacks = fold.parse(fold.collapse(SCRIPT, ("pid",)))
    burner = Counter({s: c for s, c in stacks.items() if s.startswith("burner-")})
    expected = leaf_counts(SCRIPT, "burner")
    top = Counter({sym.split(" ")[0]: 0 for sym in expected})
    for stack, count in burner.items():
        top[stack.rsplit(";", 1)[-1]] += count
    assert top["hoplab_burn_three"] == expected["hoplab_burn_three"] > 0
    assert top["hoplab_burn_one"] == expected["hoplab_burn_one"] > 0
    assert analyze.samples(burner) == sum(expected.values())


@needs_folder
def test_pid_and_kernel_options_follow_stackcollapse_conventions() -> None:
    plain = fold.parse(fold.collapse(SCRIPT, ()))
    marked = fold.parse(fold.collapse(SCRIPT, ("pid", "kernel")))
    assert analyze.samples(plain) == analyze.samples(marked)
    assert all(fold.pid_of(s.split(";")[0]) is None for s in plain if s.startswith("burner"))
    assert any(fold.pid_of(s.split(";")[0]) for s in marked if s.startswith("burner"))
    assert any(f.endswith("_[k]") for s in marked for f in s.split(";"))
    with pytest.raises(ValueError, match="unknown fold option"):
        fold.collapse(SCRIPT, ("nope",))


def test_pid_helpers() -> None:
    stacks = Counter({"iperf3-12;main;f": 3, "swapper-0;idle": 5, "x-7/8;g": 1})
    assert fold.pid_of("iperf3-12") == 12 and fold.pid_of("x-7/8") == 7
    assert fold.pid_of("ksoftirqd/0") is None
    assert fold.only_pids(stacks, [12, 7]) == Counter({"iperf3-12;main;f": 3, "x-7/8;g": 1})
    assert fold.without_pids(stacks) == Counter({"iperf3;main;f": 3, "swapper;idle": 5,
                                                 "x;g": 1})
    assert fold.parse(fold.render(stacks)) == stacks


def test_malformed_folded_line_is_named() -> None:
    with pytest.raises(HoplabError, match="line 2"):
        fold.parse("a;b 3\nnot a count\n")


def test_categories_walk_from_the_leaf() -> None:
    table = analyze.load_categories()
    stacks = Counter({
        "wireguard-go;[unknown];chacha20_avx2": 30,       # crypto in the leaf
        "wireguard-go;[unknown];[wireguard-go]": 20,      # unresolved: the process names it
        "ksoftirqd/0;net_rx_action_[k];ip_forward_[k];nf_hook_slow_[k]": 10,
        "ksoftirqd/0;net_rx_action_[k];ip_forward_[k]": 25,
        "swapper;do_idle_[k];default_idle_[k]": 10,
        "python3;_PyEval_EvalFrameDefault": 4,
        "kworker;mystery_function_[k]": 1,
    })
    cats = analyze.categories(stacks, table)
    assert cats == pytest.approx({"crypto": 30.0, "wireguard": 20.0, "forwarding and softirq":
                                  25.0, "netfilter and nftables": 10.0,
                                  "scheduler and idle": 10.0, "user space": 4.0,
                                  "other kernel": 1.0})
    top = analyze.top_symbols(stacks, 3)
    assert top[0] == ("chacha20_avx2", 30.0)
    assert ("ip_forward_[k]", 25.0) in top
    assert analyze.top_symbols(stacks, 10)[2][0] == "[wireguard-go] (no symbols)"


def test_a_bad_category_table_names_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "cats.toml"
    bad.write_text('[[category]]\nname = "x"\npatterns = ["("]\n')
    with pytest.raises(SpecError) as exc:
        analyze.load_categories(bad)
    assert exc.value.key == "category[0].patterns"
