"""hoplab: a performance lab for routers, meshes and network paths."""

# Kept literal (pyproject reads it) so start-up does not pay for importlib.metadata.
__version__ = "0.1.0"

__all__ = ["__version__"]
