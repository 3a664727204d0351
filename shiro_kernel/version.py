"""The package's version, in a module of its own: the CLI and the MCP client say it without importing the package
root (whose ``load_ipython_extension`` reaches the magics, and so the whole agent)."""

from __future__ import annotations

VERSION = "0.1.0"

__all__ = ["VERSION"]
