"""The seed's slash commands, as plain functions of an :class:`~shiro_kernel.agent.Agent` returning the
text to show (``%shiro /todos``, ``%shiro /sessions`` ...)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from .notes import DISABLED as MEMORY_DISABLED
from .sessions import format_rows

if TYPE_CHECKING:
    from .agent import Agent

HELP = """slash commands:
  /todos          the task list
  /notes          what shiro remembers about this project
  /memory         merge unused notes (past 60 entries, at least two unused)
  /compact        replace the transcript with a summary written by the model
  /clear          start a fresh session (the old one stays resumable)
  /sessions       the last 15 sessions
  /resume ID      resume a session by id or unique prefix
  /save           write the session record now
  /cost           tokens and cost of this session
  /rebuild        re-run the recorded code of variables a kernel restart lost
  /history        this project's prompt history
  /help           this list"""


def _todos(agent: Agent, arg: str) -> str:
    return agent.tasks.render()


def _notes(agent: Agent, arg: str) -> str:
    store = agent.notes()
    if store is None:
        return MEMORY_DISABLED
    listing = store.format_list()
    return f"{store.notice}\n{listing}" if getattr(store, "notice", None) else listing


def _memory(agent: Agent, arg: str) -> str:
    store = agent.notes()
    if store is None:
        return MEMORY_DISABLED
    return store.summarize(agent.ask_model)


def _compact(agent: Agent, arg: str) -> str:
    from .compact import compact_message, compact_session

    before, after, error = compact_session(agent.session, agent.provider(),
                                           threshold=agent.config.compact_threshold)
    if error:
        return f"compact failed, the transcript is unchanged: {error}"
    return compact_message(before, after)


def _clear(agent: Agent, arg: str) -> str:
    from .session import Session

    old = agent.session
    agent.switch_to(Session(notebook_path=old.notebook_path))
    if old.messages:
        return f"cleared; the previous session stays resumable with %shiro -r {old.id[:8]}"
    return "cleared"


def _sessions(agent: Agent, arg: str) -> str:
    return format_rows(agent.store.list(15))


def _resume(agent: Agent, arg: str) -> str:
    if not arg:
        return "usage: /resume <session-id>"
    from .agent import AgentError

    try:
        return agent.resume(arg)
    except AgentError as exc:
        return str(exc)


def _save(agent: Agent, arg: str) -> str:
    if not agent.session.messages:
        return "nothing to save yet: the session has no messages"
    if agent.autosaver.flush():
        return f"saved {agent.session.id}"
    return f"could not save: {agent.autosaver.last_error}"


def _cost(agent: Agent, arg: str) -> str:
    u = agent.session.usage
    cost = f"${u.cost_usd:.4f}" if u.cost_usd is not None else f"unknown (no price for {agent.config.model})"
    meter = agent.budget_meter()
    return (f"session {agent.session.id[:8]}: {u.input_tokens:,} input + {u.output_tokens:,} output tokens, "
            f"cost {cost}" + (f" ({meter})" if meter else ""))


def _rebuild(agent: Agent, arg: str) -> str:
    return agent.rebuild()


def _history(agent: Agent, arg: str) -> str:
    from .history import format_history

    return format_history(agent.history().entries())


def _help(agent: Agent, arg: str) -> str:
    return HELP


COMMANDS: dict[str, Callable[[Agent, str], str]] = {
    "/todos": _todos, "/notes": _notes, "/memory": _memory, "/compact": _compact, "/clear": _clear,
    "/sessions": _sessions, "/resume": _resume, "/save": _save, "/cost": _cost, "/rebuild": _rebuild, "/history": _history,
    "/help": _help,
}


def run(agent: Agent, line: str) -> str:
    name, _, arg = line.strip().partition(" ")
    command = COMMANDS.get(name.lower())
    if command is None:
        import difflib

        close = difflib.get_close_matches(name.lower(), list(COMMANDS), n=1, cutoff=0.75)
        hint = f"did you mean {close[0]}? " if close else ""
        return f"unknown command {name}; {hint}try /help"
    return command(agent, arg.strip())
