"""A session record: the seed's JSON for one :class:`~shiro_kernel.session.Session` (2-space indent)::

    {"id", "createdAt", "updatedAt", "cwd", "provider": "openai", "model", "title",
     "inputTokens", "outputTokens", "costUsd" (omitted when unpriced),
     "notebook": {"todos": [...]}, "notebookPath", "cells" (the notebook's cell fingerprint at the end
     of the last turn; omitted before the first), "usageEstimated": true (only when some usage was estimated:
     the server sent none), "messages": [...]}

Pure functions, no files: :mod:`shiro_kernel.store.sessions` writes and reads them.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..egress import Ledger
from ..events import Usage
from ..ids import now_iso
from ..session import Session
from ..text import one_line
from ..transcript import Message, messages_from_json, messages_to_json

PROVIDER = "openai"
TITLE_LIMIT = 60


def valid_cells(rows: Any) -> list[dict[str, Any]] | None:
    """``rows`` when they look like the notebook's cell fingerprint (``context.cell_changes``), as read back from a
    record; else None."""
    if not isinstance(rows, list):
        return None
    good = [r for r in rows if isinstance(r, dict) and isinstance(r.get("key"), str) and isinstance(r.get("sha1"), str)]
    return good if len(good) == len(rows) else None


def title_of(messages: Iterable[Message]) -> str:
    """The first user message's text (whitespace collapsed to single spaces, so a ``%%shiro`` cell
    body stays one line); over 60 characters: the first 60 + ``...``; none: ``untitled``."""
    for message in messages:
        if message.role == "user" and message.text.strip():
            return one_line(message.text, TITLE_LIMIT, room=False)
    return "untitled"


def session_to_record(
    session: Session, model: str | None = None, *, updated_at: str | None = None, tail: Sequence[Message] = ()
) -> dict[str, Any]:
    """The record of ``session``; ``model`` defaults to the one its last turn used. ``tail``: messages written
    after the session's own (the write-ahead's results of a batch of calls still running)."""
    messages = [*session.messages, *tail]  # a snapshot: the turn loop may append meanwhile
    record: dict[str, Any] = {
        "id": session.id,
        "createdAt": session.created_at,
        "updatedAt": updated_at or now_iso(),
        "cwd": session.cwd,
        "provider": PROVIDER,
        "model": session.model or model or "",
        "title": title_of(messages),
        "inputTokens": session.usage.input_tokens,
        "outputTokens": session.usage.output_tokens,
    }
    if session.usage.cached_input_tokens:
        record["cachedInputTokens"] = session.usage.cached_input_tokens  # of inputTokens, served from cache
    if session.usage.estimated:
        record["usageEstimated"] = True  # a server sent no usage: those counts are characters / 4
    if session.usage.cost_usd is not None:
        record["costUsd"] = session.usage.cost_usd
    record["notebook"] = {"todos": session.tasks.state()}
    record["notebookPath"] = None if session.notebook_path is None else str(session.notebook_path)
    if session.cells is not None:
        record["cells"] = list(session.cells)
    if session.turns:
        record["turns"] = list(session.turns)
    if session.egress.turns:
        record["egress"] = session.egress.turns
    # what its requests masked, and the key of their stand-ins (nothing masked: the seed's shape)
    if session.private_seen:
        record["maskKey"] = session.mask_key
        record["privateSeen"] = dict(session.private_seen)
    record["messages"] = messages_to_json(messages)
    return record


def check_record(record: Any) -> dict[str, Any]:
    """``record`` if it has the shape of a session record; ValueError otherwise."""
    if not isinstance(record, dict):
        raise ValueError("a session record must be a JSON object")
    if not isinstance(record.get("messages"), list):
        raise ValueError("a session record needs a messages list")
    return record


_SCALAR = re.compile(r'"(createdAt|updatedAt|cwd|notebookPath|title)"\s*:\s*("(?:[^"\\\n]|\\.)*")')


def salvage(text: str) -> dict[str, str]:
    """The top-level string fields that can still be read from a record cut short or otherwise broken
    (``notebookPath``, ``cwd``, ``createdAt``, ``updatedAt``, ``title``: they come before the messages),
    so an unreadable record can still be told to the notebook it belonged to."""
    found: dict[str, str] = {}
    for match in _SCALAR.finditer(text[:65536]):
        key = match.group(1)
        if key in found:
            continue
        try:
            value = json.loads(match.group(2))
        except ValueError:
            continue
        if isinstance(value, str):
            found[key] = value
    return found


def session_from_record(record: dict[str, Any]) -> Session:
    """A Session with the record's messages, totals and task list (the model and agent variant are not
    restored: they come from the current config). Raises ValueError for a malformed record."""
    record = check_record(record)
    cost = record.get("costUsd")
    session = Session(
        id=str(record["id"]),
        created_at=str(record.get("createdAt") or now_iso()),
        cwd=str(record.get("cwd") or os.getcwd()),
        notebook_path=record.get("notebookPath") if isinstance(record.get("notebookPath"), str) else None,
        messages=messages_from_json(record["messages"]),
        usage=Usage(
            int(record.get("inputTokens") or 0),
            int(record.get("outputTokens") or 0),
            float(cost) if isinstance(cost, (int, float)) else None,
            int(record.get("cachedInputTokens") or 0),
            record.get("usageEstimated") is True,
        ),
    )
    notebook = record.get("notebook")
    session.tasks.restore(notebook.get("todos") if isinstance(notebook, dict) else None)
    session.cells = valid_cells(record.get("cells"))
    turns = record.get("turns")
    session.turns = [t for t in turns if isinstance(t, dict)] if isinstance(turns, list) else []
    session.egress = Ledger.from_json(record.get("egress"))
    key = record.get("maskKey")
    if isinstance(key, str) and key:
        session.mask_key = key
    seen = record.get("privateSeen")
    if isinstance(seen, dict):
        session.private_seen = {k: v for k, v in seen.items() if isinstance(k, str) and isinstance(v, str)}
    return session


__all__ = [
    "PROVIDER",
    "TITLE_LIMIT",
    "check_record",
    "salvage",
    "session_from_record",
    "session_to_record",
    "title_of",
]
