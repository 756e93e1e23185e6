"""Each test kind's table of options, made from its declaration (kind_registry.Option):
docs/experiment-format.md has these tables as they are printed here, and a test holds
the two together. `python -m hoplab.kinds.doc` prints every kind's."""

from __future__ import annotations

from hoplab.kinds import Kind, get, names


def option_table(kind: Kind) -> str:
    """The kind's options as a Markdown table: key, default, meaning."""
    rows = ["| key | default | meaning |", "|---|---|---|"]
    rows += [f"| `{key}` | {o.default} | {o.doc} |" for key, o in kind.options.items()]
    return "\n".join(rows)


def main() -> None:
    for name in names():
        print(f"### `{name}`\n\n{option_table(get(name))}\n")


if __name__ == "__main__":
    main()
