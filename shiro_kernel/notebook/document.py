"""The live notebook as the agent works on it: what it last read, and the changes it asks the front end for.

* The agent names cells by the index ``notebook_read`` showed it; :class:`LiveNotebook` keeps the ids (and
  sources) of that read, so a change goes to the cell the model meant even when cells moved since, and an edit
  of a cell that changed since it was read is refused (``expect``: the front end checks it again at Accept).
* The changes of one step go to the front end as one review (Accept all); each call gets its own result.
* A change the front end says it made counts only once the document shows it: after a review, the changed
  cells are read back, and an accepted change the document does not hold is ``unconfirmed`` (a reply alone,
  forged or wrong, never leaves a saved row saying the notebook changed).
* Requests go to the front end that ran the turn's ``%shiro`` cell (:meth:`LiveNotebook.note_cell`); when it
  has not said hello (a window opened after the comm was), the channel is opened again once so it can.
* Nothing here writes the ``.ipynb``: the front end changes its own document (docs/notebook-protocol.md).
"""

from __future__ import annotations

import difflib
import threading
from dataclasses import dataclass, field
from typing import Any

from ..errors import ToolError
from .channel import Channel, Unanswered, Withdrawn

#: seconds a read or an automatic change may take; a review waits for the user (``Shiro.approval_timeout_s``)
READ_TIMEOUT_S = 10.0
#: a cell run may be long: it ends when the cells end, or on Stop
RUN_TIMEOUT_S = 24 * 3600.0
NOT_READ = "read the notebook with notebook_read first: changes name cells by the index it shows"
#: how many cells' runners are remembered (the cells a turn may start from)
RUNNERS_KEPT = 256
#: seconds the read that checks a review's accepted changes may take
CONFIRM_TIMEOUT_S = 5.0
#: what ``notebook_run`` answers for a ``%shiro`` cell (the front end does not run it: status ``skipped``)
SKIPPED_TURN_CELL = (
    "skipped: a %shiro cell is never run by notebook_run (it would start a turn inside this one); nothing ran "
    "in it — ask the user to run it once this turn has ended"
)


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
    #: nobody reviewed the change in time: a refusal, as an approval nobody answered is (the cell tools tell the
    #: model in the approval's words: ``approval.UNANSWERED_DENIAL``)
    refused: bool = False


def diff_of(old: str, new: str, label: str) -> tuple[str, int, int]:
    """The unified diff of a cell's source, and how many lines it adds and removes."""
    lines = list(
        difflib.unified_diff(old.splitlines(), new.splitlines(), f"{label} (before)", f"{label} (after)", lineterm="")
    )
    added = sum(1 for ln in lines if ln.startswith("+") and not ln.startswith("+++"))
    removed = sum(1 for ln in lines if ln.startswith("-") and not ln.startswith("---"))
    return "\n".join(lines), added, removed


def _unanswered(change: Change, seconds: float, row: dict[str, Any] | None = None) -> Outcome:
    """A change nobody reviewed in time: not applied, and ``refused`` (the tool tells the model as of an approval
    nobody answered)."""
    text = f"Error: not applied — nobody answered the review of this {change.kind} within {seconds:g} s"
    return Outcome(text, True, row or {}, refused=True)


class LiveNotebook:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel
        #: the ids of the cells by index, as the agent last read them, and each one's source then
        self.order: list[str] = []
        self.seen: dict[str, str] = {}
        #: each cell's type by id, as last read (a deleted cell comes back as what it was)
        self.types: dict[str, str] = {}
        #: the changes that went in, by the call that made them (what undo takes back): the change, the id of
        #: the cell it made or changed, and the cell before it (where a deleted cell goes back)
        self.applied: dict[str, tuple[Change, str, str | None]] = {}
        #: the ``%shiro`` cell of the running turn (``propose_cell`` inserts below it)
        self.turn_cell: str | None = None
        #: which client (a browser window's kernel connection) ran each cell, newest last: the front end that
        #: ran the turn's cell serves its requests
        self.ran_by: dict[str, str] = {}
        #: the ids of the cells a ``notebook_run`` is running now (a ``%shiro`` cell among them must not start
        #: a turn: :func:`shiro_kernel.notebook.run_by_agent`)
        self.running: frozenset[str] = frozenset()
        self._reopened: set[str] = set()
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
        reply = self.channel.request("read", timeout=READ_TIMEOUT_S, abort=abort, to=self.server())
        cells = [c for c in reply.get("cells") or [] if isinstance(c, dict)]
        self.remember(cells)
        return {"cells": cells, "dirty": bool(reply.get("dirty"))}

    def unavailable(self) -> str | None:
        """Why no front end can act on the document now (one sentence), or None."""
        return self.channel.unavailable(self.server())

    # -- which front end serves ----------------------------------------------------------------------
    def note_cell(self, cell_id: str, client: str) -> None:
        """``client`` (a front end's kernel connection) runs cell ``cell_id`` now."""
        with self._lock:
            self.ran_by.pop(cell_id, None)
            self.ran_by[cell_id] = client
            while len(self.ran_by) > RUNNERS_KEPT:
                del self.ran_by[next(iter(self.ran_by))]

    def server(self) -> str | None:
        """The client whose front end serves this turn's requests: the one that ran its ``%shiro`` cell (None:
        not known, the channel picks). When that front end has not said hello on the open comm (its window was
        opened after the comm), the comm is opened again, once per client, so that it can."""
        client = self.ran_by.get(self.turn_cell) if self.turn_cell else None
        channel = self.channel
        if client is None or channel.knows(client) or client in self._reopened or channel.unavailable() is not None:
            return client
        self._reopened.add(client)
        channel.reopen()
        return client

    def remember(self, cells: list[dict[str, Any]]) -> None:
        """What the agent has seen (a live read, or the file on disk): ids by index, sources by id."""
        with self._lock:
            self.order = [str(c.get("id") or "") for c in cells]
            self.seen = {str(c.get("id") or ""): _text(c.get("source")) for c in cells if c.get("id")}
            self.types = {str(c.get("id") or ""): str(c.get("cell_type") or "code") for c in cells if c.get("id")}

    # -- changing ----------------------------------------------------------------------------------
    def stage(self, calls: list[tuple[str, str, dict[str, Any]]]) -> None:
        """The changes one step asks for (call id, tool name, arguments), reviewed together as one request: the
        calls of its tools whose declared effect is a review (``Tool.reviewed``; the caller picks them)."""
        with self._lock:
            self._batch = list(calls)
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
        reason = self.unavailable()  # said first: nothing could change the notebook, read or not
        if reason is not None:
            return {call_id: Outcome(f"Error: {reason}", True) for call_id, _name, _args in batch}
        changes: list[Change] = []
        for call_id, name, args in batch:
            try:
                changes.append(self._resolve(call_id, name, args))
            except ToolError as exc:
                outcomes[call_id] = Outcome(f"Error: {exc}", True)
        if not changes:
            return outcomes
        if review and self.unanswered:  # nobody answered this turn's last question: nobody is asked again
            return {**outcomes, **{c.call_id: _unanswered(c, timeout) for c in changes}}
        try:
            reply = self.channel.request(
                "review",
                timeout=timeout if review else READ_TIMEOUT_S,
                abort=abort,
                to=self.server(),
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
            return {**outcomes, **{c.call_id: _unanswered(c, timeout) for c in changes}}
        except Withdrawn as exc:
            if exc.decided is not None:  # a Stop, and the front end said which changes the user decided before it
                return {**outcomes, **self._withdrawn(changes, exc.decided, "stopped", review, timeout)}
            return {**outcomes, **{c.call_id: Outcome(f"Error: {exc}", True) for c in changes}}
        except ToolError as exc:
            return {**outcomes, **{c.call_id: Outcome(f"Error: {exc}", True) for c in changes}}
        results = [r for r in reply.get("results") or [] if isinstance(r, dict)]
        told = {k: results[k] if k < len(results) else {"status": "missing"} for k in range(len(changes))}
        checked = self._confirmed(changes, told)
        for number, change in enumerate(changes):
            outcomes[change.call_id] = self._outcome(change, checked[number], review)
        return outcomes

    def _confirmed(self, changes: list[Change], results: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
        """``results`` as the document shows them: the cells of the changes said accepted are read back, and
        one the document does not hold (an edited cell without the new source, an inserted cell that is not
        there, a deleted cell still there) is ``unconfirmed``, as is each when the read fails."""
        accepted = [k for k, r in results.items() if r.get("status") in ("accepted", "applied")]
        if not accepted:
            return results
        ids = [cid for k in accepted for cid in (changes[k].cell_id, results[k].get("id")) if isinstance(cid, str)]
        ids = list(dict.fromkeys(ids))  # an edit's cell is named twice
        try:
            reply = self.channel.request("read", timeout=CONFIRM_TIMEOUT_S, to=self.server(), ids=ids)
            found: dict[str, dict[str, Any]] | None = {
                str(c.get("id")): c for c in reply.get("cells") or [] if isinstance(c, dict)
            }
        except ToolError:  # no answer: nothing the front end said can be checked
            found = None
        checked = dict(results)
        for k in accepted:
            shown, index = _shown(changes[k], results[k], found)
            # not shown: the reply's index is its word too, so the row names the cell the model named
            checked[k] = (
                {**results[k], "index": index} if shown else {**results[k], "status": "unconfirmed", "index": None}
            )
        return checked

    def _withdrawn(
        self, changes: list[Change], decided: dict[int, dict[str, Any]], status: str, review: bool, timeout: float
    ) -> dict[str, Outcome]:
        """The outcomes of a review withdrawn (``status``: ``stopped`` or ``unanswered``): each change the user
        decided before it as decided, each other one not applied, with its row."""
        outcomes: dict[str, Outcome] = {}
        decided = self._confirmed(changes, decided)
        for number, change in enumerate(changes):
            if number in decided:
                outcomes[change.call_id] = self._outcome(change, decided[number], review)
            else:
                outcome = self._outcome(change, {"status": status}, review)
                if status == "unanswered":
                    outcome = _unanswered(change, timeout, outcome.change)
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
            "unconfirmed": f"not confirmed — the front end answered that this {what} was made, but the notebook "
            "does not show it; read the notebook again before changing it",
        }
        return Outcome("Error: " + texts.get(status, f"not applied ({status})"), True, row)

    def _learn(self, change: Change, result: dict[str, Any]) -> None:
        """After an accepted change, what the agent knows of the document follows it."""
        with self._lock:
            new_id = result.get("id")
            if change.kind == "delete" and change.cell_id in self.order:
                place = self.order.index(change.cell_id)
                before = self.order[place - 1] if place > 0 else None
                self.applied[change.call_id] = (change, change.cell_id, before)
            elif change.kind == "edit" and change.cell_id:
                self.applied[change.call_id] = (change, change.cell_id, None)
            elif change.kind == "insert" and isinstance(new_id, str):
                self.applied[change.call_id] = (change, new_id, None)
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

    # -- taking back ---------------------------------------------------------------------------------
    def revert(self, call_ids: list[str]) -> list[str]:
        """Take back the changes these calls made (newest first), through the front end, each one undo step there:
        an edit's cell gets its old source, an inserted cell goes, a deleted cell comes back where it was. A cell
        the user changed since is left as it is. One line per change, as done or not."""
        lines: list[str] = []
        for call_id in call_ids:
            applied = self.applied.pop(call_id, None)
            if applied is None:
                continue  # nothing of this call went in (rejected, or already taken back)
            change, cell_id, before = applied
            inverse = _inverse(change, cell_id, before, self.types.get(cell_id, change.cell_type))
            try:
                reply = self.channel.request(
                    "review",
                    timeout=READ_TIMEOUT_S,
                    to=self.server(),
                    changes=[inverse.to_wire()],
                    review=False,
                    turn=self.turn_cell,
                    title="shiro takes back a change",
                )
                status = str(((reply.get("results") or [{}])[0] or {}).get("status") or "missing")
            except ToolError as exc:
                status = str(exc)
            done = status in ("accepted", "applied")
            cell = f"cell {change.index}" if change.index >= 0 else "the cell"
            what = {"edit": f"the edit of {cell}", "insert": "the inserted cell", "delete": f"the deletion of {cell}"}
            lines.append(
                f"{what[change.kind]} taken back" if done else f"{what[change.kind]} not taken back ({status})"
            )
            if done:
                self._learn(inverse, reply.get("results", [{}])[0] if isinstance(reply, dict) else {})
                self.applied.pop(inverse.call_id, None)
        return lines

    # -- running -----------------------------------------------------------------------------------
    def run(self, indices: list[Any], abort: threading.Event | None = None) -> list[dict[str, Any]]:
        """Run code cells in the front end (their outputs land in the document); each one's outputs. While
        they run, :attr:`running` holds their ids (a ``%shiro`` cell among them does not start a turn)."""
        reason = self.unavailable()
        if reason is not None:
            raise ToolError(reason)
        ids = [self._target(i, "cell")[1] for i in indices]
        self.running = frozenset(ids)
        try:
            reply = self.channel.request("run", timeout=RUN_TIMEOUT_S, abort=abort, to=self.server(), ids=ids)
        finally:
            self.running = frozenset()
        return [c for c in reply.get("cells") or [] if isinstance(c, dict)]


def _inverse(change: Change, cell_id: str, before: str | None, cell_type: str) -> Change:
    """The change that takes ``change`` back (its made or changed cell is ``cell_id``)."""
    undo = f"undo:{change.call_id}"
    if change.kind == "edit":
        return Change(undo, "edit", change.index, cell_id, change.expect or "", expect=change.source)
    if change.kind == "insert":
        return Change(undo, "delete", change.index, cell_id, expect=change.source)
    return Change(undo, "insert", change.index, before, change.expect or "", cell_type)


def _text(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value or "")


def _shown(change: Change, result: dict[str, Any], cells: dict[str, dict[str, Any]] | None) -> tuple[bool, Any]:
    """Does the document (``cells`` read back by id; None: not read) hold an accepted change? And the index of
    its cell now (for a delete, the index it had)."""
    if cells is None:
        return False, None
    if change.kind == "delete":
        return change.cell_id not in cells, result.get("index")
    cell = cells.get(str(change.cell_id if change.kind == "edit" else result.get("id")))
    if cell is None or _text(cell.get("source")) != change.source:
        return False, None
    if change.kind == "insert" and cell.get("cell_type", change.cell_type) != change.cell_type:
        return False, None
    index = cell.get("index")
    return True, index if isinstance(index, int) and not isinstance(index, bool) else result.get("index")


__all__ = ["NOT_READ", "SKIPPED_TURN_CELL", "Change", "LiveNotebook", "Outcome", "diff_of"]
