"""A turn as a value: what one prompt runs with, built once, then run.

* :class:`Frontend` is what the view brings to a turn: where its events go, and the seams a view provides
  (an approver that asks, a runner that runs a tool on the kernel's thread, an asker for a repository's MCP
  servers). :data:`HEADLESS` is the blocking, buttonless one (nbclient, papermill, ``--wait``).
* :class:`TurnSetup` is everything the turn loop needs — the model and its provider, the tools, the tool
  context, the system prompt, the options — decided once by
  :meth:`shiro_kernel.agent.Agent.setup` from the agent's state and the parsed line.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .approval import Approver, headless_approver

if TYPE_CHECKING:
    from .events import Event
    from .mcp.consent import ConsentAsker
    from .session import Session
    from .tools import Tool, ToolContext
    from .turn import ProviderLike, Runner, Turn, TurnOptions


def _ignore(event: Event) -> None:
    return None


@dataclass(frozen=True)
class Frontend:
    """How a turn reaches the user."""

    on_event: Callable[[Event], None] = _ignore
    #: no view can show buttons: calls that need approval are refused, saying how to allow them
    headless: bool = True
    approver: Approver = headless_approver
    #: where a tool runs (None: on the turn's own thread)
    runner: Runner | None = None
    #: asks whether a repository's MCP server may start (None: such servers do not start)
    consent: ConsentAsker | None = None


HEADLESS = Frontend()


@dataclass(frozen=True)
class TurnSetup:
    prompt: str
    model: str
    #: the agent variant's name (``default``, ``deep``, or the user's own)
    variant: str
    provider: ProviderLike
    tools: Mapping[str, Tool]
    context: ToolContext
    #: the instructions: the same for every step and turn of a session (a prefix cache serves them)
    system: str
    #: what changes step by step (the task list …), sent after the conversation
    state: Callable[[], str]
    options: TurnOptions
    #: the view's events, with what the agent does at the turn's end (save, notices) before the view sees it
    on_event: Callable[[Event], None]

    def turn(self, session: Session, abort: threading.Event) -> Turn:
        from .turn import Turn

        return Turn(
            session,
            self.provider,
            dict(self.tools),
            self.context,
            lambda: self.system,
            self.options,
            on_event=self.on_event,
            abort=abort,
            state=self.state,
        )


__all__ = ["HEADLESS", "Frontend", "TurnSetup"]
