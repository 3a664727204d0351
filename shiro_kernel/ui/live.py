"""The live, non-blocking turn: the turn loop on a worker thread, the view on the kernel's thread.

* Every event of the turn is handed to the kernel's thread through an :class:`Inbox` (a queue drained
  by ``loop.call_soon_threadsafe``), where the widget view is updated.
* Tools run on the kernel's main thread (``TurnOptions.runner`` posts the job and waits on a
  ``concurrent.futures.Future``): user code never runs off the main thread.
* Approval: the worker waits on a ``threading.Event`` that a button click sets; a turn stopped while
  a call waits leaves that call pending (``LATER``), to be asked again next turn. The same buttons ask
  whether a repository's MCP server may start (Allow / Deny) before the turn's first step.
* One :class:`LiveController` per agent holds the running turn and the in-memory prompt queue: a
  ``%shiro`` typed while a turn runs is queued; when a turn ends exactly one queued prompt starts.
  Stop and a kernel interrupt abort the turn and clear the queue. Nothing is persisted.

* Undo (issue 35): once a turn has ended, its view's rows whose steps the kernel can take back get an Undo
  button (:meth:`LiveController.refresh_undo`, again after every turn and undo). Taking back runs on a worker
  thread (:meth:`LiveController.take_back`): the front end answers the reverts of cell changes only while the
  kernel's thread is idle; names and files are put back on the kernel's thread. ``%shiro /undo`` and
  ``/undoable`` come here too, never queued behind a turn (a front end asks them silently).

The controller owns submitting a prompt (:meth:`LiveController.submit_prompt`: the view, its display,
the queue). Background turns are used only when a widget frontend exists
(:func:`~shiro_kernel.ui.kernel.widget_frontend`); nbclient, papermill, terminal IPython and ``--wait``
keep the blocking path (:mod:`~shiro_kernel.ui.text_view`).
"""

from __future__ import annotations

import collections
import functools
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..approval import LATER, UNANSWERED, UNANSWERED_NOTICE
from ..errors import ShiroError
from ..events import Event, Notice, TurnEnd, Usage
from ..line import Line
from ..turn import Frontend
from . import kernel
from .asking import ask_user
from .call_preview import preview
from .session_text import started
from .text_view import context_percent, final_bundle

if TYPE_CHECKING:
    from ..agent import Agent
    from ..mcp.consent import ConsentRequest


#: an Undo while a turn runs or waits: the steps it takes back may be the ones the turn builds on
UNDO_WHILE_TURN = "not undone: a turn is running or queued; take steps back once it has ended (Stop ends it now)"
UNDO_BUSY = "not undone: an undo is running; its report follows"
#: what a ``%shiro /undo`` cell shows until its report replaces it
TAKING_BACK = "taking the steps back…"


def command_bundle(text: str) -> dict[str, str]:
    """A slash command's text as the cell shows it (as the magic displays one)."""
    return {"text/plain": text, "text/markdown": f"```text\n{text}\n```"}


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
    """A ``%shiro`` line with its view and its cell (``parent``: the execute request it was typed in)."""

    line: Line
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
    #: an approval question of this turn went unanswered (``Shiro.approval_timeout_s``): none is asked again
    unanswered: bool = False
    thread: threading.Thread | None = None
    state: str = "new"  # new | queued | running | done | dropped


#: what a running turn's cell says where its widgets are not drawn (another window under real-time collaboration,
#: ``notebook_read``): the turn's answer replaces it when the turn ends
RUNNING_TEXT = "shiro: a turn is running here; its answer replaces this when it ends"


class LiveController:
    """The running turn and the prompt queue of one agent."""

    def __init__(
        self, agent: Agent, loop: Any = None, publish: Callable[..., None] | None = None, shell: Any = None
    ) -> None:
        self.agent = agent
        self.shell = shell
        self.inbox = Inbox(loop)
        self.running: LiveTurn | None = None
        self.queue: collections.deque[LiveTurn] = collections.deque()
        self.publish = publish or (lambda bundle, parent, display_id=None: None)
        self.finished: list[LiveTurn] = []  # ended turns, oldest first (tests; trimmed)
        self._main_job = False  # a tool job is running on the kernel thread right now
        self.undoing: threading.Thread | None = None  # an undo taking steps back (a %shiro typed meanwhile queues)
        self._after_undo: list[Callable[[], None]] = []  # listings asked while it runs, answered when it has ended
        self._unregister = kernel.on_interrupt(self.interrupt)

    @classmethod
    def for_kernel(cls, agent: Agent, shell: Any) -> LiveController:
        """A controller wired to ``shell``'s kernel: its loop, the publisher, interrupts."""
        controller = cls(agent, kernel.running_loop(shell), kernel.kernel_publisher(shell), shell=shell)
        kernel.install_interrupt_handler(shell)
        return controller

    def close(self) -> None:
        """Stop everything and stop listening to interrupts (``%unload_ext``)."""
        self.stop("dropped: the extension was unloaded")
        self.drain_until_stopped()
        self._unregister()

    @property
    def loop(self) -> Any:
        return self.inbox.loop

    @loop.setter
    def loop(self, value: Any) -> None:
        self.inbox.loop = value

    @property
    def busy(self) -> bool:
        return self.running is not None or bool(self.queue) or self.undoing is not None

    # -- submitting ----------------------------------------------------------------------------------
    def submit_line(self, line: Line, answer: Callable[[], str] | None = None) -> int:
        """Show a live view for ``line`` in the current cell and start it, or queue it behind the running
        turn (returns the 1-based position; 0 when it started). Its session switch (``--new``, ``-c``,
        ``-r``) is made just before the turn starts; so is ``answer``, a slash command's text (the magic's
        runner of the command table), shown in place of a turn."""
        from IPython.display import display

        from .widgets import TurnView

        view = TurnView(
            on_stop=self.stop,
            call_later=self.inbox.call_later,
            meter=lambda: context_percent(self.agent),
            tasks=lambda: self.agent.current.session.tasks.state(),
        )
        prepare = self._prepare(line, answer) if line.switches or answer is not None else None
        item = LiveTurn(
            line,
            view=view,
            parent=kernel.cell_parent(self.shell),
            prepare=prepare,
            bundle=lambda it: final_bundle(self.agent, it.view.turn_log),
        )
        live_bundle = view._repr_mimebundle_()
        item.widget_data = {k: v for k, v in live_bundle.items() if k != "text/plain"}
        live_bundle["text/plain"] = RUNNING_TEXT  # where widgets are not drawn (another window, a reader): words
        handle = display(live_bundle, raw=True, display_id=True)
        item.display_id = getattr(handle, "display_id", None)
        position = self.submit(item)
        if position:
            print(f"queued (position {position})")
        return position

    def _prepare(self, line: Line, answer: Callable[[], str] | None) -> Callable[[LiveTurn], str | None]:
        def prepare(item: LiveTurn) -> str | None:
            try:
                said = (
                    started(self.agent.current.start(new=line.new, cont=line.cont, resume=line.resume))
                    if line.switches
                    else None
                )
            except ShiroError as exc:
                return f"%shiro: {exc}"
            if line.action == "switch":
                return said or "ok"
            if answer is not None:
                return "\n".join(x for x in (said, answer()) if x)
            return None

        return prepare

    def submit(self, item: LiveTurn) -> int:
        """Start ``item`` now (returns 0) or queue it (returns its 1-based queue position)."""
        if not self.busy:
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
            self.running.view.show_queue([i.line.prompt for i in self.queue])

    def _start(self, item: LiveTurn) -> None:
        self.running = item
        item.state = "running"
        self.refresh_undo()  # no step is taken back while a turn runs
        text = item.prepare(item) if item.prepare else None
        if text is not None:  # a slash command, or nothing to run
            if item.view is not None:
                item.view.show_text(text)
            self._finish(item)
            return
        if item.view is not None:
            item.view.running()
            item.view.show_queue([i.line.prompt for i in self.queue])
        self.agent.abort.clear()
        item.thread = threading.Thread(target=self._work, args=(item,), name="shiro-turn", daemon=True)
        item.thread.start()

    def _finish(self, item: LiveTurn) -> None:
        item.state = "done" if item.state == "running" else item.state
        self.finished = [*self.finished[-20:], item]
        if self.running is item:
            self.running = None
        self.refresh_undo()  # this turn's rows, and older ones whose checkpoints it dropped for room
        self._next()

    def _next(self) -> None:
        """Start the first queued turn, when nothing runs."""
        if self.queue and self.running is None and self.undoing is None:
            nxt = self.queue.popleft()
            self._show_queue()
            self._start(nxt)

    # -- the worker thread ----------------------------------------------------------------------------
    def _work(self, item: LiveTurn) -> None:
        post = self.inbox.post

        def on_event(event: Event) -> None:
            post(lambda: self._on_event(item, event))

        front = Frontend(
            on_event=on_event,
            headless=False,
            approver=lambda call, tool: self._approve(item, call),
            runner=self._run_on_kernel,
            consent=lambda request: self._consent(item, request),
        )
        try:
            end = self.agent.ask(item.line, front, keep_abort=True)
        except BaseException as exc:
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
            except Exception:  # a view error must not stop the turn's hand-over (printed to the kernel's log)
                import traceback

                traceback.print_exc(file=sys.__stderr__)

    def _run_on_kernel(self, job: Callable[[], Any]) -> Any:
        """``TurnOptions.runner``: run a tool job on the kernel's thread and wait for its result."""
        return kernel.call_on_main(job, self.inbox.post, busy=self._busy)

    def _busy(self, running: bool) -> None:
        self._main_job = running

    def _approve(self, item: LiveTurn, call: Any) -> str:
        """``TurnOptions.approver``: show the buttons, wait for a click (or Stop → LATER). Unanswered for
        ``Shiro.approval_timeout_s`` (the tab closed, nobody there): UNANSWERED, a refusal the model is told
        about, said in one line in the cell; later questions of the same turn are not asked (nobody is there
        to answer them either), so the turn, and the queue after it, move on."""
        view = item.view
        if view is None:
            return LATER
        live = self.agent.location.live  # a review nobody answered this turn counts too (and this one for its reviews)
        if item.unanswered or (live is not None and live.unanswered):
            return UNANSWERED
        title, body = preview(call, self.agent.location.root)
        wait = float(self.agent.config.approval_timeout_s)
        asked = ask_user(
            self.inbox.post,
            lambda answer: view.ask(call.name, title, body, answer),
            view.clear_approval,
            wait_s=wait,
            abort=self.agent.abort,
        )
        if asked.stopped:
            return LATER
        if asked.answer is None:
            item.unanswered = True
            if live is not None:
                live.unanswered = True
            note = Notice(UNANSWERED_NOTICE.format(seconds=wait, name=call.name), kind="warning")
            self.inbox.post(functools.partial(self._on_event, item, note))
            return UNANSWERED
        return asked.answer

    def _consent(self, item: LiveTurn, request: ConsentRequest) -> str | None:
        """The consent asker of a live turn: may this repository's MCP server start? The approval box, as
        Allow / Deny; waits for a click (Stop: None, not answered)."""
        import html

        from ..mcp.consent import ALLOW, DENY, prompt_text

        view = item.view
        if view is None:
            return None
        title, command, help_text = prompt_text(request)
        body = (
            f'<pre style="white-space:pre-wrap;margin:0.3em 0">{html.escape(command)}</pre>'
            f"<div>{html.escape(help_text)}</div>"
        )
        asked = ask_user(  # an allowance is for the project, or nothing: no "Always this session"
            self.inbox.post,
            lambda answer: view.ask(request.server, title, body, answer, approve="Allow", always=False),
            view.clear_approval,
            wait_s=float(self.agent.config.approval_timeout_s),
            abort=self.agent.abort,
        )
        if asked.answer is None:  # stopped or unanswered: not started, asked again next turn
            return None
        return ALLOW if asked.answer in ("approve", "always") else DENY

    # -- undo ------------------------------------------------------------------------------------------
    def refresh_undo(self) -> None:
        """Every ended turn's view: an Undo button on each row whose step can be taken back now, ``undone`` on
        each row taken back; none while a turn runs or waits in the queue."""
        try:
            journal = self.agent.undo.journal
            calls = set() if self.busy else set(journal.undoable())
            undone = {s.call_id for s in list(journal.steps) if s.undone}
            for item in self.finished:
                if item.view is not None:
                    item.view.offer_undo(calls, undone, functools.partial(self._undo_row, item.view))
        except Exception:  # a view must never break the turn's hand-over (printed to the kernel's log)
            import traceback

            traceback.print_exc(file=sys.__stderr__)

    def _undo_row(self, view: Any, call_id: str) -> None:
        """A row's Undo: that step and every one after it; the report under the row."""
        self.take_back(call_id, functools.partial(view.undo_report, call_id))

    def take_back(self, call_id: str | None, show: Callable[[str], None], force: bool = False) -> None:
        """Take steps back (:meth:`~shiro_kernel.agent.Agent.undo_back`: the last turn's, or ``call_id``'s and every
        one after it; what the user changed since kept unless ``force``) on a worker thread, so that the front end's
        answers to the cell reverts can reach the kernel; names and files are put back on the kernel's thread. ``show`` gets the report there, then every view's
        buttons follow. Refused in one sentence, at once, while a turn runs or waits or another undo runs."""
        if self.busy:
            show(UNDO_BUSY if self.undoing is not None else UNDO_WHILE_TURN)
            return

        def work() -> None:
            try:
                text = self.agent.undo_back(call_id, on_main=self._run_on_kernel, force=force)
            except BaseException as exc:  # never into the kernel: the report says what failed
                text = f"undo failed: {type(exc).__name__}: {exc}"
            self.inbox.post(functools.partial(self._undone, text, show))

        self.undoing = threading.Thread(target=work, name="shiro-undo", daemon=True)
        self.refresh_undo()  # no second click meanwhile
        self.undoing.start()

    def _undone(self, text: str, show: Callable[[str], None]) -> None:
        self.undoing = None
        waiting, self._after_undo = self._after_undo, []
        try:
            show(text)
        finally:
            self.refresh_undo()
            for answer in waiting:
                answer()
            self._next()

    def answer_at_once(self, answer: Callable[[], str]) -> None:
        """A command that never queues behind a turn and only reads (``/undoable``; the magic reads the command
        table, :data:`~shiro_kernel.commands.AT_ONCE`): ``answer``'s text in this cell now — or, while an undo runs,
        in its place when that has ended, so what it lists is true then (a front end asking silently reads it from
        the same request)."""
        from IPython.display import display

        if self.undoing is None:
            display(command_bundle(answer()), raw=True)
            return
        show = self._placeholder()
        self._after_undo.append(lambda: show(answer()))

    def take_back_in_cell(self, call_id: str | None, force: bool = False) -> None:
        """``%shiro /undo [CALL_ID] [--force]`` (:meth:`take_back`), never queued behind a turn: its report replaces
        a placeholder in this cell when done, so a front end asking silently reads it from the same request."""
        self.take_back(call_id, self._placeholder(), force)

    def _placeholder(self) -> Callable[[str], None]:
        """Show :data:`TAKING_BACK` in this cell; what replaces it there."""
        from IPython.display import display

        handle = display(command_bundle(TAKING_BACK), raw=True, display_id=True)
        parent, display_id = kernel.cell_parent(self.shell), getattr(handle, "display_id", None)
        return lambda text: self.publish(command_bundle(text), parent, display_id)

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
