"""Import ``openai`` off the main thread after ``%load_ext``, so ``%load_ext`` stays cheap and the
first turn does not pay the ~0.5 s import either. ``SHIRO_NO_WARMUP=1`` turns it off."""

from __future__ import annotations

import os
import sys
import threading

thread: threading.Thread | None = None


def _import() -> None:
    try:
        import openai  # noqa: F401
    except Exception:  # a broken install is reported by the first turn, in words
        pass


def start() -> None:
    global thread
    if thread is not None or "openai" in sys.modules or os.environ.get("SHIRO_NO_WARMUP"):
        return
    thread = threading.Thread(target=_import, name="shiro-warmup", daemon=True)
    thread.start()
