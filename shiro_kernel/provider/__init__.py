"""Talking to the model: the client (the only code that imports ``openai``, lazily), the two wire
formats (Responses and Chat Completions) as pure functions over dicts, and the price table.

Nothing here imports ``openai`` at import time: ``%load_ext`` stays cheap."""

from __future__ import annotations

from .client import Provider, ProviderSettings

__all__ = ["Provider", "ProviderSettings"]
