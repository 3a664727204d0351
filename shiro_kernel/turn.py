"""The turn loop: system prompt + history → provider → tool calls run → results appended → repeat,
until the model answers or ``max_steps`` is reached.

Written as plain synchronous code over callbacks, so the same loop runs blocking (``--wait``,
nbclient) or on a worker thread with tools dispatched back to the kernel's thread. Invariants:

* every assistant tool call gets exactly one result before the next model call — a denied or
  aborted call gets an ``Error:`` result; only a call *waiting for approval* stays without one;
* a tool's failure is a result text starting ``Error:``, never an exception out of the turn;
* an abort (Stop, kernel interrupt) between or during steps leaves the transcript consistent.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Protocol

from . import stops
from .approval import (
    ALWAYS,
    APPROVE,
    ASK,
    DENY,
    HEADLESS_NOTICE,
    LATER,
    UNANSWERED,
    Approver,
    decide,
    headless_approver,
    refusal,
)
from .context import rules
from .context.estimate import DEFAULT_THRESHOLD
from .context.rules import detach_provider_items
from .context.wire_copy import WireCopy, WireState
from .context.workspace import AnswerStep
from .errors import ProviderError, TurnTimeout
from .events import (
    BudgetReached,
    Done,
    Error,
    Event,
    Notice,
    Observer,
    Pipe,
    ProviderEvent,
    ReasoningDelta,
    StepStart,
    TextDelta,
    ToolCallEvent,
    ToolEnd,
    ToolProgress,
    ToolStart,
    TurnEnd,
    Usage,
)
from .numbers.verify import Verifier
from .session import Session
from .text import cut, encodable
from .tools import Tool, ToolContext, run_tool
from .transcript import Message, Part, TextPart, ToolCallPart, ToolResultPart
from .undo.checkpoints import Checkpointer

if TYPE_CHECKING:
    from .mcp.consent import ConsentAsker
    from .provider.client import Resend


class ProviderLike(Protocol):
    """What the turn asks of its model: one call's events (:meth:`~.provider.client.Provider.stream`, which
    repairs what it can of a failure through the turn's history, ``resend``), whether the server keeps answers
    (``store``), and the history's pruning threshold as the server's window allows."""

    @property
    def store(self) -> bool: ...

    def stream(
        self,
        system: str,
        messages: list[Message],
        tools: list[dict[str, Any]],
        abort: threading.Event | None = None,
        state: str = "",
        resend: Resend | None = None,
    ) -> Any: ...

    def threshold(self, threshold: int) -> int: ...


#: runs a tool call somewhere (inline, or on the kernel's thread) and returns its result
Runner = Callable[[Callable[[], ToolResultPart]], ToolResultPart]


class ModelFailed(ProviderError):
    """A model call failed for good: the step's :class:`~shiro_kernel.events.Error` as an exception, with
    what arrived before it (``partial``: a stream that broke after showing something)."""

    def __init__(self, error: Error, partial: Done | None = None) -> None:
        super().__init__(error.message, error.status, kind=error.kind)
        self.error = error
        self.partial = partial


#: ``by``: who stopped it (:func:`~shiro_kernel.stops.by`: the user, or the kernel restarting)
INTERRUPTED = "Error: interrupted after {seconds:.1f} s — {by} while this call ran"
TIMED_OUT = "Error: interrupted after {seconds:.1f} s — the turn reached its time limit while this call ran"
ABORTED = "Error: not run — {by} before this call ran."
#: the seed's notice for the 404 repair (the docs show it with a lowercase "the")
INLINE_RETRY_NOTICE = (
    "The provider no longer had part of this session stored. Re-sent the history inline and carried on."
)
#: the cell's line when an answer goes back to the model before the turn ends (:mod:`~.numbers.verify`)
VERIFYING = "checking the answer: it gives what no output of this turn shows; the model is asked to compute it"
#: the total text of one step's tool results, at most (each result over its share is cut)
STEP_OUTPUT_CHARS = 100_000


def _raised_before(history: list[Message]) -> bool:
    """Whether, before the last step, the code of every call of a step of this turn (since the last user message)
    raised."""
    for message in reversed(history[:-1]):
        if message.role == "user":
            return False
        results = message.tool_results()
        if results and all(r.raised for r in results):
            return True
    return False


def _ignore(event: Event) -> None:
    return None


@dataclass(frozen=True)
class Frontend:
    """How a turn reaches the user: where its events go, and the seams a view provides."""

    on_event: Callable[[Event], None] = _ignore
    #: no view can show buttons: calls that need approval are refused, saying how to allow them
    headless: bool = True
    #: asks the user about a call that needs approval
    approver: Approver = headless_approver
    #: where a tool runs (None: on the turn's own thread)
    runner: Runner | None = None
    #: asks whether a repository's MCP server may start (None: such servers do not start)
    consent: ConsentAsker | None = None


#: the blocking, buttonless front end (nbclient, papermill, ``--wait``)
HEADLESS = Frontend()


@dataclass(frozen=True)
class TurnOptions:
    """What a turn decides by: its approval mode, limits and the provider's storage (the seams a view provides are
    its :class:`Frontend`)."""

    approval: str = "ask"  # ask | auto | read-only
    max_steps: int = 50
    compact_threshold: int = DEFAULT_THRESHOLD  # estimated tokens; above it the wire copy is pruned
    store: bool = True  # False: no provider item ids go out (the provider's own setting also counts)
    #: the session's spend limit in USD (None: no limit, or the model is unpriced and it cannot be checked)
    budget_usd: float | None = None
    #: takes a call's checkpoint for undo right before it runs, where it runs (None: no undo); never raises
    checkpoint: Checkpointer | None = None


@dataclass
class Turn:
    """One turn, as a value: the session it adds to, the provider and tools it calls, the instructions it sends
    (the same bytes for every step and turn of a session), its options, and its observers — every event goes
    through them in this order (:class:`~shiro_kernel.events.Pipe`). A kernel's is built by
    :meth:`shiro_kernel.agent.Agent.begin` from what its side effects made ready; :meth:`run` runs it once."""

    session: Session
    provider: ProviderLike
    tools: dict[str, Tool]
    ctx: ToolContext
    system: str
    options: TurnOptions = field(default_factory=TurnOptions)
    observers: Sequence[Observer] = ()
    abort: threading.Event = field(default_factory=threading.Event)
    #: what changes from step to step (the task list, cell changes …): one system message after the
    #: conversation, rebuilt every step and never stored, so the instructions before it stay the same
    state: Callable[[], str] = lambda: ""
    #: what the wire copy keeps of the session between steps and turns (the kernel's current session's own)
    wire: WireState = field(default_factory=WireState)
    #: each step's tool schemas (None: every tool's, :meth:`Tool.spec`); a lean offer's grow as the model loads tools
    specs: Callable[[], list[dict[str, Any]]] | None = None
    #: what the model can work on (:mod:`~.context.workspace`), sent with the state until the turn's first call
    workspace: str = ""
    #: told with the state the step after a call's output (:func:`~.context.workspace.answer_step`)
    answer_step: AnswerStep = field(default_factory=AnswerStep)
    #: checks an answer before it ends the turn (:mod:`~.numbers.verify`; None: the answer ends it)
    verifier: Verifier | None = None
    #: the view's seams: whether it can ask, its approver, where tools run (its events go through ``observers``)
    front: Frontend = HEADLESS
    #: the turn's id: its record for replay, its undo checkpoints and its egress ledger share it
    turn_id: str = ""
    usage: Usage = field(default_factory=lambda: Usage(0, 0, None))
    # per-turn state: the one inline retry, the one headless notice
    _inlined: bool = field(default=False, init=False, repr=False)
    _told_headless: bool = field(default=False, init=False, repr=False)
    _step_shown: bool = field(default=False, init=False, repr=False)  # something of this step reached the user
    _called: bool = field(default=False, init=False, repr=False)  # a call came this turn: the workspace was seen
    _note: str = field(default="", init=False, repr=False)  # the verifier's note, for the next step's state
    _shown: list[str] = field(default_factory=list, init=False, repr=False)  # the answer's text shown so far

    def __post_init__(self) -> None:
        self.on_event = Pipe(self.observers)
        self.copies = WireCopy(self.wire, self.on_event)

    # the batch of calls being answered: results so far, and the call running now (call, start time)
    _step_results: list[ToolResultPart] = field(default_factory=list, init=False, repr=False)
    _running: tuple[ToolCallPart, float] | None = field(default=None, init=False, repr=False)

    # -- entry point -----------------------------------------------------------------------------
    def run(self, prompt: str | None) -> TurnEnd:
        try:
            end = self._run(prompt)
        except KeyboardInterrupt as exc:  # a kernel interrupt (or the turn's time limit) while a tool or the stream ran
            self.abort.set()
            self._keep_shown()
            self._record_interrupted(exc)
            timed_out = isinstance(exc, TurnTimeout)
            if timed_out:
                self.on_event(Notice(str(exc), kind="warning"))
            end = TurnEnd("timeout" if timed_out else "aborted", self.usage)
        self.on_event(end)
        return end

    def _keep_shown(self) -> None:
        """An interrupt while the answer streamed: the text the user saw goes into the record as the model's (so
        the history never has two user messages in a row, and the model knows what it had said)."""
        text, self._shown = "".join(self._shown), []
        if text.strip():
            self.session.append(Message("assistant", [TextPart(text)]))

    def _record_interrupted(self, exc: KeyboardInterrupt) -> None:
        """Keep what an interrupted batch of calls did: finished results as they are, the running call as
        ``interrupted after N s`` with its partial output, the calls not reached as not run — so the model
        never repeats a side effect it already had."""
        running = self._running
        self._running = None
        if running is not None:
            call, started = running
            seconds = time.perf_counter() - started
            partial = getattr(exc, "partial", "") or ""
            why = TIMED_OUT if isinstance(exc, TurnTimeout) else INTERRUPTED
            text = why.format(seconds=seconds, by=stops.by()) + (
                f"; its output so far:\n{partial}" if partial.strip() else ""
            )
            self._step_results.append(stops.stopped(ToolResultPart(call.call_id, call.name, text, is_error=True)))
            self.on_event(ToolEnd(call, self._step_results[-1], seconds))
        answered = {r.call_id for r in self._step_results}
        results = list(self._step_results)
        self._step_results = []
        missing = [c for c in rules.pending_calls(self.session.messages) if c.call_id not in answered]
        aborted = ABORTED.format(by=stops.by())
        results += [stops.stopped(ToolResultPart(c.call_id, c.name, aborted, is_error=True)) for c in missing]
        if results:
            self.session.append(Message("tool", list[Part](results)))

    def _run(self, prompt: str | None) -> TurnEnd:
        self._inlined = self._told_headless = False
        self.copies = WireCopy(self.wire, self.on_event)  # its notices once per turn
        # A call left waiting for approval (e.g. before a kernel restart) is asked again first.
        pending = rules.pending_calls(self.session.messages)
        if pending and self._answer_calls(pending) is False:
            return TurnEnd("waiting", self.usage)
        self._called, self._note = bool(pending), ""
        start = len(self.session.messages)  # the messages from here are this turn's
        if prompt:
            self.session.append(Message.user(prompt))
        offered = self.specs or (lambda: [t.spec() for t in self.tools.values()])
        last_cost = 0.0  # the previous step's cost: the estimate of the next one
        for step in range(1, self.options.max_steps + 1):
            if self.abort.is_set():
                return TurnEnd("aborted", self.usage)
            over = self._over_budget(last_cost)
            if over is not None:
                self.on_event(over)
                return TurnEnd("budget", self.usage)
            self.on_event(StepStart(step))
            try:
                done = self._call_once(offered())
            except ModelFailed as failed:
                if failed.partial is not None:  # what arrived before the failure is kept
                    self._record(failed.partial)
                return TurnEnd("error", self.usage, error=failed.error.message)
            self._note = ""  # told in this step
            last_cost = self._record(done)
            if self.abort.is_set():
                return TurnEnd("aborted", self.usage)
            calls = done.message.tool_calls()
            if not calls:
                note = self.verifier.note(self.session.messages[start:]) if self.verifier is not None else ""
                if not note:
                    return TurnEnd("answered", self.usage)
                self._note = note  # the answer is not the end yet: the model is told why, once (see numbers.verify)
                self.on_event(Notice(VERIFYING))
                continue
            self._called = True
            if self._answer_calls(calls) is False:
                return TurnEnd("waiting", self.usage)
            if self.abort.is_set():
                return TurnEnd("aborted", self.usage)
        self.on_event(
            Notice(
                f"stopped after {self.options.max_steps} steps (Shiro.max_steps); "
                "send another prompt to let it continue",
                kind="warning",
            )
        )
        return TurnEnd("max_steps", self.usage)

    def _record(self, done: Done) -> float:
        """Append a step's answer and count its usage; returns its cost (the estimate of the next step)."""
        if done.message.parts:
            self.session.append(done.message)
        self.usage = self.usage + done.usage
        self.session.add_usage(done.usage)
        return done.usage.cost_usd or 0.0

    def _over_budget(self, next_cost: float) -> BudgetReached | None:
        """What stops the turn when the session's spend has reached the budget, or the next step
        (estimated as the previous one's cost) would pass it; else None."""
        budget = self.options.budget_usd
        if budget is None:
            return None
        spent = self.session.usage.cost_usd or 0.0
        if spent >= budget or spent + next_cost > budget:
            return BudgetReached(spent, budget)
        return None

    # -- one model call ----------------------------------------------------------------------------
    def wire_messages(self) -> list[Message]:
        """What goes out this step: the session's history as the wire copy makes it (:mod:`~.context.wire_copy`),
        pruned at ``compact_threshold`` or lower where the server's window is smaller; the session's own history
        is never changed here."""
        threshold = self.provider.threshold(self.options.compact_threshold)
        return self.copies.messages(
            self.session.messages, store=self.options.store and self.provider.store, threshold=threshold
        )

    # what a call's retry loop repairs the history through (:class:`~.provider.client.Resend`)
    def estimate(self, messages: list[Message]) -> int:
        return self.copies.estimate(messages)

    def inline_history(self) -> bool:
        """The provider lost an item the history refers to: the session's own history goes inline (once a turn,
        and only where nothing of the step was shown), for the step to go again."""
        if self._inlined or self._step_shown:
            return False
        self._inlined = True
        self.session.messages[:] = detach_provider_items(self.session.messages)
        self.session.changed()
        self.on_event(Notice(INLINE_RETRY_NOTICE))
        return True

    def fits_window(self, room: int, window: int | None) -> bool:
        """Whether the history, pruned to ``room`` (what the server's ``window`` leaves it), fits; False when not
        even the rest of the request fits, or pruning cannot, or something of the step was shown."""
        return not self._step_shown and self.copies.fits(self.session.messages, room, window)

    def _call_once(self, specs: list[dict[str, Any]]) -> Done:
        done: Done | None = None
        error: Error | None = None
        self._step_shown = False  # has anything of this step reached the user?
        system, state = self.system, self._state_now()
        event: ProviderEvent | Notice
        self._shown = []
        for event in self.provider.stream(system, self.wire_messages(), specs, self.abort, state=state, resend=self):
            if isinstance(event, TextDelta):
                self._shown.append(event.text)
            if isinstance(event, Done):
                done = event
            elif isinstance(event, Error):
                error = event
            elif isinstance(event, Usage):
                continue  # counted once, from Done
            else:
                if isinstance(event, (TextDelta, ReasoningDelta, ToolCallEvent)):
                    self._step_shown = True
                self.on_event(event)
        self._shown = []  # the answer came whole (or failed with its partial): recorded from here
        if error is not None:
            raise ModelFailed(error, done)
        if done is None:
            if self.abort.is_set():  # a stream stopped by the user: nothing of it is kept
                return Done(Message("assistant", []))
            # a provider ends with Done or Error; one that ends with neither has failed
            raise ModelFailed(Error("The model server ended the answer without finishing it."))
        for call in done.message.tool_calls():
            self.on_event(ToolCallEvent(call))
        return done

    def _state_now(self) -> str:
        """The step's state note: the workspace until the turn's first call, the session's state, the answer step
        the step after a call's output, the verifier's note the step after an answer it sent back."""
        history = self.session.messages
        after_output = bool(history) and history[-1].role == "tool"
        blocks = (
            self.workspace if not self._called else "",
            self.state(),
            self.answer_step.after(history[-1].tool_results(), _raised_before(history)) if after_output else "",
            self._note,
        )
        return "\n\n".join(b for b in blocks if b)

    # -- tool calls --------------------------------------------------------------------------------
    def _answer_calls(self, calls: list[ToolCallPart]) -> bool:
        """Run (or refuse) each call and append one tool message with all results.

        Returns False when a call was left waiting for approval: the turn then stops there, and the
        call stays without a result until it is answered (after a resume, too).
        """
        results = self._step_results = []  # kept on the turn: an interrupt records what finished
        waiting = False
        self._stage_reviews(calls)
        for call in calls:
            if self.abort.is_set():
                notebook = self.ctx.notebook  # a change of a review the user decided before the Stop: as decided
                if notebook is not None and notebook.settled(call.call_id):
                    self.on_event(ToolStart(call))
                    results.append(self._run_tool(call))
                    self.on_event(ToolEnd(call, results[-1], 0.0))
                    continue
                results.append(
                    stops.stopped(ToolResultPart(call.call_id, call.name, ABORTED.format(by=stops.by()), is_error=True))
                )
                continue
            tool = self.tools.get(call.name)
            verdict = self._approval(call, tool)
            if verdict == LATER:
                waiting = True
                continue
            self.on_event(ToolStart(call))
            started = time.perf_counter()
            self._running = (call, started)
            if verdict in (DENY, UNANSWERED):
                waited = self.ctx.approval_timeout_s if verdict == UNANSWERED else None
                text = refusal(self.options.approval, self.front.headless, call.name, waited)
                result = ToolResultPart(call.call_id, call.name, text, is_error=True, refused=True)
            else:
                result = self._run_tool(call)
            self._running = None
            self.on_event(ToolEnd(call, result, time.perf_counter() - started))
            if verdict == DENY and self.front.headless and self.options.approval == "ask" and not self._told_headless:
                self._told_headless = True  # once per turn: how to let such calls run here
                self.on_event(Notice(HEADLESS_NOTICE, kind="warning"))
            results.append(result)
        self._step_results = []
        for r in results:  # a file name that is not UTF-8 in an output could reach neither the model nor the disk
            r.output = encodable(r.output)
        _cap_step(results)
        if results:
            self.session.append(Message("tool", list[Part](results)))
        return not waiting

    def _stage_reviews(self, calls: list[ToolCallPart]) -> None:
        """The step's changes to the notebook go to the user as one review (Accept all), not one by one."""
        notebook = self.ctx.notebook
        reviewed = [c for c in calls if (t := self.tools.get(c.name)) is not None and t.reviewed]
        if notebook is None or len(reviewed) < 2:
            return
        staged = []
        for call in reviewed:
            try:
                staged.append((call.call_id, call.name, call.parsed_arguments()))
            except ValueError:  # malformed arguments: that call fails on its own
                continue
        notebook.stage(staged)

    def _approval(self, call: ToolCallPart, tool: Tool | None) -> str:
        verdict = decide(self.options.approval, tool, allowed=call.name in self.session.always_allowed)
        if verdict != ASK:
            return verdict
        assert tool is not None  # decide() asks only about a known tool
        verdict = self.front.approver(call, tool)
        if verdict == ALWAYS:
            self.session.always_allowed.add(call.name)
            return APPROVE
        return verdict

    def _run_tool(self, call: ToolCallPart) -> ToolResultPart:
        def progress(text: str) -> None:  # from the tool's thread: the view hands it to the kernel's
            self.on_event(ToolProgress(call.call_id, text))

        ctx = replace(self.ctx, progress=progress, call_id=call.call_id)

        tool = self.tools.get(call.name)

        def job() -> ToolResultPart:
            if self.options.checkpoint is None:
                return run_tool(self.tools, call, ctx)
            done = self.options.checkpoint(call, tool, ctx)  # what the call may change, kept where and just before
            try:
                return run_tool(self.tools, call, ctx)
            finally:
                done()  # what it left, for undo to tell the user's later changes from its own

        on_kernel = tool is None or tool.kernel_thread
        return self.front.runner(job) if self.front.runner and on_kernel else job()


def _cap_step(results: list[ToolResultPart]) -> None:
    """One step's results share :data:`STEP_OUTPUT_CHARS` (200 parallel reads must not make one 4 MB
    request): each result over its share is cut, with a note, before it is recorded."""
    total = sum(len(r.output) for r in results)
    if total <= STEP_OUTPUT_CHARS:
        return
    share = max(400, STEP_OUTPUT_CHARS // len(results))
    for r in results:
        if len(r.output) > share:
            r.output = (
                cut(r.output, share, tail=share // 4)
                + f"\n[{len(results)} results this step: each was cut to {share:,}]"
            )
