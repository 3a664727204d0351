"""``shiro notes``, ``shiro memory`` and ``shiro bundle``: the memory stores from a terminal.

Output goes to stdout; a refusal or a failure is raised and :func:`shiro_kernel.cli.main` prints it.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import RequestError
from ..memory import bundles
from ..memory.index_file import SCOPES
from ..memory.named import MemoryStore
from ..memory.notes import STALE_DAYS, NoteStore, list_line
from ..store import paths
from ..tools.memory_tools import read_result
from .command import Command


def _root(args: argparse.Namespace) -> Path:
    given = getattr(args, "project", None)
    return paths.project_root(Path(given).expanduser() if given else Path.cwd())


# -- notes ----------------------------------------------------------------------------------------
def _notes_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--project", metavar="DIR", help="the project (default: the repository or folder you are in)")
    p.add_argument("--stale", action="store_true", help=f"only notes not confirmed by a recall in {STALE_DAYS} days")


def _notes_run(args: argparse.Namespace) -> int:
    store = NoteStore.for_project(_root(args))
    if args.stale:
        stale = store.stale()
        if not stale:
            print(f"no notes older than {STALE_DAYS} days without a recall")
        for e in stale:
            seen = e.get("lastHitAt") or e["createdAt"]
            print(f"{list_line(e)}  (last confirmed {seen[:10]})")
        return 0
    print(store.format_list())
    return 0


# -- memory ---------------------------------------------------------------------------------------
def _memory_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", choices=["show"], help="show NAME: print one memory")
    p.add_argument("name", nargs="?", help="memory name (a comma list reads several)")
    p.add_argument("--scope", choices=list(SCOPES), help="read only this scope")
    p.add_argument("--project", metavar="DIR", help="the project (default: the repository or folder you are in)")


def _memory_run(args: argparse.Namespace) -> int:
    store = MemoryStore.for_project(_root(args))
    if args.action == "show":
        if not args.name:
            raise RequestError("memory show needs a NAME")
        print(read_result(store.read(args.name, args.scope)))
    else:
        if args.name:
            raise RequestError(f"unknown memory action {args.name!r}; use: shiro memory [show NAME]")
        print(store.indexes(args.scope))
    return 0


# -- bundle ---------------------------------------------------------------------------------------
def _bundle_args(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="bundle_action", metavar="ACTION", required=True)
    for name, helptext in (
        ("install", "install a bundle folder (or a name under SHIRO_HOME/bundles)"),
        ("upgrade", "upgrade an installed bundle from its folder"),
    ):
        q = sub.add_parser(name, help=helptext)
        q.add_argument("path", metavar="PATH")
        q.add_argument("--scope", choices=list(SCOPES), help="default: the manifest's, else system")
        q.add_argument("--dry-run", action="store_true", help="say what would happen, change nothing")
        q.add_argument("--force", action="store_true", help="overwrite same-name memories that are not the bundle's")
        q.add_argument("--project", metavar="DIR", help="the project for project scope")
    q = sub.add_parser("status", help="an installed bundle's version, files and needs")
    q.add_argument("name", metavar="NAME")
    q.add_argument("--project", metavar="DIR")
    q = sub.add_parser("uninstall", help="move an installed bundle's memories to the trash")
    q.add_argument("name", metavar="NAME")
    q.add_argument("--dry-run", action="store_true")
    q.add_argument("--project", metavar="DIR")


def _bundle_run(args: argparse.Namespace) -> int:
    project = _root(args)
    if args.bundle_action == "install":
        lines = bundles.install(args.path, args.scope, args.dry_run, args.force, project=project)
    elif args.bundle_action == "upgrade":
        lines = bundles.upgrade(args.path, args.scope, args.dry_run, args.force, project=project)
    elif args.bundle_action == "status":
        lines = bundles.status(args.name, project=project)
    else:
        lines = bundles.uninstall(args.name, args.dry_run, project=project)
    for line in lines:
        print(line)
    return 0


COMMANDS = [
    Command("notes", "list this project's notes (remember/recall)", _notes_args, _notes_run),
    Command("memory", "print both memory indexes, or one memory (show NAME)", _memory_args, _memory_run),
    Command("bundle", "install, upgrade, inspect or uninstall memory bundles", _bundle_args, _bundle_run),
]
