"""The lab format: reading, validating and normalising lab files."""

from __future__ import annotations

# Not typing.TYPE_CHECKING: `hoplab lab exec` imports this package (for spec.names)
# and importing typing is a tenth of its cost; mypy treats the name as true.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from hoplab.spec.loader import load_lab, load_lab_text

__all__ = ["load_lab", "load_lab_text"]


def __getattr__(name: str) -> object:
    # Imported on first use: `hoplab lab exec` reads only hoplab.spec.names, and
    # should not pay for the loader (tomllib, the model, generators) at start-up.
    if name in __all__:
        from hoplab.spec import loader

        return getattr(loader, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
