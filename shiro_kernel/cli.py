"""The ``shiro`` console script: shiro's stores from a terminal (``SHIRO_HOME`` as in the kernel).

    shiro sessions                 the last 15 sessions (``-n N``, ``--all``)
    shiro sessions show ID         one session's transcript, by id or unique prefix (``--json``: raw)
    shiro notes | memory | bundle  from :mod:`shiro_kernel.memory_cli` (see :data:`_EXTERNAL`)

Subcommands are entries in :data:`COMMANDS`: ``Command(name, help, add_arguments, run)`` (or a plain
``(name, add_arguments, run)`` tuple) where ``add_arguments(parser)`` declares the options and
``run(args) -> exit code`` does the work, printing to stdout, problems to stderr. Other modules add theirs
with :func:`register`, or by a ``COMMANDS`` list in a module named in :data:`_EXTERNAL`.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass

from . import __version__


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def _err(message: str) -> None:
    print(f"shiro: {message}", file=sys.stderr)


# -- shiro sessions ----------------------------------------------------------------------------------
def _sessions_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--limit", type=int, default=15, help="how many to list (default 15)")
    parser.add_argument("--all", action="store_true", help="list every session")
    sub = parser.add_subparsers(dest="action")
    show = sub.add_parser("show", help="print one session's transcript")
    show.add_argument("id", help="session id or unique prefix")
    show.add_argument("--json", action="store_true", help="print the raw record")


def _sessions_run(args: argparse.Namespace) -> int:
    from .sessions import Ambiguous, SessionStore, format_rows, not_found_message, transcript_text

    store = SessionStore()
    if args.action != "show":
        print(format_rows(store.list(None if args.all else args.limit)))
        return 0
    try:
        sid = store.resolve(args.id)
    except Ambiguous as exc:
        _err(not_found_message(args.id, exc))
        return 1
    record = store.load_record(sid) if sid else None
    if record is None:
        _err(not_found_message(args.id))
        return 1
    print(json.dumps(record, indent=2, ensure_ascii=False) if args.json else transcript_text(record))
    return 0


def _history_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project", metavar="DIR", help="the project (default: the repository or folder you are in)")
    parser.add_argument("--json", action="store_true", help="a JSON array, oldest first (for the labextension)")


def _history_run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .history import PromptHistory, format_history
    from .paths import project_root

    entries = PromptHistory.for_project(project_root(Path(args.project or ".").expanduser())).entries()
    print(json.dumps(entries, ensure_ascii=False) if args.json else format_history(entries))
    return 0


#: the subcommands, in the order ``shiro --help`` shows them
COMMANDS: list[Command] = [
    Command("sessions", "list saved sessions, or show one", _sessions_arguments, _sessions_run),
    Command("history", "this project's prompt history (what Up/Down walks)", _history_arguments, _history_run),
]

#: subcommands living in other modules, imported lazily: each module defines ``COMMANDS``, a list of
#: ``(name, add_arguments, run)`` tuples (or :class:`Command`). ``.memory_cli`` brings ``notes``,
#: ``memory`` and ``bundle``; a module that fails to import just contributes nothing.
_EXTERNAL: tuple[str, ...] = (".memory_cli",)


def register(command: Command | tuple) -> None:
    """Add a subcommand (replacing one of the same name)."""
    command = _as_command(command)
    COMMANDS[:] = [c for c in COMMANDS if c.name != command.name] + [command]


def _as_command(entry: Command | tuple) -> Command:
    if isinstance(entry, Command):
        return entry
    name, add_arguments, run, *rest = entry
    help_text = rest[0] if rest else ((run.__doc__ or "").strip().splitlines() or [""])[0]
    return Command(name, help_text, add_arguments, run)


def _all_commands() -> list[Command]:
    commands = list(COMMANDS)
    for module_name in _EXTERNAL:
        try:
            module = importlib.import_module(module_name, __package__)
        except ModuleNotFoundError:
            continue
        names = {c.name for c in commands}
        helps = getattr(module, "HELP", {})
        for entry in getattr(module, "COMMANDS", []):
            if isinstance(entry, tuple) and len(entry) == 3 and entry[0] in helps:
                entry = (*entry, helps[entry[0]])
            command = _as_command(entry)
            if command.name not in names:
                commands.append(command)
                names.add(command.name)
    return commands


def build_parser() -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    parser = argparse.ArgumentParser(prog="shiro", description="shiro_kernel: the %shiro notebook agent's stores.")
    parser.add_argument("--version", action="version", version=f"shiro_kernel {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    table: dict[str, Command] = {}
    for command in _all_commands():
        command.add_arguments(sub.add_parser(command.name, help=command.help, description=command.help))
        table[command.name] = command
    return parser, table


def main(argv: list[str] | None = None) -> int:
    parser, table = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    try:
        return table[args.command].run(args)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `shiro sessions | head`
        return 0


if __name__ == "__main__":
    sys.exit(main())
