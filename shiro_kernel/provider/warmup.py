"""Prepare the first turn off the main thread, right after ``%load_ext``, so that ``%load_ext`` stays cheap
and the first ``%shiro`` costs about what a later one does. ``SHIRO_NO_WARMUP=1`` turns it off.

In order, on one daemon thread:

1. ``import openai`` (~0.5 s);
2. the SDK client for the environment's key and base URL (:func:`~shiro_kernel.provider.client.shared_client`):
   building one creates an SSL context and a connection pool (~0.1 s, most of it reading the CA bundle),
   and providers with the same key and base URL share it;
3. the modules a turn needs (the agent, the turn loop, tools, stores, views: ~0.2 s).

Each step is worth it alone and fails quietly (the first turn then does it, and reports a real problem in
words). A turn issued while this runs waits only for what it needs that is still being imported.
"""

from __future__ import annotations

import importlib
import os
import threading

thread: threading.Thread | None = None

#: what a first turn imports, by the modules that pull it in (the blocking text view and the live one)
TURN_MODULES = (
    "shiro_kernel.provider.wire",
    "shiro_kernel.agent",
    "shiro_kernel.turn",
    "shiro_kernel.commands",
    "shiro_kernel.ui.text_view",
    "shiro_kernel.ui.live",
)


def _warm() -> None:
    try:
        import openai  # noqa: F401
    except Exception:  # a broken install is reported by the first turn, in words
        return
    try:
        from ..config import environment
        from .client import _PLACEHOLDER_KEY, shared_client

        env = environment()
        key = env.api_key or (_PLACEHOLDER_KEY if env.base_url else None)
        if key is not None:
            shared_client(key, env.base_url)
    except Exception:  # the first turn builds its client itself
        pass
    for name in TURN_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # imported (and reported) again by the turn that needs it
            pass


def start() -> None:
    global thread
    if thread is not None or os.environ.get("SHIRO_NO_WARMUP"):
        return
    thread = threading.Thread(target=_warm, name="shiro-warmup", daemon=True)
    thread.start()
