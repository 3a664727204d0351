"""The ``shiro`` console script: shiro's stores from a terminal (``SHIRO_HOME`` as in the kernel).

    shiro sessions                 the last 15 sessions (``-n N``, ``--all``)
    shiro sessions show ID         one session's transcript, by id or unique prefix (``--json``: raw)
    shiro history                  this project's prompt history (``--json`` for the labextension)
    shiro notes | memory | bundle  the project's memory (:mod:`shiro_kernel.cli.memory`)
    shiro mcp list | allow NAME    which of the repository's .mcp.json servers may start (:mod:`.mcp`)
    shiro export NOTEBOOK          a plain notebook without shiro_kernel (:mod:`.notebooks`)
    shiro check NOTEBOOK           does it reproduce in a fresh kernel? (exit 1 when not)

Each subcommand is a :class:`~.command.Command`: ``add_arguments(parser)`` declares its options and ``run(args)``
prints to stdout and returns the exit code. A :class:`~shiro_kernel.errors.ShiroError` from any of them
becomes one line on stderr, ``shiro: <sentence>``, and exit code 1 — here, in :func:`main`, only.
"""

from __future__ import annotations

import argparse
import sys

from ..errors import ShiroError
from ..version import VERSION
from .command import Command


def commands() -> list[Command]:
    """Every subcommand, in the order ``shiro --help`` shows them."""
    from . import mcp, memory, notebooks, sessions

    return [*sessions.COMMANDS, *memory.COMMANDS, *mcp.COMMANDS, *notebooks.COMMANDS]


def build_parser(table: list[Command] | None = None) -> tuple[argparse.ArgumentParser, dict[str, Command]]:
    parser = argparse.ArgumentParser(prog="shiro", description="shiro_kernel: the %shiro notebook agent's stores.")
    parser.add_argument("--version", action="version", version=f"shiro_kernel {VERSION}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    by_name: dict[str, Command] = {}
    for command in table if table is not None else commands():
        # argparse %-formats a help (not a description): "%shiro" would print as "%s" of a dict + "hiro"
        help_ = command.help.replace("%", "%%")
        command.add_arguments(sub.add_parser(command.name, help=help_, description=command.help))
        by_name[command.name] = command
    return parser, by_name


def main(argv: list[str] | None = None, table: list[Command] | None = None) -> int:
    parser, by_name = build_parser(table)
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    from ..store.private import tighten_home

    notice = tighten_home()  # an older, looser SHIRO_HOME is made private before anything reads it
    if notice:
        print(f"shiro: {notice}", file=sys.stderr)
    try:
        return by_name[args.command].run(args)
    except ShiroError as exc:
        print(f"shiro: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `shiro sessions | head`
        return 0


__all__ = ["Command", "build_parser", "commands", "main"]
