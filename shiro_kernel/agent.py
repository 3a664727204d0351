"""The agent of one kernel: settings, the project's stores, and turns; the session is its :attr:`Agent.current`.

The magic chooses the session (``agent.current.start``), asks for a turn (:meth:`Agent.ask`) and runs slash
commands (:func:`shiro_kernel.commands.run`). A turn goes in two visible steps: its side effects in one, which
build the :class:`~shiro_kernel.turn.Turn` (:meth:`Agent.begin`: the session started or resumed, the notebook
attached, a repository's MCP servers started, the instructions built), and the run, its events going through its
observers in order — the write-ahead, the replay record, the side notices, the cell snapshot, the egress ledger,
the save, the numbers check, the view. Nothing here draws
anything: the views in :mod:`shiro_kernel.ui` draw the events. Everything runs without a kernel too (a plain
``InteractiveShell`` or ``shell=None``), which is how it is tested.

Failures are exceptions from :mod:`shiro_kernel.errors`; the magic and the commands turn them into
one line for the user.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from .config import Shiro, agent_variant
from .context import restart, workspace
from .context.offer import Offer, lean_for, with_loader
from .context.prompt import Kept
from .current import Current
from .errors import RequestError
from .events import Event, Notice, Observer, TurnEnd
from .ids import uuid7
from .line import Line
from .location import Location
from .mcp.link import McpLink, McpSeams
from .memory.session_memory import SessionMemory
from .numbers.turn_check import LastAnswer
from .numbers.verify import verifies
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
from .store.paths import home
from .store.sessions import SessionStore
from .store.writeahead import WriteAhead, changes_something
from .tools import Tool, ToolContext, all_tools
from .turn import HEADLESS, Frontend, Turn, TurnOptions
from .undo.kernel import Undo

if TYPE_CHECKING:
    from .provider.client import Provider

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
            settings=self.config,
        )
        #: memory on or off for the session, the memories muted, the project's stores (:mod:`~.memory.session_memory`)
        self.memory = SessionMemory(self.config, where)
        self.providers = ProviderHolder(self.config, self.current)
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
                current=self.current,
                abort=self.abort,
            )
        )
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
        """One turn: its side effects first, in one step (:meth:`begin`, which builds the turn), then the turn run,
        each event going through its observers in this order.
        ``front`` is the view's (its events, and buttons where it has them); ``keep_abort``: the caller cleared
        :attr:`abort` before starting the turn's thread (a Stop may already have come). Raises
        :class:`RequestError` for a bad line."""
        line = Line(prompt=line) if isinstance(line, str) else line
        turn = self.begin(line, front)
        current, session, turn_id = self.current, turn.session, turn.turn_id
        observers: list[Observer | None] = [
            WriteAhead(current.autosaver, changes_something(self.tools)),  # a call that changes something, first
            ReplayRecord(session, line, self.tools, ran=self.turns_here, turn_id=turn_id),
            SideNotices(self._side(line)),
            CellSnapshot(partial(current.snapshot_cells, self.location.notebook)),
            EgressLedger(session, turn_id),
            SaveRecord(session, current.save_now),
            self.numbers.check(line.prompt, session, self.config.check_numbers),  # None: not checked
            front.on_event,
        ]
        turn = replace(turn, observers=tuple(o for o in observers if o is not None))
        if not keep_abort:
            self.abort.clear()
        self.current.turning = True
        try:
            return turn.run(line.prompt)
        finally:
            self.current.turning = False
            self.mcp.flush_notes()  # what other agents did meanwhile

    def begin(self, line: Line, front: Frontend = HEADLESS) -> Turn:
        """The side effects before a turn, in one place: the session started (or resumed, the variables it lost
        told), the model chosen, the notebook attached, a repository's MCP servers started (asking where they
        must), the instructions built (once per session), the provider ready. What they made is the
        :class:`~shiro_kernel.turn.Turn` to run (its observers are :meth:`ask`'s); what they have to say goes to
        the view now."""
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
        provider = self._provider(model, spec)
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
        system, said = self._kept.instructions(  # the same bytes for every step and turn of the session
            context,
            current.session.id,
            model=model,
            memory=(self.memory.enabled(), tuple(self.memory.muted)),
            approval=self.config.approval,
            tools=self.tools.values(),
            variant=line.agent or self.config.agent,
            variant_prompt=str(spec.get("prompt", "")),
            lean=offer.lean,
        )
        for notice in said:
            emit(notice)
        state = current.step_state(
            context.notebook_path,
            values=values,
            notes=(
                self.numbers.note(current.session, self.config.check_numbers),  # the last answer's, all turn
                self.undo.journal.note(),  # steps the user took back since the model last heard: told all turn
            ),
        )
        turn_id = uuid7()
        return Turn(
            current.session,
            provider,
            offered,
            context,
            system,
            self._options(spec, model, turn_id, emit),
            abort=self.abort,
            state=state,
            wire=current.wire,
            specs=offer.specs,
            workspace=data.told,
            answer_step=data.answer_step,
            verifier=data.verifier,
            front=front,
            turn_id=turn_id,
        )

    def _provider(self, model: str, spec: Mapping[str, object]) -> Provider:
        """The provider for the turn's settings (the same while they stay), sending the images its profile allows
        and the session's private values masked (:mod:`~shiro_kernel.private`)."""
        effort = spec.get("reasoning_effort")
        provider = self.providers.get(model, str(effort) if effort else None)
        provider.images = assets().data_url if self.config.vision is not False else None
        provider.private = partial(self.private.mask_for, self.current.session)
        return provider

    def _options(
        self, spec: Mapping[str, object], model: str, turn_id: str, emit: Callable[[Event], None]
    ) -> TurnOptions:
        """What the turn decides by: the approval mode, the variant's step limit (else ``Shiro.max_steps``), the
        pruning threshold, the provider's storage, the session's spend limit where it can be checked (said once
        where it cannot), undo's checkpoints under the turn's id."""
        return TurnOptions(
            approval=self.config.approval,
            max_steps=int(spec.get("max_steps") or self.config.max_steps),  # type: ignore[call-overload]
            compact_threshold=self.config.compact_threshold,
            store=self.config.store,
            budget_usd=self.spend.for_model(model, emit),
            checkpoint=self.undo.checkpointer(turn_id),
        )

    def _tool_context(self, model: str) -> ToolContext:
        """What the tools may touch this turn: the project, the kernel, the task list, the memory stores."""
        provenance = self.memory.provenance(self.current.session.id)
        return self.location.tool_context(
            abort=self.abort,
            image_max_px=self.config.image_max_px,
            tasks=self.current.session.tasks,
            notes=self.memory.notes(),
            memories=self.memory.in_use(model, provenance),
            provenance=provenance,
            notebook=self.location.live,
            approval=self.config.approval,
            approval_timeout_s=self.config.approval_timeout_s,
            check=check_saved,
            private_in=self.private.drawn_from,
        )

    def mcp_context(self) -> ToolContext:
        """The tool context of another agent's call through ``/mcp serve`` (no Stop: it is not a turn)."""
        return self.location.tool_context(
            image_max_px=self.config.image_max_px,
            tasks=self.current.session.tasks,
            notes=self.memory.notes(),
            memories=self.memory.in_use(),
            check=check_saved,
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
        if self.current.turning:
            return UNDO_WHILE_TURNING
        return self.undo.back(
            call_id, self.location.namespace, self.location.live, self.current.session, on_main=on_main, force=force
        )

    # -- the turn's observers -------------------------------------------------------------------------
    def _side(self, line: Line) -> list[Callable[[], Iterable[Notice]]]:
        """What is said on the side when the turn ends (:class:`~shiro_kernel.recorder.SideNotices`): the prompt
        history, appended meanwhile off the turn's path; an older, looser SHIRO_HOME made private once per kernel;
        MCP's notices; the steps the user took back."""
        history_job = files.background(self.location.history().append, line.prompt)
        self.tighten.start()
        return [partial(history_notice, history_job), self.tighten.notices, self.mcp.notices, self.undo.notices]

    def close(self) -> None:
        """Stop autosaving (writing what is pending) and MCP: ``%unload_ext`` and kernel shutdown."""
        self.mcp.close()
        self.current.autosaver.close()
