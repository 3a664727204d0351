"""shiro_kernel: an AI agent that lives inside Jupyter.

``%load_ext shiro_kernel`` registers ``%shiro`` / ``%%shiro``. Loading is cheap: ``openai`` is
imported only by :mod:`shiro_kernel.provider`, and only when a turn needs it.
"""

from __future__ import annotations

from typing import Any

from .version import VERSION as __version__

__all__ = ["__version__", "load_ipython_extension", "unload_ipython_extension"]


def load_ipython_extension(ipython: Any) -> None:
    from .extension import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .extension import unload

    unload(ipython)
