"""Finding the recorded turn of a running ``%shiro`` cell: in a session record (its ``turns``, written by
:mod:`.record`), or in the notebook's file.

**The notebook's** saved turn: the cell with that id, else the ``ordinal``-th turn site with that prompt
(:mod:`.sites`), whose outputs hold a turn bundle with that prompt. The file is read as JSON
(:func:`shiro_kernel.notebook.file.read_notebook`), never with ``nbformat.read``.

Which turn replays: the one the cell *shows* (the bundle saved in the notebook) when there is one, taken
from this machine's record when the record holds that same turn (by ``turnId``, or by its calls' ids for a
bundle saved before ``turnId`` existed), else from the bundle itself (which then needs trust,
:mod:`.trust`); with no saved bundle (a notebook never saved, a cell whose output was cleared), the newest
recorded turn of that cell (by id, else by prompt and ordinal). A cell whose prompt is not the one recorded
for it finds nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..notebook.mimes import TURN_MIME
from ..transcript import Message, messages_from_json
from .record import TurnSpan, turns_of
from .replay_plan import Plan, fields_of, has_replay, plan_from_bundle, plan_from_messages, replay_fields
from .sites import notebook_sites


def _slice(record: Mapping[str, Any], start: int, end: int, prompt: str | None) -> list[Message] | None:
    raw = record.get("messages")
    if not isinstance(raw, Sequence) or end > len(raw):
        return None
    try:
        messages = messages_from_json(raw[start:end])
    except (ValueError, KeyError, TypeError):
        return None
    if not messages or messages[0].role != "user" or (prompt is not None and messages[0].text != prompt):
        return None
    return messages


def _by_calls(record: Mapping[str, Any], call_ids: set[str]) -> tuple[int, int] | None:
    """The span (user message through the message before the next user message) holding ``call_ids``: how a
    turn is found in a record written before ``turns`` existed."""
    raw = record.get("messages")
    if not isinstance(raw, Sequence) or not call_ids:
        return None
    hits = [
        index
        for index, message in enumerate(raw)
        if isinstance(message, dict)
        and any(isinstance(p, dict) and p.get("callId") in call_ids for p in message.get("parts") or [])
    ]
    if not hits:
        return None
    start = next((i for i in range(hits[0], -1, -1) if isinstance(raw[i], dict) and raw[i].get("role") == "user"), None)
    if start is None:
        return None
    end = next(
        (i for i in range(hits[-1] + 1, len(raw)) if isinstance(raw[i], dict) and raw[i].get("role") == "user"),
        len(raw),
    )
    return start, end


def _match(spans: list[TurnSpan], cell_id: str | None, prompt: str, ordinal: int) -> TurnSpan | None:
    if cell_id is not None:
        mine = [s for s in spans if s.cell_id == cell_id]
        if mine:
            same = [s for s in mine if s.prompt == prompt]
            exact = [s for s in same if s.ordinal == ordinal]
            return (exact or same)[-1] if same else None
    same = [s for s in spans if s.prompt == prompt and s.ordinal == ordinal]
    return same[-1] if same else None


# -- the notebook's saved turn ------------------------------------------------------------------------
@dataclass
class Saved:
    """The turn bundle saved in the notebook for a running cell."""

    bundle: dict[str, Any]
    cell: int  # the cell's index
    ordinal: int

    @property
    def turn_id(self) -> str | None:
        tid = self.bundle.get("turnId")
        return tid if isinstance(tid, str) and tid else None

    @property
    def session_id(self) -> str | None:
        sid = self.bundle.get("sessionId")
        return sid if isinstance(sid, str) and sid else None

    @property
    def call_ids(self) -> set[str]:
        entries = self.bundle.get("entries")
        return {
            str(e["callId"])
            for e in entries or []
            if isinstance(e, dict) and e.get("type") == "tool" and isinstance(e.get("callId"), str)
        }


def bundles_of(cell: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The turn bundles among a saved cell's outputs, in order."""
    out = []
    for output in cell.get("outputs") or []:
        data = output.get("data") if isinstance(output, dict) else None
        bundle = data.get(TURN_MIME) if isinstance(data, dict) else None
        if isinstance(bundle, dict):
            out.append(bundle)
    return out


def saved_turn(nb: Mapping[str, Any], *, cell_id: str | None, prompt: str, ordinal: int) -> Saved | None:
    """The bundle the notebook ``nb`` shows for the running cell (see the module's doc), or None."""
    sites = notebook_sites(dict(nb))
    site = None
    if cell_id is not None and any(s.cell_id == cell_id for s in sites):
        mine = [s for s in sites if s.cell_id == cell_id and s.prompt == prompt]
        site = next((s for s in mine if s.ordinal == ordinal), mine[0] if mine else None)
        if site is None:
            return None  # that cell's prompt is not this one (edited since it was saved)
    else:  # no id from the front end, or a cell the file does not have yet
        site = next((s for s in sites if s.prompt == prompt and s.ordinal == ordinal), None)
    if site is None:
        return None
    cells = nb.get("cells") or []
    bundles = [b for b in bundles_of(cells[site.cell]) if b.get("prompt", prompt) == prompt]
    if not bundles:
        return None
    exact = [b for b in bundles if b.get("ordinal") == site.ordinal]
    return Saved((exact or bundles)[-1], site.cell, site.ordinal)


# -- both ---------------------------------------------------------------------------------------------
@dataclass
class Found:
    """A recorded turn to replay: where it came from (``record`` or ``notebook``), its plan, its id, the
    session it was recorded in, and the replay fields for the bundle its replay leaves."""

    source: str
    plan: Plan
    turn_id: str
    session_id: str | None
    fields: dict[str, Any] = field(default_factory=dict)


Loader = Callable[[str], "Mapping[str, Any] | None"]


def record_turn(
    record: Mapping[str, Any], *, turn_id: str | None = None, call_ids: Iterable[str] = (), prompt: str | None = None
) -> tuple[list[Message], TurnSpan | None] | None:
    """The messages of one turn of ``record``: the entry with ``turn_id``; without one (a bundle saved before
    ``turnId``), the turn holding ``call_ids``. None when the record does not hold it."""
    if turn_id is not None:
        for span in turns_of(record):
            if span.turn_id == turn_id:
                held = _slice(record, span.start, span.end, prompt if prompt is not None else span.prompt)
                return (held, span) if held else None
        return None
    found = _by_calls(record, set(call_ids))
    if found is None:
        return None
    messages = _slice(record, found[0], found[1], prompt)
    return (messages, None) if messages else None


def find_turn(
    *,
    cell_id: str | None,
    prompt: str,
    ordinal: int,
    notebook: Mapping[str, Any] | None = None,
    load: Loader | None = None,
    sessions: Iterable[str] = (),
    tools: Mapping[str, Any] | None = None,
) -> Found | None:
    """The recorded turn of the running cell (``cell_id`` as the front end sent it, or None; its ``prompt``;
    its ``ordinal``), from ``notebook`` (the file as JSON) and the session records ``load(id)`` gives for the
    notebook bundle's session and then ``sessions`` (e.g. the newest session of this notebook)."""
    load = load or (lambda sid: None)
    saved = saved_turn(notebook, cell_id=cell_id, prompt=prompt, ordinal=ordinal) if notebook is not None else None
    ids = list(dict.fromkeys(s for s in ([saved.session_id] if saved else []) + list(sessions) if s))
    records = ((sid, load(sid)) for sid in ids)

    def found_in_record(sid: str, messages: list[Message], tid: str, cid: Any) -> Found:
        cid = cell_id or (cid if isinstance(cid, str) else None)
        fields = replay_fields(messages, prompt=prompt, cell_id=cid, ordinal=ordinal, turn_id=tid, tools=tools)
        return Found("record", plan_from_messages(messages, tools), tid, sid, fields)

    if saved is not None:
        for sid, record in records:
            hit = record_turn(record, turn_id=saved.turn_id, call_ids=saved.call_ids, prompt=prompt) if record else None
            if hit is not None:
                messages, span = hit
                tid = saved.turn_id or (span.turn_id if span else f"{sid}/{prompt}/{saved.cell}")
                return found_in_record(sid, messages, tid, saved.bundle.get("cellId"))
        if not has_replay(saved.bundle):
            return None
        try:
            plan = plan_from_bundle(saved.bundle)
        except ValueError:
            return None
        fields = {**fields_of(saved.bundle), "ordinal": ordinal, "cellId": cell_id or saved.bundle.get("cellId")}
        tid = saved.turn_id or f"{saved.session_id}/{prompt}/{saved.cell}"
        return Found("notebook", plan, tid, saved.session_id, fields)
    for sid, record in records:
        if not record:
            continue
        span = _match(turns_of(record), cell_id, prompt, ordinal)
        held = _slice(record, span.start, span.end, prompt) if span is not None else None
        if span is not None and held:
            return found_in_record(sid, held, span.turn_id, span.cell_id)
    return None


__all__ = [
    "Found",
    "Saved",
    "bundles_of",
    "find_turn",
    "record_turn",
    "saved_turn",
]
