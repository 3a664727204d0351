"""The live, non-blocking turn: the turn loop on a worker thread, the view on the kernel's thread.

* Every event of the turn is handed to the kernel's thread through an :class:`Inbox` (a queue drained
  by ``loop.call_soon_threadsafe``), where the widget view is updated.
* Tools run on the kernel's main thread (``TurnOptions.runner`` posts the job and waits on a
  ``concurrent.futures.Future``): user code never runs off the main thread.
* Approval: the worker waits on a ``threading.Event`` that a button click sets; a turn stopped while
  a call waits leaves that call pending (``LATER``), to be asked again next turn.
* One :class:`LiveController` per agent holds the running turn and the in-memory prompt queue: a
  ``%shiro`` typed while a turn runs is queued; when a turn ends exactly one queued prompt starts.
  Stop and a kernel interrupt abort the turn and clear the queue. Nothing is persisted.

Background turns are used only when a widget frontend exists (:func:`widget_frontend`); nbclient,
papermill, terminal IPython and ``--wait`` keep the blocking path.
"""

from __future__ import annotations

import collections
import concurrent.futures
import queue
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .events import Event, TurnEnd, Usage
from .render import short_args
from .turn import LATER

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
        except Exception:
            pass
        return original(stream, ident, msg)

    comm_open._shiro_watch = True  # type: ignore[attr-defined]
    handlers["comm_open"] = comm_open


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


def _current_request(shell: Any) -> dict[str, Any] | None:
    """The whole execute request being run now (header, metadata, content), when the kernel says."""
    get_parent = getattr(_kernel(shell), "get_parent", None)
    if not callable(get_parent):
        return None
    try:
        parent = get_parent("shell")
    except Exception:
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


# -- the hand-over to the kernel's thread -----------------------------------------------------------
class Inbox:
    """Callables posted from any thread, run on the kernel's thread in order. With a loop, each post
    schedules a drain; without one (tests, or a blocking ``--wait``), whoever waits drains."""

    def __init__(self, loop: Any = None) -> None:
        self.loop = loop
        self._q: queue.SimpleQueue[Callable[[], Any]] = queue.SimpleQueue()
        self._ready = threading.Event()

    def post(self, fn: Callable[[], Any]) -> None:
        self._q.put(fn)
        self._ready.set()
        loop = self.loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._drain_in_loop)
            except RuntimeError:  # the loop is closed (kernel shutting down)
                pass

    def _drain_in_loop(self) -> None:
        try:
            self.drain()
        except KeyboardInterrupt:  # an interrupt racing the end of a tool job: never into the kernel's loop
            pass

    def drain(self) -> int:
        n = 0
        self._ready.clear()
        while True:
            try:
                fn = self._q.get_nowait()
            except queue.Empty:
                return n
            n += 1
            try:
                fn()
            except KeyboardInterrupt:
                raise
            except Exception:  # a view error must not stop the hand-over
                import traceback

                traceback.print_exc(file=sys.__stderr__)

    def wait(self, timeout: float) -> None:
        self._ready.wait(timeout)

    def call_later(self, delay: float, fn: Callable[[], Any]) -> Any:
        if self.loop is not None:
            return self.loop.call_later(delay, fn)
        timer = threading.Timer(delay, lambda: self.post(fn))
        timer.daemon = True
        timer.start()
        return timer


# -- one turn ------------------------------------------------------------------------------------------
@dataclass
class LiveTurn:
    """A prompt with its view and its cell (``parent``: the execute request it was typed in)."""

    prompt: str
    options: dict[str, Any] = field(default_factory=dict)
    view: Any = None
    parent: dict[str, Any] | None = None
    #: on the kernel thread just before the turn starts; returns the text to show instead of running a
    #: turn (a queued slash command) or None to run the turn
    prepare: Callable[[LiveTurn], str | None] | None = None
    #: builds the static bundle for the cell at the end (Markdown, HTML, turn JSON)
    bundle: Callable[[LiveTurn], dict[str, Any]] | None = None
    #: the display the view was shown in: the static bundle updates it in place, so the cell keeps one
    #: output whose saved copy renders without widget state (``widget_data`` is the view's own entry)
    display_id: str | None = None
    widget_data: dict[str, Any] = field(default_factory=dict)
    end: TurnEnd | None = None
    thread: threading.Thread | None = None
    state: str = "new"  # new | queued | running | done | dropped


class LiveController:
    """The running turn and the prompt queue of one agent."""

    def __init__(self, agent: Any, loop: Any = None, publish: Callable[[dict[str, Any], Any], None] | None = None
                 ) -> None:
        self.agent = agent
        self.inbox = Inbox(loop)
        self.running: LiveTurn | None = None
        self.queue: collections.deque[LiveTurn] = collections.deque()
        self.publish = publish or (lambda bundle, parent: None)
        self.finished: list[LiveTurn] = []  # ended turns, oldest first (tests; trimmed)
        self._main_job = False  # a tool job is running on the kernel thread right now
        _controllers.add(self)

    @property
    def loop(self) -> Any:
        return self.inbox.loop

    @loop.setter
    def loop(self, value: Any) -> None:
        self.inbox.loop = value

    @property
    def busy(self) -> bool:
        return self.running is not None or bool(self.queue)

    # -- submitting ----------------------------------------------------------------------------------
    def submit(self, item: LiveTurn) -> int:
        """Start ``item`` now (returns 0) or queue it (returns its 1-based queue position)."""
        if self.running is None and not self.queue:
            self._start(item)
            return 0
        self.queue.append(item)
        item.state = "queued"
        self._show_queue()
        return len(self.queue)

    def _show_queue(self) -> None:
        for position, item in enumerate(self.queue, 1):
            if item.view is not None:
                item.view.queued(position)
        if self.running is not None and self.running.view is not None:
            self.running.view.show_queue([i.prompt for i in self.queue])

    def _start(self, item: LiveTurn) -> None:
        self.running = item
        item.state = "running"
        text = item.prepare(item) if item.prepare else None
        if text is not None:  # a slash command, or nothing to run
            if item.view is not None:
                item.view.show_text(text)
            self._finish(item)
            return
        if item.view is not None:
            item.view.running()
            item.view.show_queue([i.prompt for i in self.queue])
        self.agent.abort.clear()
        item.thread = threading.Thread(target=self._work, args=(item,), name="shiro-turn", daemon=True)
        item.thread.start()

    def _finish(self, item: LiveTurn) -> None:
        item.state = "done" if item.state == "running" else item.state
        self.finished = [*self.finished[-20:], item]
        if self.running is item:
            self.running = None
        if self.queue:
            nxt = self.queue.popleft()
            self._show_queue()
            self._start(nxt)

    # -- the worker thread ----------------------------------------------------------------------------
    def _work(self, item: LiveTurn) -> None:
        post = self.inbox.post

        def on_event(event: Event) -> None:
            post(lambda: self._on_event(item, event))

        try:
            opts = item.options
            end = self.agent.ask(item.prompt, on_event=on_event, model=opts.get("model"), agent=opts.get("agent"),
                                 memory=opts.get("memory"), headless=False, keep_abort=True,
                                 approver=lambda call, tool: self._approve(item, call),
                                 runner=self._run_on_kernel)
        except BaseException as exc:  # noqa: BLE001 - the view must always end
            end = TurnEnd("error", Usage(0, 0, None), error=f"the turn failed: {type(exc).__name__}: {exc}")
            on_event(end)
        item.end = end
        post(lambda: self._finish(item))

    def _on_event(self, item: LiveTurn, event: Event) -> None:
        if item.view is not None:
            item.view.feed(event)
        if isinstance(event, TurnEnd) and item.bundle is not None:
            item.end = event
            try:
                self.publish({**item.widget_data, **item.bundle(item)}, item.parent, item.display_id)
            except Exception:
                import traceback

                traceback.print_exc(file=sys.__stderr__)

    def _run_on_kernel(self, job: Callable[[], Any]) -> Any:
        """``TurnOptions.runner``: run a tool job on the kernel's thread and wait for its result."""
        if threading.current_thread() is threading.main_thread():
            return job()
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()

        def run() -> None:
            if not future.set_running_or_notify_cancel():
                return
            self._main_job = True
            try:
                future.set_result(job())
            except BaseException as exc:  # KeyboardInterrupt included: the turn turns it into an abort
                future.set_exception(exc)
            finally:
                self._main_job = False

        self.inbox.post(run)
        return future.result()

    def _approve(self, item: LiveTurn, call: Any) -> str:
        """``TurnOptions.approver``: show the buttons, wait for a click (or Stop → LATER)."""
        answered = threading.Event()
        verdict: list[str] = []

        def answer(value: str) -> None:
            verdict.append(value)
            answered.set()

        if item.view is None:
            return LATER
        self.inbox.post(lambda: item.view.ask(call.name, short_args(call.arguments), answer))
        abort = self.agent.abort
        while not answered.wait(0.05):
            if abort.is_set():
                self.inbox.post(item.view.clear_approval)
                return LATER
        return verdict[0]

    # -- stopping and waiting ---------------------------------------------------------------------
    def stop(self, why: str = "dropped: the turn before it was stopped") -> None:
        """Stop button / kernel interrupt: abort the running turn and clear the queue."""
        dropped, self.queue = list(self.queue), collections.deque()
        for item in dropped:
            item.state = "dropped"
            if item.view is not None:
                item.view.dropped(why)
        if self.running is not None:
            self.agent.abort.set()
            if self.running.view is not None:
                self.running.view.show_queue([])

    def wait_idle(self, timeout: float | None = None) -> bool:
        """On the kernel thread: run what the turns hand over until nothing runs or is queued
        (``--wait``, tests). A KeyboardInterrupt stops everything and propagates."""
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                self.inbox.drain()
                if not self.busy:
                    return True
                if deadline is not None and time.monotonic() > deadline:
                    return False
                self.inbox.wait(0.02)
        except KeyboardInterrupt:
            self.stop("dropped: the kernel was interrupted")
            self.drain_until_stopped()
            raise

    def drain_until_stopped(self, timeout: float = 5.0) -> None:
        deadline = time.monotonic() + timeout
        while self.running is not None and time.monotonic() < deadline:
            self.inbox.drain()
            self.inbox.wait(0.02)

    def interrupt(self) -> bool:
        """A kernel interrupt arrived; True when a tool job was running on the kernel's thread."""
        busy = self._main_job
        if self.busy:
            self.stop("dropped: the kernel was interrupted")
        return busy


# -- kernel interrupts -------------------------------------------------------------------------------
_controllers: weakref.WeakSet[LiveController] = weakref.WeakSet()
_previous_handler: Any = None


def _on_sigint(signum: int, frame: Any) -> None:
    job_running = False
    for controller in list(_controllers):
        job_running = controller.interrupt() or job_running
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
    if hasattr(kernel, "saved_sigint_handler"):
        if kernel.saved_sigint_handler is not _on_sigint:
            _previous_handler = kernel.saved_sigint_handler
            kernel.saved_sigint_handler = _on_sigint


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
        except Exception:
            parent = None
    if not parent:
        parent = getattr(shell, "parent_header", None)
    return dict(parent) if parent else None
