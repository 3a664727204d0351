"""Prepare the first turn off the main thread, right after ``%load_ext``, so that ``%load_ext`` stays cheap
and the first ``%shiro`` costs about what a later one does. ``SHIRO_NO_WARMUP=1`` turns it off.

On one daemon thread, :data:`DELAY_S` after ``%load_ext`` (so that the cell that loads the extension
ends before this competes with it for the interpreter), in order:

0. what :func:`start` is given (``%load_ext`` gives the builder of ``%shiro``'s options and help, which
   then parses a typical line);
1. ``import openai`` (~0.5 s);
2. the SDK client for the key and the base URL the first turn will use (``Shiro.base_url``, else
   ``OPENAI_BASE_URL``; :func:`~shiro_kernel.provider.client.shared_client`): building one creates an SSL
   context and a connection pool (~0.1 s, most of it reading the CA bundle), and its first request
   computes the platform headers (~5 ms); providers with the same key and base URL share it. Then, on a
   thread of its own, the connection to that server is opened (:func:`preconnect`) and left in the
   client's pool for the first turn: against a real API that is the TCP and TLS handshakes (~0.1–0.3 s),
   and on any server the first run of the SDK's HTTP path (~3 ms). It is one ``GET {base_url}/models``
   sent *without the API key* (a user who points shiro at another server after loading has sent the
   old one no key), whose answer, usually a 401, is read and dropped; nothing is shown or kept;
3. the modules a turn imports on first use (the agent, the turn loop, the tools, the stores, the views,
   ``mistune`` for the Markdown of the answer, ``filelock`` for the stores: ~0.3 s);
4. the stores' background thread (:func:`~shiro_kernel.store.files.background`) is started, and the
   session index opened and brought up to date (:func:`~shiro_kernel.store.index.preopen`);
5. one Markdown rendering: ``mistune`` builds its parser on first use (~40 ms), and keeps no state
   between calls.

Nothing else: no state a turn could be using at the same moment (the client's connection pool, which a
turn may share with the preconnect, is safe across threads: a turn that finds the new connection still
busy opens another). Each step fails quietly (the first turn then does it, and reports a real problem in
words). A turn issued while this runs waits only for a module that is being imported at that moment, and
does the rest itself. ``SHIRO_NO_WARMUP=1`` also turns off the preconnect.
"""

from __future__ import annotations

import importlib
import os
import threading
import time
from collections.abc import Callable
from typing import Any

thread: threading.Thread | None = None

#: seconds between ``%load_ext`` and the start of the warm-up
DELAY_S = 0.05
#: the connection-opening request gives up after this many seconds (a server that does not answer)
PRECONNECT_TIMEOUT_S = 10.0
#: what a first turn imports, by the modules that pull it in (the blocking text view and the live one),
#: and what those import only inside functions
TURN_MODULES = (
    "shiro_kernel.provider.wire",
    "shiro_kernel.agent",
    "shiro_kernel.turn",
    "shiro_kernel.commands",
    "shiro_kernel.ui.text_view",
    "shiro_kernel.ui.live",
    "shiro_kernel.ui.session_text",
    "shiro_kernel.line",
    "shiro_kernel.rerun.turn_line",  # every turn line first asks whether its cell has a turn to replay
    "shiro_kernel.rerun.replay_cell",
    "shiro_kernel.rerun.replay_plan",
    "shiro_kernel.rerun.sites",
    "shiro_kernel.rerun.find",
    "filelock",
    "mistune",
    "concurrent.futures.thread",  # the stores' background thread
    "encodings.idna",  # the first connection encodes the server's host name with it
)


def preconnect(client: Any) -> None:
    """Open a connection to ``client``'s server and leave it in the client's pool (see the module
    docstring): one ``GET /models`` without the API key, its answer read and dropped. Never raises."""
    try:
        from openai import Omit

        from .provider.transport import response_class

        client.get(
            "/models",
            cast_to=response_class(),  # the SDK's own HTTP response: read, nothing parsed
            options={"timeout": PRECONNECT_TIMEOUT_S, "max_retries": 0, "headers": {"Authorization": Omit()}},
        )
    except Exception:  # usually the 401 itself; an unreachable server is reported by the first turn
        pass


def _warm(*first: Callable[[], object], base_url: Callable[[], str | None] | None = None) -> None:
    time.sleep(DELAY_S)
    for job in first:  # what the caller asks for (the magic's option parser and help: ~3 ms)
        try:
            job()
        except Exception:  # done again, and reported, where it is needed
            pass
    try:
        import openai  # noqa: F401
    except Exception:  # a broken install is reported by the first turn, in words
        return
    try:
        from .config import environment
        from .provider.client import PLACEHOLDER_KEY, shared_client

        env = environment()
        url = (base_url() if base_url is not None else None) or env.base_url
        key = env.api_key or (PLACEHOLDER_KEY if url else None)
        if key is not None:
            client = shared_client(key, url)
            _ = client.default_headers  # computes the platform headers once
            threading.Thread(target=preconnect, args=(client,), name="shiro-preconnect", daemon=True).start()
    except Exception:  # the first turn builds its client itself
        pass
    for name in TURN_MODULES:
        try:
            importlib.import_module(name)
        except Exception:  # imported (and reported) again by the turn that needs it
            pass
    try:
        from .tools import all_tools

        all_tools()  # imports each tool's module
    except Exception:  # best effort: what the warm-up fails to prepare, the first turn does
        pass
    try:
        from .store import files
        from .store.index import preopen
        from .store.paths import home

        files.background(lambda: None)  # start the stores' background thread (the prompt history uses it)
        preopen(home() / "sessions")  # the first turn asks it which session this notebook continues
    except Exception:  # best effort: what the warm-up fails to prepare, the first turn does
        pass
    try:
        from .ui.sanitize import md_to_html

        md_to_html("*warm-up*")  # mistune builds its parser (~40 ms of regular expressions) on first use
    except Exception:  # best effort: what the warm-up fails to prepare, the first turn does
        pass


def start(*first: Callable[[], object], base_url: Callable[[], str | None] | None = None) -> None:
    """Start the warm-up (once per process); ``first`` are run before the steps above, ``base_url`` gives
    the configured ``Shiro.base_url`` (None: the environment's)."""
    global thread
    if thread is not None or os.environ.get("SHIRO_NO_WARMUP"):
        return
    thread = threading.Thread(target=_warm, args=first, kwargs={"base_url": base_url}, name="shiro-warmup", daemon=True)
    thread.start()
