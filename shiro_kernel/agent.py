"""The agent of one kernel: settings, the session and its record, the project's stores, and turns.

The magics call :meth:`Agent.start` (which session), :meth:`Agent.ask` (a turn) and
:func:`shiro_kernel.commands.run` (slash commands); everything here runs without a kernel too (a
plain ``InteractiveShell`` or ``shell=None``), which is how it is tested.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from . import cells as cell_changes
from . import restart, rules
from .config import Shiro, agent_variant
from .events import Done, Error, Event, Notice, TurnEnd
from .history import PromptHistory
from .memories import MemoryStore, normalize_mute_list
from .notes import NoteStore
from .paths import git_commit, home, notebook_path, project_root
from .pricing import price_of
from .prompt import build_system_prompt
from .provider import Provider, ProviderSettings
from .render import TURN_MIME, Throttle, TurnLog, to_bundle_json, to_html, to_markdown, to_text
from .session import Session
from .sessions import Ambiguous, Autosaver, SessionStore, not_found_message, resume_hint, resumed_line, tasks_of
from .tasks import TaskList
from .tools import ToolContext, all_tools
from .transcript import Message, ToolCallPart
from .turn import HEADLESS_DENIAL, READ_ONLY_DENIAL, Turn, TurnOptions, budget_money, money


class AgentError(Exception):
    """A user-facing problem with a request (unknown session, ...): one sentence."""


class Agent:
    def __init__(self, shell: Any = None, config: Shiro | None = None) -> None:
        self.shell = shell
        self.config = config or Shiro(parent=shell)
        self.store = SessionStore(home() / "sessions")
        self.session = Session(notebook_path=self._notebook_str())
        self.autosaver = Autosaver(self.store, self.session, lambda: self.config.model)
        self.started = False  # has this kernel chosen its session yet?
        self.muted: list[str] = normalize_mute_list(self.config.mute)
        self._provider: Provider | None = None
        self._provider_key: tuple[Any, ...] | None = None
        self._tools = all_tools()
        self.abort = threading.Event()
        self.live: Any = None  # the LiveController (background turns and the prompt queue), made by the magic
        #: variables the resumed session's earlier turns created that this kernel lacks (name -> code);
        #: told to the model on the first turn after the resume
        self.lost: dict[str, str] = {}
        self._tell_lost = False
        self._budget_warned = False  # the "cannot check the budget" notice is shown once per kernel

    # -- where we are ------------------------------------------------------------------------------
    @property
    def notebook(self) -> Path | None:
        return notebook_path(getattr(self.shell, "user_ns", None))

    def _notebook_str(self) -> str | None:
        nb = self.notebook
        return str(nb) if nb else None

    @property
    def root(self) -> Path:
        return project_root(self.notebook or Path.cwd())

    @property
    def tasks(self) -> TaskList:
        return tasks_of(self.session)

    def history(self) -> PromptHistory:
        return PromptHistory.for_project(self.root)

    def notes(self, enabled: bool | None = None) -> NoteStore | None:
        on = self.config.memory if enabled is None else enabled
        return NoteStore.for_project(self.root) if on else None

    def memories(self, model: str | None = None) -> MemoryStore:
        return MemoryStore.for_project(self.root, model or self.config.model, self.muted)

    # -- which session -------------------------------------------------------------------------------
    def switch_to(self, session: Session) -> None:
        """Make ``session`` current: the old one is saved (if it has messages) and stops autosaving."""
        self.autosaver.close()
        self.session = session
        if session.notebook_path is None:
            session.notebook_path = self._notebook_str()
        self.autosaver = Autosaver(self.store, session, lambda: self.config.model)
        self.started = True
        self.lost, self._tell_lost = {}, False

    def start(self, *, new: bool = False, cont: bool = False, resume: str | None = None) -> str | None:
        """Choose the session before a turn; returns the one line to show (or None).

        The first ``%shiro`` of a kernel continues the newest session recorded for this notebook;
        ``--new`` starts a fresh one; ``-c`` continues the newest for this notebook; ``-r PREFIX``
        resumes by id or unique prefix. The model and agent variant are never restored.
        """
        if resume:
            return self.resume(resume, line=resumed_line)
        if new:
            self.switch_to(Session(notebook_path=self._notebook_str()))
            return None
        if cont or not self.started:
            info = self.store.latest_for_notebook(self._notebook_str(), cwd=str(Path.cwd()))
            if info is None or info.id == self.session.id:
                self.started = True
                if cont and info is None:
                    raise AgentError("no saved session for this notebook")
                return None
            session = self.store.load(info.id)
            if session is None:
                self.started = True
                return None
            self.switch_to(session)
            return self._with_restart_notice(resumed_line(session))
        return None

    def _user_ns(self) -> dict[str, Any] | None:
        ns = getattr(self.shell, "user_ns", None)
        return ns if isinstance(ns, dict) else None

    def _check_restart(self) -> str:
        """After a resume: which variables of the session's earlier turns this kernel lacks. Returns
        the one-line notice for the cell ('' when none are missing)."""
        self.lost = restart.missing(self.session.messages, self._user_ns())
        self._tell_lost = bool(self.lost)
        return restart.notice(list(self.lost))

    def _with_restart_notice(self, line: str) -> str:
        # the request validator also runs on resume: a record written by an older version, edited by
        # hand or cut short by a crash is repaired once, here, and the user is told what changed
        fixed, repairs = rules.check_and_repair(self.session.messages, store=self.config.store)
        shown = rules.notable(repairs)
        if shown:
            self.session.messages[:] = fixed
            self.session.changed()
            line += "\nrepaired the resumed history: " + "; ".join(shown)
        notice = self._check_restart()
        return f"{line}\n{notice}" if notice else line

    def lost_now(self) -> list[str]:
        """The lost variables that are still missing from the namespace."""
        ns = self._user_ns()
        return [n for n in self.lost if ns is not None and n not in ns]

    def rebuild(self) -> str:
        """``/rebuild``: re-run the recorded code that made the lost variables, in order and each
        block once, through the ``python`` tool with the approval rules of a turn."""
        ns = self._user_ns()
        if ns is None:
            return "nothing to rebuild: there is no kernel namespace here"
        lost = restart.missing(self.session.messages, ns)
        if not lost:
            return "nothing to rebuild: every variable the earlier turns created still exists"
        approval = self.config.approval
        if approval == "read-only":
            return READ_ONLY_DENIAL.format(name="/rebuild")
        if approval != "auto" and "python" not in self.session.always_allowed:
            return HEADLESS_DENIAL.format(name="/rebuild").replace(" and ask again.", " and run /rebuild again.")
        from .tools import run_tool

        ctx = ToolContext(root=self.root, shell=self.shell, notebook_path=self.notebook)
        blocks = restart.rebuild_code(self.session.messages, lost)
        failures: list[str] = []
        for number, code in enumerate(blocks, 1):
            call = ToolCallPart(f"rebuild_{number}", "python", json.dumps({"code": code}))
            result = run_tool(self._tools, call, ctx)
            if result.is_error or result.output.lstrip().startswith("Error"):
                first = (result.output.strip().splitlines() or [""])[0][:160]
                failures.append(f"block {number}: {first}")
        still = [n for n in lost if n not in ns]
        made = [n for n in lost if n in ns]
        self.lost = {n: lost[n] for n in still}
        runs = f"{len(blocks)} code block" + ("" if len(blocks) == 1 else "s")
        lines = [f"rebuilt {', '.join(made) if made else 'nothing'} ({runs} re-run)"]
        if still:
            lines.append(f"still missing: {', '.join(still)}")
        lines += failures
        return "\n".join(lines)

    def resume(self, prefix: str, line: Callable[[Session], str] | None = None) -> str:
        try:
            sid = self.store.resolve(prefix)
        except Ambiguous as exc:
            raise AgentError(not_found_message(prefix, exc)) from None
        session = self.store.load(sid) if sid else None
        if session is None:
            raise AgentError(not_found_message(prefix))
        self.switch_to(session)
        if line is not None:
            return self._with_restart_notice(line(session))
        from .sessions import title_of

        return self._with_restart_notice(
            f"resumed {session.id[:8]} ({len(session.messages)} messages): {title_of(session.messages)}")

    def footer(self) -> str:
        meter = self.budget_meter()
        tail = f" · {meter}" if meter else ""
        return resume_hint(self.session) + tail

    def budget_meter(self) -> str:
        """``$0.0123 of $0.50 budget`` (the session's spend); '' without a budget."""
        budget = self.config.budget_usd
        if budget is None:
            return ""
        spent = self.session.usage.cost_usd
        if spent is None and price_of(self.config.model) is None:
            return f"{budget_money(budget)} budget not checked (no price for {self.config.model})"
        return f"{money(spent or 0.0)} of {budget_money(budget)} budget"

    # -- the provider, rebuilt when its settings change -------------------------------------------------
    def provider(self, model: str | None = None, reasoning_effort: str | None = None) -> Provider:
        c = self.config
        settings = ProviderSettings(model=model or c.model, api=c.api, base_url=c.base_url, store=c.store,
                                    stream=c.stream, timeout_s=c.timeout_s, max_retries=c.max_retries,
                                    reasoning_effort=reasoning_effort)
        key = (settings.model, settings.api, settings.base_url, settings.store, settings.stream,
               settings.timeout_s, settings.max_retries, reasoning_effort)
        if self._provider is None or key != self._provider_key:
            self._provider, self._provider_key = Provider(settings), key
        return self._provider

    def ask_model(self, system: str, prompt: str) -> str:
        """One plain model call with no tools (``/memory``); raises with the provider's sentence."""
        text = None
        for event in self.provider().stream(system, [Message.user(prompt)], [], None):
            if isinstance(event, Error):
                raise RuntimeError(event.message)
            if isinstance(event, Done):
                text = event.message.text
        return text or ""

    # -- a turn ------------------------------------------------------------------------------------
    def ask(self, prompt: str, *, on_event: Callable[[Event], None] | None = None, model: str | None = None,
            agent: str | None = None, memory: bool | None = None, headless: bool = True,
            propose: Callable[[str], None] | None = None, approver: Any = None, runner: Any = None,
            keep_abort: bool = False) -> TurnEnd:
        """One turn. ``approver``/``runner`` (see :class:`~shiro_kernel.turn.TurnOptions`) let a
        background turn ask through buttons and run tools on the kernel's thread; ``keep_abort``: the
        caller cleared :attr:`abort` before starting the turn's thread (a Stop may already have come)."""
        try:
            variant, spec = agent_variant(self.config, agent)
        except ValueError as exc:
            raise AgentError(str(exc)) from None
        root, notebook = self.root, self.notebook
        model = model or self.config.model
        emit = on_event or (lambda e: None)
        if not self.started:
            self.start()
            if self.lost:
                emit(Notice(restart.notice(list(self.lost)), kind="warning"))
        notes = self.notes(memory)
        memories = self.memories(model) if (self.config.memory if memory is None else memory) else None
        provenance = {"sessionId": self.session.id, "notebook": str(notebook) if notebook else None,
                      "cell": getattr(self.shell, "execution_count", None), "gitCommit": git_commit(root)}
        if memories is not None:
            memories.provenance = provenance
        ctx = ToolContext(root=root, shell=self.shell, notebook_path=notebook, propose=propose,
                          extras={"tasks": self.tasks, "notes": notes, "memories": memories,
                                  "provenance": provenance})
        approval = self.config.approval
        # memory is read once, at the start of the turn; the task list is re-read on every step
        boot = [block for block in (notes.render_boot() if notes else "",
                                    memories.prompt_block() if memories else "") if block]
        tasks = self.tasks
        # what changed since the last turn: variables lost to a kernel restart (first turn after a
        # resume only), and cells edited or run outside the agent
        tell_lost, self._tell_lost = self._tell_lost, False
        before = self.session.cells
        now = cell_changes.fingerprint(notebook)
        changed = cell_changes.block(before, now) if before is not None else ""

        def lost_block() -> str:
            return restart.prompt_block(self.lost_now()) if tell_lost else ""

        def system() -> str:
            return build_system_prompt(root=str(root), notebook=str(notebook) if notebook else None,
                                       approval=approval, agent=variant, variant_prompt=str(spec.get("prompt", "")),
                                       blocks=[lambda: "\n".join(boot), tasks.render_prompt_block, lost_block,
                                               lambda: changed])

        self.history().append(prompt)
        if not keep_abort:
            self.abort.clear()
        max_steps = int(spec.get("max_steps") or self.config.max_steps)  # type: ignore[call-overload]
        options = TurnOptions(approval=approval, max_steps=max_steps, headless=headless,
                              compact_threshold=self.config.compact_threshold, store=self.config.store)
        if approver is not None:
            options.approver = approver
        if runner is not None:
            options.runner = runner
        budget = self.config.budget_usd
        if budget is not None:
            if price_of(model) is None:
                if not self._budget_warned:
                    self._budget_warned = True
                    emit(Notice(f"Shiro.budget_usd is {budget_money(budget)}, but {model} has no known price, so "
                                "the budget cannot be checked; turns are not stopped by it", kind="warning"))
            else:
                options.budget_usd = float(budget)
        effort = spec.get("reasoning_effort")
        turn = Turn(self.session, self.provider(model, str(effort) if effort else None), self._tools, ctx, system,
                    options, on_event=emit, abort=self.abort)
        try:
            return turn.run(prompt)
        finally:
            self._snapshot_cells(notebook)

    def _snapshot_cells(self, notebook: Path | None) -> None:
        """Keep the notebook's cell fingerprint with the session (the next turn compares against it)."""
        rows = cell_changes.fingerprint(notebook)
        if rows is not None and rows != self.session.cells:
            self.session.cells = rows
            if self.session.messages:
                self.session.changed()


class TextView:
    """The blocking view: one display that is updated (throttled) as the turn streams, ending with
    the answer and one line per tool call. The display carries Markdown, HTML and the
    ``application/vnd.shiro.turn+json`` bundle, so the notebook shows the turn without a kernel too.

    ``details`` supplies what the bundle and footer need beyond the events (session id, task list,
    context percentage, resume hint)."""

    def __init__(self, live: bool = True, interval: float = 0.1,
                 details: Callable[[], dict[str, Any]] | None = None) -> None:
        self.live = live  # False (terminal): print once at the end instead of redrawing
        self.log = TurnLog()
        self.throttle = Throttle(interval)
        self.details = details or (lambda: {})
        self.handle: Any = None

    def bundle(self, final: bool = False) -> dict[str, Any]:
        if not final:  # while streaming, Markdown is enough and cheap
            return {"text/markdown": to_markdown(self.log) or "*working…*",
                    "text/plain": to_text(self.log) or "working…"}
        d = self.details()
        extra = d.get("footer", "")
        return {
            "text/plain": to_text(self.log, extra),
            "text/markdown": to_markdown(self.log, extra),
            "text/html": to_html(self.log, extra),
            TURN_MIME: to_bundle_json(self.log, session_id=d.get("session_id"), tasks=d.get("tasks"),
                                      context_percent=d.get("context_percent"), resume=d.get("resume")),
        }

    def __call__(self, event: Event) -> None:
        changed = self.log.feed(event)
        if isinstance(event, TurnEnd):
            self.show(final=True)
        elif changed and self.live and self.throttle.ready():
            self.show()

    def show(self, final: bool = False) -> None:
        from IPython.display import display

        data = self.bundle(final)
        if self.handle is None:
            self.handle = display(data, raw=True, display_id=True)
        else:
            self.handle.update(data, raw=True)
