"""The live notebook as the agent works on it: what it last read, and the changes it asks the front end for.

* The agent names cells by the index ``notebook_read`` showed it; :class:`LiveNotebook` keeps the ids (and
  sources) of that read, so a change goes to the cell the model meant even when cells moved since, and an edit
  of a cell that changed since it was read is refused (``expect``: the front end checks it again at Accept).
* The changes of one step go to the front end as one review (Accept all); each call gets its own result.
* Nothing here writes the ``.ipynb``: the front end changes its own document (docs/notebook-protocol.md).
"""

from __future__ import annotations

import difflib
import threading
from dataclasses import dataclass, field
from typing import Any

from ..errors import ToolError
from .channel import Channel, Unanswered, Withdrawn

REVIEWED = ("notebook_edit", "notebook_insert", "notebook_delete", "propose_cell")
#: seconds a read or an automatic change may take; a review waits for the user (``Shiro.approval_timeout_s``)
READ_TIMEOUT_S = 10.0
#: a cell run may be long: it ends when the cells end, or on Stop
RUN_TIMEOUT_S = 24 * 3600.0
NOT_READ = "read the notebook with notebook_read first: changes name cells by the index it shows"


@dataclass
class Change:
    """One change a call asks for, its target resolved to a cell id."""

    call_id: str
    kind: str  # edit | insert | delete
    index: int  # the cell the model named (for an insert: the one it goes after; -1 = the top)
    cell_id: str | None
    source: str = ""
    cell_type: str = "code"
    expect: str | None = None

    def to_wire(self) -> dict[str, Any]:
        if self.kind == "insert":
            return {"kind": "insert", "after": self.cell_id, "source": self.source, "cell_type": self.cell_type}
        data: dict[str, Any] = {"kind": self.kind, "id": self.cell_id, "expect": self.expect}
        if self.kind == "edit":
            data["source"] = self.source
        return data


@dataclass
class Outcome:
    """A change's result: the model's text, whether it failed, and the row the saved turn shows."""

    text: str
    is_error: bool
    change: dict[str, Any] = field(default_factory=dict)


def diff_of(old: str, new: str, label: str) -> tuple[str, int, int]:
    """The unified diff of a cell's source, and how many lines it adds and removes."""
    lines = list(
        difflib.unified_diff(old.splitlines(), new.splitlines(), f"{label} (before)", f"{label} (after)", lineterm="")
    )
    added = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
    return "\n".join(lines), added, removed


def _unanswered(change: Change, seconds: float) -> str:
    """What the model is told of a change nobody reviewed in time (as of an approval nobody answered)."""
    from ..approval import UNANSWERED_DENIAL  # approval knows tools, which know this module: not at the top

    name = {"edit": "notebook_edit", "insert": "notebook_insert", "delete": "notebook_delete"}[change.kind]
    return UNANSWERED_DENIAL.format(name=name, seconds=seconds)


class LiveNotebook:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        #: the ids of the cells by index, as the agent last read them, and each one's source then
        self.order: list[str] = []
        self.seen: dict[str, str] = {}
        #: the ``%shiro`` cell of the running turn (``propose_cell`` inserts below it)
        self.turn_cell: str | None = None
        #: a question of this turn went unanswered (a review, or an approval in the live view): none is put
        #: again until the next turn (the agent resets it), so the turn and the queue move on
        self.unanswered = False
        self._staged: set[str] = set()
        self._batch: list[tuple[str, str, dict[str, Any]]] = []
        self._done: dict[str, Outcome] = {}
        self._lock = threading.Lock()

    # -- reading -----------------------------------------------------------------------------------
    def read(self, abort: threading.Event | None = None) -> dict[str, Any]:
        """The live document (unsaved edits included): ``cells`` with index, id, type, source, outputs,
        whether the user is editing it; remembered as what the agent has read."""
        reply = self.channel.request("read", timeout=READ_TIMEOUT_S, abort=abort)
        cells = [c for c in reply.get("cells") or [] if isinstance(c, dict)]
        self.remember(cells)
        return {"cells": cells, "dirty": bool(reply.get("dirty"))}

    def remember(self, cells: list[dict[str, Any]]) -> None:
        """What the agent has seen (a live read, or the file on disk): ids by index, sources by id."""
        with self._lock:
            self.order = [str(c.get("id") or "") for c in cells]
            self.seen = {str(c.get("id") or ""): _text(c.get("source")) for c in cells if c.get("id")}

    # -- changing ----------------------------------------------------------------------------------
    def stage(self, calls: list[tuple[str, str, dict[str, Any]]]) -> None:
        """The changes one step asks for (call id, tool name, arguments): reviewed together, as one request."""
        with self._lock:
            self._batch = [c for c in calls if c[1] in REVIEWED]
            self._staged = {c[0] for c in self._batch}
            self._done = {}

    def settled(self, call_id: str) -> bool:
        """Is the outcome of this change call known already (its step's review decided it, or withdrew it)?"""
        with self._lock:
            return call_id in self._done

    def change(
        self,
        call_id: str,
        name: str,
        args: dict[str, Any],
        *,
        review: bool,
        timeout: float,
        abort: threading.Event | None,
    ) -> Outcome:
        """The result of one change call: its step's changes are sent together the first time one of them
        runs, and each call gets its own outcome."""
        with self._lock:
            if call_id in self._done:
                return self._done.pop(call_id)
            batch = self._batch if call_id in self._staged else [(call_id, name, args)]
            self._batch, self._staged = [], set()
        outcomes = self._review(batch, review=review, timeout=timeout, abort=abort)
        with self._lock:
            self._done.update({cid: o for cid, o in outcomes.items() if cid != call_id})
        return outcomes[call_id]

    def _review(
        self,
        batch: list[tuple[str, str, dict[str, Any]]],
        *,
        review: bool,
        timeout: float,
        abort: threading.Event | None,
    ) -> dict[str, Outcome]:
        outcomes: dict[str, Outcome] = {}
        changes: list[Change] = []
        for call_id, name, args in batch:
            try:
                changes.append(self._resolve(call_id, name, args))
            except ToolError as exc:
                outcomes[call_id] = Outcome(f"Error: {exc}", True)
        if not changes:
            return outcomes
        if review and self.unanswered:  # nobody answered this turn's last question: nobody is asked again
            return {**outcomes, **{c.call_id: Outcome(_unanswered(c, timeout), True) for c in changes}}
        try:
            reply = self.channel.request(
                "review",
                timeout=timeout if review else READ_TIMEOUT_S,
                abort=abort,
                changes=[c.to_wire() for c in changes],
                review=review,
                turn=self.turn_cell,
                title="shiro proposes " + ("a change" if len(changes) == 1 else f"{len(changes)} changes"),
            )
        except Unanswered as exc:
            if not review:  # an automatic change the front end did not apply in time
                text = f"Error: the notebook did not answer within {READ_TIMEOUT_S:g} s; nothing was changed"
                return {**outcomes, **{c.call_id: Outcome(text, True) for c in changes}}
            self.unanswered = True
            if exc.decided is not None:  # the front end said which the user decided before the time was up
                return {**outcomes, **self._withdrawn(changes, exc.decided, "unanswered", review, timeout)}
            return {**outcomes, **{c.call_id: Outcome(_unanswered(c, timeout), True) for c in changes}}
        except Withdrawn as exc:
            if exc.decided is not None:  # a Stop, and the front end said which changes the user decided before it
                return {**outcomes, **self._withdrawn(changes, exc.decided, "stopped", review, timeout)}
            return {**outcomes, **{c.call_id: Outcome(f"Error: {exc}", True) for c in changes}}
        except ToolError as exc:
            return {**outcomes, **{c.call_id: Outcome(f"Error: {exc}", True) for c in changes}}
        results = [r for r in reply.get("results") or [] if isinstance(r, dict)]
        for number, change in enumerate(changes):
            result = results[number] if number < len(results) else {"status": "missing"}
            outcomes[change.call_id] = self._outcome(change, result, review)
        return outcomes

    def _withdrawn(
        self, changes: list[Change], decided: dict[int, dict[str, Any]], status: str, review: bool, timeout: float
    ) -> dict[str, Outcome]:
        """The outcomes of a review withdrawn (``status``: ``stopped`` or ``unanswered``): each change the user
        decided before it as decided, each other one not applied, with its row."""
        outcomes: dict[str, Outcome] = {}
        for number, change in enumerate(changes):
            if number in decided:
                outcomes[change.call_id] = self._outcome(change, decided[number], review)
            else:
                outcome = self._outcome(change, {"status": status}, review)
                if status == "unanswered":
                    outcome.text = _unanswered(change, timeout)
                outcomes[change.call_id] = outcome
        return outcomes

    def _target(self, index: Any, what: str) -> tuple[int, str]:
        """The cell the model named by index (negative: from the end), as the agent read it: (index, id)."""
        if not self.order:
            raise ToolError(NOT_READ)
        if not isinstance(index, int) or isinstance(index, bool) or not -len(self.order) <= index < len(self.order):
            raise ToolError(f"no {what} {index!r}: the notebook you read has cells 0-{len(self.order) - 1}")
        index %= len(self.order)
        cell_id = self.order[index]
        if not cell_id:
            raise ToolError(f"cell {index} has no id; read the notebook again")
        return index, cell_id

    def _resolve(self, call_id: str, name: str, args: dict[str, Any]) -> Change:
        """The call's change, its cell named by id as the agent read it."""
        source = args.get("source") if name != "propose_cell" else args.get("code")
        if name in ("notebook_edit", "notebook_insert", "propose_cell") and not isinstance(source, str):
            raise ToolError("source must be the cell's whole new text (a string)")
        if name == "notebook_edit":
            index, cell_id = self._target(args.get("cell"), "cell")
            return Change(call_id, "edit", index, cell_id, str(source), expect=self.seen.get(cell_id))
        if name == "notebook_delete":
            index, cell_id = self._target(args.get("cell"), "cell")
            return Change(call_id, "delete", index, cell_id, expect=self.seen.get(cell_id))
        kind = args.get("cell_type") or "code"
        if kind not in ("code", "markdown"):
            raise ToolError(f"cell_type must be code or markdown, not {kind!r}")
        if name == "propose_cell":
            return Change(call_id, "insert", -2, self.turn_cell, str(source), "code")
        after = args.get("after")
        if after == -1:
            return Change(call_id, "insert", -1, None, str(source), str(kind))
        index, cell_id = self._target(after, "cell to insert after")
        return Change(call_id, "insert", index, cell_id, str(source), str(kind))

    def _outcome(self, change: Change, result: dict[str, Any], review: bool) -> Outcome:
        status = str(result.get("status") or "missing")
        index = result.get("index")
        where = (
            f"cell {change.index}" if change.index >= 0 else ("the top" if change.index == -1 else "below this cell")
        )
        old = change.expect or ""
        diff, added, removed = diff_of(
            old if change.kind != "insert" else "", change.source if change.kind != "delete" else "", where
        )
        if status in ("accepted", "applied") and not review:
            status = "applied"
        row = {
            "kind": change.kind,
            "cell": index if isinstance(index, int) else change.index,
            "added": added,
            "removed": removed,
            "diff": diff,
            "status": status,
        }
        note = f' (the user said: "{result["note"]}")' if isinstance(result.get("note"), str) and result["note"] else ""
        if status in ("accepted", "applied"):
            self._learn(change, result)
            by = " (the user accepted it)" if status == "accepted" else ""
            done = {"edit": "edited", "insert": "inserted", "delete": "deleted"}[change.kind]
            at = f"cell {index}" if isinstance(index, int) else where
            lines = f": +{added} −{removed} lines" if change.kind == "edit" else ""
            return Outcome(f"{done.capitalize()} {at}{lines}{by}.", False, row)
        what = {"edit": f"edit of {where}", "insert": "new cell", "delete": f"deletion of {where}"}[change.kind]
        texts = {
            "rejected": f"not applied — the user rejected this {what}{note}; the notebook is unchanged. Ask before "
            "trying something else.",
            "conflict": f"not applied — {where} changed since you read it (the user edited it); read it again with "
            "notebook_read, then change it",
            "editing": f"not applied — the user is typing in {where}; nothing was changed: try again later, or "
            "show the change in your answer",
            "missing": f"not applied — {where} no longer exists; read the notebook again",
            "stopped": f"not applied — the user stopped the turn before deciding on this {what}; the notebook is "
            "unchanged there",
        }
        return Outcome("Error: " + texts.get(status, f"not applied ({status})"), True, row)

    def _learn(self, change: Change, result: dict[str, Any]) -> None:
        """After an accepted change, what the agent knows of the document follows it."""
        with self._lock:
            new_id = result.get("id")
            if change.kind == "edit" and change.cell_id:
                self.seen[change.cell_id] = change.source
            elif change.kind == "delete" and change.cell_id in self.order:
                self.order.remove(change.cell_id)
                self.seen.pop(change.cell_id, None)
            elif change.kind == "insert" and isinstance(new_id, str):
                at = result.get("index")
                position = at if isinstance(at, int) and 0 <= at <= len(self.order) else len(self.order)
                self.order.insert(position, new_id)
                self.seen[new_id] = change.source

    # -- running -----------------------------------------------------------------------------------
    def run(self, indices: list[Any], abort: threading.Event | None = None) -> list[dict[str, Any]]:
        """Run code cells in the front end (their outputs land in the document); each one's outputs."""
        ids = [self._target(i, "cell")[1] for i in indices]
        reply = self.channel.request("run", timeout=RUN_TIMEOUT_S, abort=abort, ids=ids)
        return [c for c in reply.get("cells") or [] if isinstance(c, dict)]


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


__all__ = ["NOT_READ", "REVIEWED", "Change", "LiveNotebook", "Outcome", "diff_of"]
