"""The kernel hooks a background turn needs, and how they are undone (``%unload_ext``).

* :func:`watch_comm_opens` wraps ipykernel's ``comm_open`` handler to learn whether a widget frontend
  connected; :func:`unwatch_comm_opens` puts the original back.
* :func:`install_interrupt_handler` makes a kernel interrupt stop a background turn while the kernel is
  idle; :func:`uninstall_interrupt_handler` restores the handler it replaced.
* :func:`kernel_publisher` sends a late output to the cell that typed the prompt; :func:`cell_parent`
  is that cell's request.

Everything here is a no-op outside a kernel (terminal IPython, an ``InteractiveShell`` in tests).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any

CONTROL_TARGET = "jupyter.widget.control"

# -- is there a widget frontend? -------------------------------------------------------------------
_seen_targets: set[str] = set()


def _kernel(shell: Any) -> Any:
    return getattr(shell, "kernel", None)


def watch_comm_opens(shell: Any) -> None:
    """Record the targets of comms the frontend opens (JupyterLab's widget manager opens
    ``jupyter.widget.control`` when it connects; nbclient never does). Cheap: no ipywidgets import."""
    kernel = _kernel(shell)
    handlers = getattr(kernel, "shell_handlers", None)
    if not isinstance(handlers, dict) or "comm_open" not in handlers:
        return
    original = handlers["comm_open"]
    if getattr(original, "_shiro_watch", False):
        return

    def comm_open(stream: Any, ident: Any, msg: Any) -> Any:
        try:
            _seen_targets.add(msg["content"]["target_name"])
        except (KeyError, TypeError):  # a malformed comm_open: the kernel's own handler answers it
            pass
        return original(stream, ident, msg)

    comm_open._shiro_watch = True  # type: ignore[attr-defined]
    comm_open._shiro_original = original  # type: ignore[attr-defined]
    handlers["comm_open"] = comm_open


def unwatch_comm_opens(shell: Any) -> None:
    """Put back the ``comm_open`` handler :func:`watch_comm_opens` wrapped."""
    handlers = getattr(_kernel(shell), "shell_handlers", None)
    if isinstance(handlers, dict):
        current = handlers.get("comm_open")
        original = getattr(current, "_shiro_original", None)
        if original is not None:
            handlers["comm_open"] = original


def widget_frontend(shell: Any, setting: str = "auto") -> bool:
    """Should turns run in the background with widgets? ``Shiro.frontend``: ``widgets`` yes, ``text``
    no, ``auto``: in a kernel whose frontend opened the widget control comm."""
    if setting == "text":
        return False
    if setting == "widgets":
        return True
    if type(shell).__name__ != "ZMQInteractiveShell":
        return False
    if CONTROL_TARGET in _seen_targets:
        return True
    # JupyterLab and Notebook 7 run cells with these metadata keys; nbclient and papermill send none.
    # This catches a widget frontend whose control comm opened before the extension was loaded.
    metadata = (_current_request(shell) or {}).get("metadata") or {}
    if "deletedCells" in metadata or "recordTiming" in metadata:
        return True
    manager = getattr(_kernel(shell), "comm_manager", None)
    for c in list(getattr(manager, "comms", {}).values()):
        if getattr(c, "target_name", None) == CONTROL_TARGET:
            return True
    widget = sys.modules.get("ipywidgets.widgets.widget")
    return bool(widget is not None and getattr(widget.Widget, "_control_comm", None) is not None)


def run_by_a_program(shell: Any) -> bool:
    """The cell was sent by a program running the notebook, not by a person: a kernel request that allows no
    input and carries none of a notebook front end's metadata (nbclient, ``jupyter nbconvert --execute``,
    papermill); False in JupyterLab, Notebook 7, a console and terminal IPython."""
    if type(shell).__name__ != "ZMQInteractiveShell":
        return False
    request = _current_request(shell) or {}
    content, metadata = request.get("content") or {}, request.get("metadata") or {}
    return content.get("allow_stdin") is False and not ("deletedCells" in metadata or "recordTiming" in metadata)


def _current_request(shell: Any) -> dict[str, Any] | None:
    """The whole execute request being run now (header, metadata, content), when the kernel says."""
    get_parent = getattr(_kernel(shell), "get_parent", None)
    if not callable(get_parent):
        return None
    try:
        parent = get_parent("shell")
    except Exception:  # any kernel's get_parent: no request is known
        return None
    return parent if isinstance(parent, dict) else None


def running_loop(shell: Any) -> Any:
    """The kernel's asyncio loop (the one a magic runs in), or None outside a kernel."""
    import asyncio

    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        pass
    io_loop = getattr(_kernel(shell), "io_loop", None)
    return getattr(io_loop, "asyncio_loop", None)


# -- kernel interrupts -------------------------------------------------------------------------------
#: called on a kernel interrupt; each returns True when it was running a tool job on the kernel's thread
_on_interrupt: list[Callable[[], bool]] = []
_previous_handler: Any = None


def on_interrupt(callback: Callable[[], bool]) -> Callable[[], None]:
    """Call ``callback`` on every kernel interrupt; returns the function that stops that."""
    _on_interrupt.append(callback)

    def remove() -> None:
        if callback in _on_interrupt:
            _on_interrupt.remove(callback)

    return remove


def _on_sigint(signum: int, frame: Any) -> None:
    import signal

    job_running = False
    for callback in list(_on_interrupt):
        job_running = callback() or job_running
    if job_running:  # stop the tool that is running on this thread, as a cell would be stopped
        raise KeyboardInterrupt
    previous = _previous_handler
    if callable(previous) and previous is not signal.default_int_handler:
        previous(signum, frame)


def install_interrupt_handler(shell: Any) -> None:
    """While the kernel is idle ipykernel ignores SIGINT; make an interrupt stop a background turn.

    ipykernel swaps in ``default_int_handler`` around each request and restores the handler it saved
    afterwards; in a kernel we replace that saved handler, so ours is active whenever no cell runs."""
    global _previous_handler
    kernel = _kernel(shell)
    if kernel is None or threading.current_thread() is not threading.main_thread():
        return
    if hasattr(kernel, "saved_sigint_handler") and kernel.saved_sigint_handler is not _on_sigint:
        _previous_handler = kernel.saved_sigint_handler
        kernel.saved_sigint_handler = _on_sigint


def uninstall_interrupt_handler(shell: Any) -> None:
    """Give the kernel back the SIGINT handler :func:`install_interrupt_handler` replaced."""
    import signal

    global _previous_handler
    kernel = _kernel(shell)
    if kernel is not None and getattr(kernel, "saved_sigint_handler", None) is _on_sigint:
        kernel.saved_sigint_handler = _previous_handler
    if signal.getsignal(signal.SIGINT) is _on_sigint and threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, _previous_handler or signal.default_int_handler)
    _previous_handler = None


def has_frontend(shell: Any) -> bool:
    """True in a kernel (a frontend may draw updates); False in terminal IPython."""
    return type(shell).__name__ == "ZMQInteractiveShell"


def kernel_publisher(shell: Any) -> Callable[..., None]:
    """Send the final bundle to the cell that typed the prompt, even after that cell has finished: as
    an ``update_display_data`` of the view's display (frontends route it by display id), else as a
    ``display_data`` with the cell's parent header; outside a kernel, a plain ``display``."""
    pub = getattr(shell, "display_pub", None)

    def publish(bundle: dict[str, Any], parent: Any, display_id: str | None = None) -> None:
        session, socket = getattr(pub, "session", None), getattr(pub, "pub_socket", None)
        if session is None or socket is None or not parent:
            from IPython.display import display, update_display

            if display_id:
                update_display(bundle, raw=True, display_id=display_id)
            else:
                display(bundle, raw=True)
            return
        from ipykernel.jsonutil import json_clean

        kind = "update_display_data" if display_id else "display_data"
        transient = {"display_id": display_id} if display_id else {}
        content = json_clean({"data": bundle, "metadata": {}, "transient": transient})
        session.send(socket, kind, content, parent=parent, ident=getattr(pub, "topic", None))

    return publish


def cell_parent(shell: Any) -> dict[str, Any] | None:
    """The execute request being run now (so a late output can go to this cell)."""
    kernel = _kernel(shell)
    parent = None
    get_parent = getattr(kernel, "get_parent", None)
    if callable(get_parent):
        try:
            parent = get_parent("shell")
        except Exception:  # any kernel's get_parent: no request is known
            parent = None
    if not parent:
        parent = getattr(shell, "parent_header", None)
    return dict(parent) if parent else None


# -- running a job on the kernel's thread -----------------------------------------------------------
def call_on_main(
    job: Callable[[], Any], post: Callable[[Callable[[], None]], Any], busy: Callable[[bool], None] | None = None
) -> Any:
    """Run ``job`` on the kernel's main thread and wait for its result (or its exception, a
    ``KeyboardInterrupt`` included); in place when called there. ``post`` hands a callable to that thread
    (the live view's inbox, or the loop's ``call_soon_threadsafe``); ``busy`` is told when the job starts
    and ends (an interrupt then knows a tool is running)."""
    import concurrent.futures

    if threading.current_thread() is threading.main_thread():
        return job()
    future: concurrent.futures.Future[Any] = concurrent.futures.Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        if busy is not None:
            busy(True)
        try:
            future.set_result(job())
        except BaseException as exc:  # KeyboardInterrupt included: the caller turns it into an abort
            future.set_exception(exc)
        finally:
            if busy is not None:
                busy(False)

    post(run)
    return future.result()
