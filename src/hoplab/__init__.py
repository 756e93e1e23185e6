"""hoplab: a performance lab for routers, meshes and network paths."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("hoplab")
except PackageNotFoundError:  # running from a source tree without install
    __version__ = "0.0.0"

__all__ = ["__version__"]
