"""The seed's slash commands, as plain functions of an :class:`~shiro_kernel.agent.Agent` returning the
text to show (``%shiro /todos``, ``%shiro /sessions`` ...). :data:`COMMANDS` is the one table: the
dispatcher and ``/help`` are both made from it. A command that fails raises; :func:`run` turns a
:class:`~shiro_kernel.errors.ShiroError` into its one line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

from .egress import command_entry
from .recorder import EgressLedger

if TYPE_CHECKING:
    from .agent import Agent


def _todos(agent: Agent, arg: str) -> str:
    return agent.current.session.tasks.render()


#: the seed's line for /notes and /memory under --no-memory, and how to undo it
MEMORY_OFF = "memory is disabled (--no-memory)\nturn it back on with %shiro --memory"


def _notes(agent: Agent, arg: str) -> str:
    from .context.instructions import read_instructions

    store = agent.memory.notes()
    if store is None:
        return MEMORY_OFF
    read = read_instructions(agent.location.root, agent.location.notebook).listing()
    return store.format_list() + (f"\n{read}" if read else "")


def _memory(agent: Agent, arg: str) -> str:
    store = agent.memory.notes()
    if store is None:
        return MEMORY_OFF
    ledger = EgressLedger(agent.current.session, command_entry("/memory"))
    return store.summarize(lambda system, prompt: agent.providers.ask(system, prompt, ledger))


def _compact(agent: Agent, arg: str) -> str:
    from .context.compact import compact_message, compact_session
    from .errors import ShiroError

    try:
        session = agent.current.session
        ledger = EgressLedger(session, command_entry("/compact"))
        before, after = compact_session(
            session, agent.providers.get(), threshold=agent.config.compact_threshold, observe=ledger
        )
    except ShiroError as exc:
        return f"compact failed, the transcript is unchanged: {exc}"
    return compact_message(before, after)


def _clear(agent: Agent, arg: str) -> str:
    from .session import Session
    from .store.short_ids import short_id

    old = agent.current.session
    agent.current.switch_to(Session(notebook_path=old.notebook_path))
    if old.messages:
        return f"cleared; the previous session stays resumable with %shiro -r {short_id(old.id)}"
    return "cleared"


def _sessions(agent: Agent, arg: str) -> str:
    from .ui.session_text import format_rows

    return format_rows(agent.current.store.list(15))


def _resume(agent: Agent, arg: str) -> str:
    if not arg:
        return "usage: /resume <session-id>"
    from .ui.session_text import started

    return started(agent.current.resume(arg)) or ""


def _save(agent: Agent, arg: str) -> str:
    from .current import SAVE_FAILED
    from .errors import StoreError

    if not agent.current.session.messages:
        return "nothing to save yet: the session has no messages"
    try:
        note = agent.current.save_now()
    except StoreError as exc:
        return SAVE_FAILED.format(why=exc)
    return note or f"saved {agent.current.session.id}"


def _cost(agent: Agent, arg: str) -> str:
    from .store.short_ids import short_id
    from .ui.money import ESTIMATED, cost_line
    from .ui.session_text import session_budget

    u = agent.current.session.usage
    cost = cost_line(u.cost_usd, agent.current.session.model or agent.config.model)
    meter = session_budget(agent.current.session, agent.config.budget_usd, agent.config.model)
    mark = "~" if u.estimated else ""
    cached = f" ({u.cached_input_tokens:,} of them cached)" if u.cached_input_tokens else ""
    estimated = f" {ESTIMATED}" if u.estimated else ""
    return (
        f"session {short_id(agent.current.session.id)}: {mark}{u.input_tokens:,} input{cached} + {mark}{u.output_tokens:,} "
        f"output tokens{estimated}, cost {cost}" + (f" ({meter})" if meter else "")
    )


def _rebuild(agent: Agent, arg: str) -> str:
    return agent.rebuild()


def _undo(agent: Agent, arg: str) -> str:
    call_id, force = undo_args(arg)
    return agent.undo_back(call_id, force=force)


def undo_args(arg: str) -> tuple[str | None, bool]:
    """``/undo``'s arguments: the call id (None: the last turn) and whether ``--force`` was given."""
    words = arg.split()
    force = "--force" in words
    rest = [w for w in words if w != "--force"]
    return (rest[0] if rest else None), force


def _undoable(agent: Agent, arg: str) -> str:
    """For a front end: the calls whose steps can be taken back in this kernel now, as JSON."""
    import json

    return json.dumps({"calls": agent.undo.journal.undoable()})


def _history(agent: Agent, arg: str) -> str:
    from .store.history import format_history

    return format_history(agent.location.history().entries())


MCP_USAGE = "usage: /mcp [allow NAME… | deny NAME… | restart [NAME] | serve | stop]"


def _mcp(agent: Agent, arg: str) -> str:
    sub, _, rest = arg.partition(" ")
    if not sub:
        return agent.mcp.status_text(agent.location.root)
    if sub == "serve":
        return agent.mcp.serve()
    if sub == "stop":
        return agent.mcp.stop_serving()
    if sub == "restart":
        return agent.mcp.restart(agent.location.root, rest.strip() or None)
    if sub == "allow":
        return agent.mcp.allow(agent.location.root, rest.split())
    if sub in ("deny", "revoke"):
        return agent.mcp.deny(agent.location.root, rest.split())
    return MCP_USAGE


NO_NOTEBOOK = "this kernel does not know its notebook file (JupyterLab and nbclient with JPY_SESSION_NAME tell it)"


def _export(agent: Agent, arg: str) -> str:
    from .rerun.export import export_notebook

    if agent.location.notebook is None:
        return f"nothing to export: {NO_NOTEBOOK}"
    return export_notebook(agent.location.notebook, arg or None).summary()


def _check(agent: Agent, arg: str) -> str:
    from .rerun.check import check_notebook

    if agent.location.notebook is None or not agent.location.notebook.is_file():
        return f"nothing to check: {NO_NOTEBOOK}"
    return (
        check_notebook(agent.location.notebook).summary()
        + "\n(the saved file was checked: save first to check your edits)"
    )


def _policy(agent: Agent, arg: str) -> str:
    from .policy import describe

    return describe()


def _private(agent: Agent, arg: str) -> str:
    verb, _, name = arg.strip().partition(" ")
    session, values = agent.current.session, agent.private
    try:
        if verb == "add" and name.strip():
            added = values.names.add(name)
            return f"{added} is private for this session\n" + values.describe(session)
        if verb == "remove" and name.strip():
            from .private.kernel import policy_names

            removed = values.names.remove(name, policy_names())
            return f"{removed} is no longer private for this session\n" + values.describe(session)
    except ValueError as exc:
        return str(exc)
    if verb:
        return "usage: %shiro /private, /private add NAME, /private remove NAME"
    return values.describe(session)


def _egress(agent: Agent, arg: str) -> str:
    from .egress import table

    return table(agent.current.session.egress)


def _help(agent: Agent, arg: str) -> str:
    return help_text()


#: how a command runs where turns run in the background (:class:`~shiro_kernel.ui.live.LiveController`):
#: ``QUEUED`` behind the running turn and those waiting (most: they read or change the session a turn uses);
#: ``AT_ONCE``, never behind a turn (a front end asks it silently: ``/undoable`` only reads); ``TAKE_BACK``, at
#: once and off the kernel's thread, so the front end can answer its cell reverts — refused while a turn runs
#: (:meth:`~shiro_kernel.ui.live.LiveController.take_back`)
QUEUED, AT_ONCE, TAKE_BACK = "queued", "at once", "take back"


class Command(NamedTuple):
    run: Callable[[Agent, str], str]
    usage: str  # as /help shows it
    help: str
    when: str = QUEUED  # see QUEUED


class Invoked(NamedTuple):
    """A slash command line, read once: its name as typed, its argument, and its command (None: unknown)."""

    name: str
    arg: str
    command: Command | None

    @property
    def when(self) -> str:
        return self.command.when if self.command is not None else QUEUED


def parse(line: str) -> Invoked:
    """``line`` (``/name arg…``) as an :class:`Invoked`: the one place a command line is read."""
    name, _, arg = line.strip().partition(" ")
    return Invoked(name, arg.strip(), COMMANDS.get(name.lower()))


COMMANDS: dict[str, Command] = {
    "/todos": Command(_todos, "/todos", "the task list"),
    "/notes": Command(_notes, "/notes", "what shiro remembers about this project"),
    "/memory": Command(_memory, "/memory", "merge unused notes (past 60 entries, at least two unused)"),
    "/compact": Command(_compact, "/compact", "replace the transcript with a summary written by the model"),
    "/clear": Command(_clear, "/clear", "start a fresh session (the old one stays resumable)"),
    "/sessions": Command(_sessions, "/sessions", "the last 15 sessions"),
    "/resume": Command(_resume, "/resume ID", "resume a session by id or unique prefix"),
    "/save": Command(_save, "/save", "write the session record now"),
    "/cost": Command(_cost, "/cost", "tokens and cost of this session"),
    "/rebuild": Command(_rebuild, "/rebuild", "re-run the recorded code of variables a kernel restart lost"),
    "/undo": Command(
        _undo,
        "/undo [CALL_ID] [--force]",
        "take back the last turn's steps (variables, files, cells), newest first; with a call id, that step and "
        "every one after it; what you changed after a step is kept (--force takes it back anyway)",
        TAKE_BACK,
    ),
    "/undoable": Command(
        _undoable, "/undoable", "the steps that can be taken back now (JSON, for the front end)", AT_ONCE
    ),
    "/history": Command(_history, "/history", "this project's prompt history"),
    "/mcp": Command(
        _mcp,
        "/mcp [allow|deny|serve|…]",
        "MCP servers and their tools; allow a repository's servers; serve this kernel to other agents",
    ),
    "/export": Command(_export, "/export [OUT]", "write a plain notebook that runs without shiro (NAME.export.ipynb)"),
    "/check": Command(_check, "/check", "rerun the saved notebook in a fresh kernel and report hidden state"),
    "/policy": Command(_policy, "/policy", "what the administrator's policy allows, and its file"),
    "/private": Command(
        _private, "/private [add|remove NAME]", "what never reaches the model as it is (columns, variables)"
    ),
    "/egress": Command(_egress, "/egress", "what each turn sent, to which server: sizes, results, files, images"),
    "/help": Command(_help, "/help", "this list"),
}


def help_text() -> str:
    width = max(16, max(len(c.usage) for c in COMMANDS.values()) + 2)
    return "slash commands:\n" + "\n".join(f"  {c.usage:<{width}}{c.help}" for c in COMMANDS.values())


def run(agent: Agent, line: str | Invoked) -> str:
    """Run one slash command line (or one already read); the text to show (a failure included, as its one line)."""
    import difflib

    from .errors import ShiroError

    name, arg, command = parse(line) if isinstance(line, str) else line
    if command is None:
        close = difflib.get_close_matches(name.lower(), list(COMMANDS), n=1, cutoff=0.75)
        hint = f"did you mean {close[0]}? " if close else ""
        return f"unknown command {name}; {hint}try /help"
    try:
        return command.run(agent, arg)
    except ShiroError as exc:
        return str(exc)
