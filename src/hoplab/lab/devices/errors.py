"""A problem with a device, pointed at the lab file's line as the loader would."""

from __future__ import annotations

import tomllib
from pathlib import Path

from hoplab.errors import SpecError
from hoplab.spec.loader import key_name
from hoplab.spec.locate import Locator
from hoplab.spec.model import Lab


def spec_error(lab: Lab, path: tuple[str | int, ...], message: str) -> SpecError:
    """A SpecError pointing at `path` in the lab file, as the loader's would."""
    line = None
    try:
        text = Path(lab.source).read_text(encoding="utf-8")
        if path and path[0] == "links" and len(path) > 1 and isinstance(path[1], int):
            # A link's index counts generated links first; the file counts its own.
            written = len(tomllib.loads(text).get("links", []))
            path = ("links", path[1] - (len(lab.links) - written), *path[2:])
        line = Locator(text).line(path)
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        pass
    return SpecError(message, file=lab.source, key=key_name(path) or None, line=line)
