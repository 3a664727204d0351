"""``shiro sessions`` (list, ``show ID``, ``egress ID``) and ``shiro history``."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..store.history import PromptHistory, format_history
from ..store.paths import project_root
from ..store.sessions import SessionStore
from ..tasks import TaskList
from ..text import one_line
from ..transcript import (
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    messages_from_json,
)
from ..ui.session_text import format_rows, plural
from .command import Command


def _sessions_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-n", "--limit", type=int, default=15, help="how many to list (default 15)")
    parser.add_argument("--all", action="store_true", help="list every session")
    sub = parser.add_subparsers(dest="action")
    show = sub.add_parser("show", help="print one session's transcript")
    show.add_argument("id", help="session id or unique prefix")
    show.add_argument("--json", action="store_true", help="print the raw record")
    egress = sub.add_parser("egress", help="print what one session sent, to which server, turn by turn")
    egress.add_argument("id", help="session id or unique prefix")


def _sessions_run(args: argparse.Namespace) -> int:
    store = SessionStore()
    if args.action not in ("show", "egress"):
        print(format_rows(store.list(None if args.all else args.limit)))
        return 0
    record = store.load_record(store.resolve(args.id))
    if args.action == "egress":
        from ..egress import Ledger, table

        print(table(Ledger.from_json(record.get("egress"))))
        return 0
    print(json.dumps(record, indent=2, ensure_ascii=False) if args.json else transcript_text(record))
    return 0


def _call_text(part: ToolCallPart, limit: int = 160) -> str:
    try:
        args = part.parsed_arguments()
        shown = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in args.items())
    except ValueError:
        shown = part.arguments
    return f"→ {part.name}({one_line(shown, limit)})"


def transcript_text(record: dict[str, Any]) -> str:
    """A readable transcript of a record (``shiro sessions show ID``)."""
    try:
        messages = messages_from_json(record.get("messages") or [])
    except ValueError as exc:
        messages = []
        broken = f"(messages unreadable: {exc})"
    else:
        broken = ""
    where = record.get("notebookPath") or record.get("cwd") or "?"
    head = [
        f'session {record.get("id", "?")}  "{record.get("title", "untitled")}"',
        f"{where} · {record.get('model', '?')} · {plural(len(messages), 'message')} · "
        f"updated {str(record.get('updatedAt', ''))[:16].replace('T', ' ')}",
    ]
    todos = TaskList()
    notebook = record.get("notebook")
    todos.restore(notebook.get("todos") if isinstance(notebook, dict) else None)
    if len(todos):
        head += ["", todos.render()]
    lines: list[str] = head + ([broken] if broken else [])
    for message in messages:
        if message.role == "system":
            continue
        for part in message.parts:
            if isinstance(part, TextPart) and part.text.strip():
                who = "you" if message.role == "user" else "shiro"
                body = part.text.strip().splitlines()
                lines.append("")
                lines.append(f"{who}: {body[0]}")
                lines += [f"  {b}" for b in body[1:]]
            elif isinstance(part, ToolCallPart):
                lines.append(_call_text(part))
            elif isinstance(part, ToolResultPart):
                mark = "  ✗ " if part.is_error else "  ← "
                lines.append(mark + one_line(part.output, 160) if part.output.strip() else mark + "(no output)")
            elif isinstance(part, ReasoningPart) and part.summary:
                lines.append(f"  (thinking: {one_line(part.text, 120)})")
    return "\n".join(lines)


def _history_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project", metavar="DIR", help="the project (default: the repository or folder you are in)")
    parser.add_argument("--json", action="store_true", help="a JSON array, oldest first (for the labextension)")


def _history_run(args: argparse.Namespace) -> int:
    entries = PromptHistory.for_project(project_root(Path(args.project or ".").expanduser())).entries()
    print(json.dumps(entries, ensure_ascii=False) if args.json else format_history(entries))
    return 0


COMMANDS = [
    Command("sessions", "list saved sessions, or show one", _sessions_arguments, _sessions_run),
    Command("history", "this project's prompt history (what Up/Down walks)", _history_arguments, _history_run),
]
