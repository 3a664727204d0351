"""The agent of one kernel: settings, the project's stores, and turns; the session is its :attr:`Agent.current`.

The magic chooses the session (``agent.current.start``), asks for a turn (:meth:`Agent.ask`) and runs slash
commands (:func:`shiro_kernel.commands.run`). A turn goes in three visible steps: its side effects in one
(:meth:`Agent.begin`: the session started or resumed, the notebook attached, a repository's MCP servers started,
the instructions built), a pure plan (:func:`shiro_kernel.plan.plan`), and the run, its events going through
its observers in order — the write-ahead, the recorder, the numbers check, the view. Nothing here draws
anything: the views in :mod:`shiro_kernel.ui` draw the events. Everything runs without a kernel too (a plain
``InteractiveShell`` or ``shell=None``), which is how it is tested.

Failures are exceptions from :mod:`shiro_kernel.errors`; the magic and the commands turn them into
one line for the user.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

from .config import Shiro, agent_variant
from .context import cell_changes, restart, workspace
from .context.offer import Offer, lean_for, with_loader
from .context.prompt import Kept, session_instructions, step_state
from .current import Current
from .errors import RequestError
from .events import Event, Notice, Observer, TurnEnd
from .line import Line
from .location import Location
from .mcp.link import McpLink, McpSeams
from .memory.session_memory import SessionMemory
from .numbers.turn_check import LastAnswer
from .numbers.verify import verifies
from .plan import Ready, plan
from .private.kernel import PrivateValues
from .private.schema_only import SCHEMA_ONLY
from .provider.holder import ProviderHolder
from .provider.pricing import SpendLimit, price_of
from .recorder import (
    CellSnapshot,
    EgressLedger,
    SaveRecord,
    SideNotices,
    TightenOnce,
    history_notice,
)
from .rerun.check import NO_MODEL_IN_CHECK, check_saved
from .rerun.record import ReplayRecord
from .store import files
from .store.assets import assets
from .store.ids import uuid7
from .store.paths import git_commit, home
from .store.sessions import SessionStore
from .store.writeahead import WriteAhead, changes_something
from .tools import Tool, ToolContext, all_tools
from .turn import HEADLESS, Frontend
from .undo.kernel import Undo

#: ``/undo`` while a turn runs: the steps it takes back may be the ones the turn builds on
UNDO_WHILE_TURNING = "not undone: a turn is running; take steps back once it has ended (Stop ends it now)"


class Agent:
    def __init__(self, shell: Any = None, config: Shiro | None = None) -> None:
        self.shell = shell
        self.config = config or Shiro(parent=shell)
        #: the notebook, the project root, the namespace and the live document (:mod:`~shiro_kernel.location`)
        self.location = where = Location(shell)
        self.current = Current(
            SessionStore(home() / "sessions"),
            notebook=where.notebook_str,
            namespace=where.namespace,
            store_setting=lambda: bool(self.config.store),
            model=lambda: str(self.config.model),
        )
        #: memory on or off for the session, the memories muted, the project's stores (:mod:`~.memory.session_memory`)
        self.memory = SessionMemory(self.config, where)
        self.providers = ProviderHolder(self.config, lambda: self.current.session.id)
        self.tools: dict[str, Tool] = all_tools()
        self.abort = threading.Event()
        self.spend = SpendLimit(self.config)  # "cannot check the budget": once per kernel
        #: MCP both ways: the user's servers for turns (started on first need), ``/mcp serve``
        self.mcp = McpLink(
            McpSeams(
                settings=self.config,
                tools=self.tools,
                shell=self.shell,
                context=self.mcp_context,
                session=lambda: self.current.session,
                busy=lambda: self.turning,
                abort=self.abort,
            )
        )
        self.turning = False  # a turn is running (other agents' calls are recorded when it ends)
        #: the ids of the turns run or replayed in this kernel: a rerun of their cell asks the model
        self.turns_here: set[str] = set()
        self.tighten = TightenOnce()  # making an older SHIRO_HOME private, once
        self._kept = Kept()  # the session's instructions, by what they hold
        self.numbers = LastAnswer()  # each live turn's answer checked against its outputs (Shiro.check_numbers)
        #: the undo checkpoints of this kernel's turns (memory only, within Shiro.undo_max_mb)
        self.undo = Undo(self.config)
        #: what is private (``Shiro.private``, ``/private``, the project's file, the policy), masked at the boundary
        self.private = PrivateValues(self.config, where)

    def rebuild(self) -> str:
        """``/rebuild``: re-run the recorded code that made the lost variables (see :mod:`context.restart`)."""
        text, self.current.lost = restart.rebuild(
            self.current.session,
            self.location.namespace(),
            self.tools,
            self.config.approval,
            ToolContext(root=self.location.root, shell=self.shell, notebook_path=self.location.notebook),
            self.undo.checkpointer(uuid7()),  # the rebuild is a turn of its own for undo
        )
        return text

    # -- a turn ------------------------------------------------------------------------------------
    def ask(self, line: Line | str, front: Frontend = HEADLESS, *, keep_abort: bool = False) -> TurnEnd:
        """One turn: its side effects first, in one step (:meth:`begin`), then the turn planned from what that made
        ready (:func:`~shiro_kernel.plan.plan`) and run, each event going through its observers in this order.
        ``front`` is the view's (its events, and buttons where it has them); ``keep_abort``: the caller cleared
        :attr:`abort` before starting the turn's thread (a Stop may already have come). Raises
        :class:`RequestError` for a bad line."""
        line = Line(prompt=line) if isinstance(line, str) else line
        ready = self.begin(line, front)
        current, notebook = self.current, self.location.notebook
        observers: list[Observer | None] = [
            self._write_ahead(),
            ReplayRecord(ready.session, line, self.tools, ran=self.turns_here, turn_id=ready.turn_id),
            SideNotices(self._side(line)),
            CellSnapshot(partial(current.snapshot_cells, notebook)),
            EgressLedger(ready.session, ready.turn_id),
            SaveRecord(ready.session, current.save_now),
            self._numbers(line, ready),
            front.on_event,
        ]
        turn = plan(ready, line, front, self.config, [o for o in observers if o is not None], self.abort)
        if not keep_abort:
            self.abort.clear()
        self.turning = True
        try:
            return turn.run(line.prompt)
        finally:
            self.turning = False
            self.mcp.flush_notes()  # what other agents did meanwhile

    def begin(self, line: Line, front: Frontend = HEADLESS) -> Ready:
        """The side effects before a turn, in one place: the session started (or resumed, the variables it lost
        told), the model chosen, the notebook attached, a repository's MCP servers started (asking where they
        must), the instructions built (once per session), the provider ready. What they made is :class:`Ready`;
        what they have to say goes to the view now."""
        _, spec = agent_variant(self.config, line.agent)
        if os.environ.get("SHIRO_CHECKING"):  # ``shiro check``'s own kernel: it reruns a notebook, never asks
            raise RequestError(NO_MODEL_IN_CHECK)
        self.location.new_turn()
        emit, current = front.on_event, self.current
        if not current.started:
            current.start()
            if current.lost:
                emit(Notice(restart.notice(list(current.lost)), kind="warning"))
        self.mcp.flush_notes()
        model = current.session.model = line.model or self.config.model
        self.location.attach(line.cell_id)
        context = self._tool_context(model)
        effort = spec.get("reasoning_effort")
        provider = self.providers.get(model, str(effort) if effort else None)
        provider.images = assets().data_url if self.config.vision is not False else None  # as its profile allows
        provider.private = partial(self.private.mask_for, current.session)
        values = provider.settings.values != SCHEMA_ONLY  # the policy's ``values: schema-only``: none leave
        tools = {**self.tools, **self.mcp.tools_for_turn(context.root, emit, self.abort, front.consent)}
        lean = lean_for(str(self.config.request), provider.profile.local, price_of(model) is not None)
        offer = Offer(tools, lean, current.wire.loaded)
        offered = with_loader(tools, offer)
        provider.passing = frozenset(name for name, tool in offered.items() if not tool.values)
        ns, hidden = self.location.namespace(), self.location.hidden()
        data = workspace.data_steps(
            line.prompt,
            ns,
            context,
            hidden,
            lean=offer.lean,
            code_blocks=provider.reads_text_calls,
            verify=verifies(self.config.verify_answers, lean),
            values=values,
        )
        return Ready(
            session=current.session,
            wire=current.wire,
            variant=spec,
            provider=provider,
            tools=offered,
            context=context,
            system=self._instructions(
                context, line.agent or self.config.agent, str(spec.get("prompt", "")), emit, offer
            ),
            state=self._state(context, values),
            budget_usd=self.spend.for_model(model, emit),
            turn_id=(turn_id := uuid7()),
            checkpoint=self.undo.checkpointer(turn_id),
            specs=offer.specs,
            workspace=data.told,
            answer_step=data.answer_step,
            verifier=data.verifier,
        )

    def _tool_context(self, model: str) -> ToolContext:
        """What the tools may touch this turn: the project, the kernel, the task list, the memory stores."""
        root, notebook = self.location.root, self.location.notebook
        notes = self.memory.notes()
        memories = self.memory.in_use(model)
        provenance = {
            "sessionId": self.current.session.id,
            "notebook": str(notebook) if notebook else None,
            "cell": getattr(self.shell, "execution_count", None),
            "gitCommit": git_commit(root),
        }
        if memories is not None:
            memories.provenance = provenance
        return ToolContext(
            root=root,
            shell=self.shell,
            notebook_path=notebook,
            abort=self.abort,
            image_max_px=self.config.image_max_px,
            tasks=self.current.session.tasks,
            notes=notes,
            memories=memories,
            provenance=provenance,
            notebook=self.location.live,
            approval=self.config.approval,
            approval_timeout_s=self.config.approval_timeout_s,
            check=check_saved,
            private_in=self.private.drawn_from,
        )

    def mcp_context(self) -> ToolContext:
        """The tool context of another agent's call through ``/mcp serve`` (no Stop: it is not a turn)."""
        return ToolContext(
            root=self.location.root,
            shell=self.shell,
            notebook_path=self.location.notebook,
            image_max_px=self.config.image_max_px,
            tasks=self.current.session.tasks,
            notes=self.memory.notes(),
            memories=self.memory.in_use(),
            check=check_saved,
        )

    def _instructions(
        self, ctx: ToolContext, variant: str, variant_prompt: str, emit: Callable[[Event], None], offer: Offer
    ) -> str:
        """The system prompt, built once per session (when it starts, resumes or is cleared) and the same bytes
        for every step and turn after, so a provider's prefix cache serves it (:class:`~.context.prompt.Kept`):
        identity, environment, the repository's AGENTS.md and the memory injected at the start of the session.
        What changes as the session goes is in :meth:`_state`, after the conversation."""
        session = self.current.session
        model = session.model or self.config.model
        key: tuple[object, ...] = (session.id, variant, variant_prompt, self.config.approval)
        key += (
            str(ctx.root),
            str(ctx.notebook_path),
            model,
            self.memory.enabled(),
            tuple(self.memory.muted),
            offer.lean,
        )
        asking = [t.name for t in self.tools.values() if t.needs_approval and (not offer.lean or t.lean)]
        text, warnings, greeting = self._kept.get(
            key,
            session.id,
            partial(
                session_instructions,
                ctx,
                approval=self.config.approval,
                asking=asking,
                variant=variant,
                variant_prompt=variant_prompt,
                lean=offer.lean,
            ),
        )
        for warning in warnings:  # AGENTS.md cut or left out, notes unreadable: said in the cell, once a session
            emit(Notice(warning, kind="warning"))
        if greeting:  # the seed's boot header, once per session start
            emit(Notice(greeting))
        return text

    def _state(self, ctx: ToolContext, values: bool) -> Callable[[], str]:
        """What changes during a session (:func:`~.context.prompt.step_state`): the task list; the variables a
        kernel restart lost (the first turn after a resume); the cells edited or run outside the agent since its
        last turn; the numbers of the last answer that no tool output had; the steps the user took back."""
        current = self.current
        tell_lost, current.tell_lost = current.tell_lost, False
        before = current.session.cells
        return step_state(
            current.session.tasks,
            current.lost_now if tell_lost else None,
            ""
            if before is None
            else cell_changes.block(before, cell_changes.fingerprint(ctx.notebook_path), values=values),
            self.numbers.note(current.session, self.config.check_numbers),  # the last answer's, all this turn
            self.undo.journal.note(),  # steps the user took back since the model last heard: told all this turn
        )

    # -- undo ------------------------------------------------------------------------------------------
    def undo_back(
        self,
        call_id: str | None = None,
        on_main: Callable[[Callable[[], str]], str] | None = None,
        *,
        force: bool = False,
    ) -> str:
        """``/undo`` and the Undo buttons (:meth:`~shiro_kernel.undo.kernel.Undo.back`), refused while a turn runs."""
        if self.turning:
            return UNDO_WHILE_TURNING
        return self.undo.back(
            call_id, self.location.namespace, self.location.live, self.current.session, on_main=on_main, force=force
        )

    # -- the turn's observers -------------------------------------------------------------------------
    def _write_ahead(self) -> Observer:
        """A call that changes something is written to the record before it runs (:mod:`~.store.writeahead`)."""
        return WriteAhead(self.current.autosaver, changes_something(self.tools))

    def _side(self, line: Line) -> list[Callable[[], Iterable[Notice]]]:
        """What is said on the side when the turn ends (:class:`~shiro_kernel.recorder.SideNotices`): the prompt
        history, appended meanwhile off the turn's path; an older, looser SHIRO_HOME made private once per kernel;
        MCP's notices; the steps the user took back."""
        history_job = files.background(self.location.history().append, line.prompt)
        self.tighten.start()
        return [partial(history_notice, history_job), self.tighten.notices, self.mcp.notices, self.undo.notices]

    def _numbers(self, line: Line, ready: Ready) -> Observer | None:
        """The answer's numbers looked up in the turn's outputs (``Shiro.check_numbers``; None: off)."""
        return self.numbers.check(line.prompt, ready.session, self.config.check_numbers)

    def close(self) -> None:
        """Stop autosaving (writing what is pending) and MCP: ``%unload_ext`` and kernel shutdown."""
        self.mcp.close()
        self.current.autosaver.close()
