"""A turn as a value, planned from what is ready and the parsed line.

* :class:`Ready` is what the side effects before a turn made ready, in one step
  (:meth:`shiro_kernel.agent.Agent.begin`): the session started or resumed, the notebook attached, the tools
  (a repository's MCP servers started), the instructions built, the provider.
* :func:`plan` turns that, the line and the view's :class:`~shiro_kernel.turn.Frontend` (whose seams the turn
  holds as they are) into a :class:`~shiro_kernel.turn.Turn`: a pure function — it reads, it changes nothing, it
  starts nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from .context.workspace import AnswerStep
from .turn import Frontend, ProviderLike, Turn, TurnOptions

if TYPE_CHECKING:
    from .config import Shiro
    from .context.wire_copy import WireState
    from .events import Observer
    from .line import Line
    from .numbers.verify import Verifier
    from .session import Session
    from .tools import Tool, ToolContext
    from .undo.checkpoints import Checkpointer


@dataclass(frozen=True)
class Ready:
    """What the side effects before a turn made ready (:meth:`shiro_kernel.agent.Agent.begin`)."""

    session: Session
    #: what the wire copy keeps of the session between turns
    wire: WireState
    #: the agent variant's settings (``prompt``, ``max_steps``, ``reasoning_effort``)
    variant: Mapping[str, object]
    provider: ProviderLike
    tools: Mapping[str, Tool]
    context: ToolContext
    #: the instructions: the same for every step and turn of a session (a prefix cache serves them)
    system: str
    #: what changes step by step (the task list …), sent after the conversation
    state: Callable[[], str]
    #: the session's spend limit, where it can be checked (the model has a price)
    budget_usd: float | None
    #: the turn's id (its record for replay and its undo checkpoints share it)
    turn_id: str = ""
    #: takes a call's undo checkpoint before it runs (None: undo is off)
    checkpoint: Checkpointer | None = None
    #: the tool schemas of each step's request (None: every tool's; a lean offer's change as the model loads more)
    specs: Callable[[], list[dict[str, object]]] | None = None
    #: what the model can work on (the data variables, the files the prompt names), told until its first call
    workspace: str = ""
    #: told the step after a call's output (a lean turn on data: answer now, in the prompt's form)
    answer_step: AnswerStep = field(default_factory=AnswerStep)
    #: checks an answer before it ends the turn (``Shiro.verify_answers``; None: not checked)
    verifier: Verifier | None = None


def plan(
    ready: Ready,
    line: Line,
    front: Frontend,
    config: Shiro,
    observers: Sequence[Observer],
    abort: threading.Event,
) -> Turn:
    """The turn ``line`` asks for, from what is ready: its options from the settings and the view, its observers
    in the order given (each event goes through them so). Pure: nothing is read from disk, started or changed."""
    steps = ready.variant.get("max_steps") or config.max_steps
    options = TurnOptions(
        approval=config.approval,
        max_steps=int(steps),  # type: ignore[call-overload]
        compact_threshold=config.compact_threshold,
        store=config.store,
        budget_usd=ready.budget_usd,
        checkpoint=ready.checkpoint,
    )
    return Turn(
        ready.session,
        ready.provider,
        dict(ready.tools),
        ready.context,
        ready.system,
        options,
        observers=tuple(observers),
        abort=abort,
        state=ready.state,
        wire=ready.wire,
        specs=ready.specs,
        workspace=ready.workspace,
        answer_step=ready.answer_step,
        verifier=ready.verifier,
        front=front,
    )


__all__ = ["Ready", "plan"]
