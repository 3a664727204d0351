"""Talking to the model: the client (the only code that imports ``openai``, lazily), the two wire
formats (Responses and Chat Completions) as pure functions over dicts, and the price table.

Nothing here imports ``openai`` at import time: ``%load_ext`` stays cheap."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import Provider, ProviderSettings

__all__ = ["Provider", "ProviderSettings"]


def __getattr__(name: str) -> Any:
    # resolved on first use: importing the package never imports the client module (nor ``openai``); the
    # warm-up (:mod:`~shiro_kernel.warmup`) reaches it off the main thread
    if name in __all__:
        from . import client

        return getattr(client, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
