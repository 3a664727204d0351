"""A stand-in for the labextension's end of the notebook channel (importable as ``frontend``): a document of
cells that answers the kernel's requests as docs/notebook-protocol.md says the front end must — read, review
(the user's answer scripted per change), run (cells executed in a given shell), cancel — for in-process tests
of the kernel side. :class:`Windows` puts several of them on one comm, as several browser windows (or real-time
collaborators) on one notebook hear the kernel's comm. The real front end is tested in Chromium
(tests/browser/test_lab_cells.py, tests/browser/test_lab_windows.py)."""

from __future__ import annotations

import itertools
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from IPython.utils.capture import capture_output

from shiro_kernel.notebook.channel import PROTOCOL, Channel


@dataclass
class Cell:
    source: str
    cell_type: str = "code"
    id: str = ""
    outputs: list[dict[str, Any]] = field(default_factory=list)
    execution_count: int | None = None


#: a cell that would start a turn (labextension/src/protocol.ts ``isShiroCell``)
SHIRO_CELL = re.compile(r"^\s*%%?shiro\b|run_(?:line|cell)_magic\(\s*['\"]shiro['\"]", re.MULTILINE)


@dataclass
class FrontEnd:
    cells: list[Cell] = field(default_factory=list)
    #: the user's answer to each reviewed change, in order: accepted | rejected | later (undecided while the
    #: others are decided) | a callable run first (None: neither it nor the ones after it are ever answered)
    answers: list[str | Callable[[FrontEnd], str | None]] = field(default_factory=list)
    editing: str | None = None  # the id of the cell whose editor has focus
    dirty: bool = False
    run_in: Any = None  # a shell the ``run`` requests execute cells in
    requests: list[dict[str, Any]] = field(default_factory=list)
    answer_hello: bool = True
    #: this end no longer answers (its tab closed, or the page reloaded); a new open answers again
    gone: bool = False
    opened: int = 0  # how many comms the kernel opened to it
    replies_on_main_thread: bool = False
    #: it answers a cancel with what the user decided before it (docs/notebook-protocol.md), as the
    #: labextension does; False: as an older one, which withdraws without a word
    withdraws: bool = True
    #: each review left undecided: what the user decided of it so far (None: not yet), by request id
    undecided: dict[int, list[dict[str, Any] | None]] = field(default_factory=dict)
    #: this window's client id (its kernel connection's): said in hello, and requests ``to`` another are not served
    client: str = "client-1"
    #: it does not run a %shiro cell a run request names (the labextension's check); False: an older one that does
    skips_turn_cells: bool = True
    #: it answers every change accepted and changes nothing (a forged reply)
    forges: bool = False
    _ids: Any = field(default_factory=lambda: itertools.count(1))
    channel: Channel | None = None

    def __post_init__(self) -> None:
        for cell in self.cells:
            cell.id = cell.id or f"cell-{next(self._ids)}"

    # -- the transport the kernel's channel opens ----------------------------------------------------
    def open(
        self,
        data: dict[str, Any],
        on_message: Callable[[dict[str, Any], str | None], None],
        on_close: Callable[[], None] = lambda: None,
    ) -> FrontEnd:
        assert data["protocol"] == PROTOCOL
        self.opened += 1
        self._on_message, self._on_close = on_message, on_close
        self.gone = False  # a new comm: the (new) page answers it
        if self.answer_hello:
            hello = {"type": "hello", "protocol": PROTOCOL, "path": data.get("path"), "version": "test"}
            hello["client"] = self.client
            on_message({**hello, "withdraws": True} if self.withdraws else hello, self.client)
        return self

    def send(self, data: dict[str, Any]) -> None:
        self.requests.append(data)
        if self.gone or data.get("to", self.client) != self.client:
            return  # gone, or addressed to another window: not served here
        if data["type"] == "cancel":
            results = self.undecided.pop(data["id"], None)
            if results is not None and self.withdraws:
                self._reply(data["id"], {"withdrawn": True, "results": results})
            return
        if data["type"] != "request":
            return
        reply = getattr(self, "_" + data["op"])(data)
        if reply is None:  # the user has not decided (nor will: the tab closes, the page reloads)
            return
        self._reply(data["id"], reply)

    def _reply(self, number: int, reply: dict[str, Any]) -> None:
        # the answer comes from another thread, as the kernel's loop delivers it
        message = {"type": "reply", "id": number, "ok": True, **reply}
        threading.Timer(0.01, self._on_message, args=(message, self.client)).start()

    def close(self) -> None:
        pass

    def panel_closed(self) -> None:
        """The user closes the notebook's tab: the front end closes its end of the comm."""
        self.gone = True
        self._on_close()

    def page_reloaded(self) -> None:
        """The page reloads: nothing is closed, the old comm's end is simply gone (it never answers again),
        and the new page answers the next comm the kernel opens."""
        self.gone = True

    # -- the document ----------------------------------------------------------------------------------
    def index_of(self, cell_id: str | None) -> int | None:
        return next((i for i, c in enumerate(self.cells) if c.id == cell_id), None)

    def _read(self, data: dict[str, Any]) -> dict[str, Any]:
        rows = [
            {
                "index": i,
                "id": c.id,
                "cell_type": c.cell_type,
                "source": c.source,
                "execution_count": c.execution_count,
                "outputs": c.outputs,
                "editing": c.id == self.editing,
            }
            for i, c in enumerate(self.cells)
            if data.get("ids") is None or c.id in data["ids"]
        ]
        return {"cells": rows, "dirty": self.dirty}

    def _review(self, data: dict[str, Any]) -> dict[str, Any] | None:
        results: list[dict[str, Any] | None] = []
        for change in data["changes"]:
            answer: Any = "accepted" if not data["review"] else (self.answers.pop(0) if self.answers else "rejected")
            if callable(answer):
                answer = answer(self)
                if answer is None:  # no answer to this change (nor to the ones after it): the review stays shown
                    self.undecided[data["id"]] = results + [None] * (len(data["changes"]) - len(results))
                    return None
            if answer == "later":  # the user decides the others first, and this one not yet
                results.append(None)
                continue
            if self.forges:  # whatever was decided, the reply says accepted, and the document is left as it was
                index = self.index_of(change.get("id") or change.get("after"))
                results.append({"status": "accepted", "id": change.get("id") or "cell-forged", "index": index})
                continue
            results.append(self._apply(change) if answer == "accepted" else {"status": answer})
        if None in results:
            self.undecided[data["id"]] = results
            return None
        return {"results": results}

    def _apply(self, change: dict[str, Any]) -> dict[str, Any]:
        if change["kind"] == "insert":
            after = self.index_of(change["after"]) if change["after"] is not None else -1
            if after is None:
                return {"status": "missing"}
            cell = Cell(change["source"], change.get("cell_type", "code"), f"cell-{next(self._ids)}")
            self.cells.insert(after + 1, cell)
            return {"status": "accepted", "id": cell.id, "index": after + 1}
        index = self.index_of(change["id"])
        if index is None:
            return {"status": "missing"}
        cell = self.cells[index]
        if change.get("expect") is not None and change["expect"] != cell.source:
            return {"status": "conflict", "id": cell.id, "index": index}
        if cell.id == self.editing:
            return {"status": "editing", "id": cell.id, "index": index}
        if change["kind"] == "delete":
            del self.cells[index]
            return {"status": "accepted", "id": cell.id, "index": index}
        cell.source = change["source"]
        return {"status": "accepted", "id": cell.id, "index": index}

    def _run(self, data: dict[str, Any]) -> dict[str, Any]:
        out = []
        for cell_id in data["ids"]:
            index = self.index_of(cell_id)
            cell = self.cells[index] if index is not None else None
            if cell is None:
                out.append({"id": cell_id, "status": "missing"})
                continue
            if self.skips_turn_cells and SHIRO_CELL.search(cell.source):
                out.append({"id": cell_id, "index": index, "status": "skipped", "execution_count": None, "outputs": []})
                continue
            with capture_output(stderr=False, display=False) as printed:  # run with its id, as JupyterLab sends it
                result = self.run_in.run_cell(cell.source, store_history=False, cell_id=cell.id)
            text = repr(result.result) if result.result is not None else ""
            cell.execution_count = (cell.execution_count or 0) + 1
            # what it printed (the terminal displayhook prints a value too: a cell with a value shows that alone)
            stream = [{"output_type": "stream", "name": "stdout", "text": printed.stdout}] if printed.stdout else []
            cell.outputs = [{"output_type": "execute_result", "data": {"text/plain": text}}] if text else stream
            status = "error" if result.error_in_exec is not None else "ok"
            if status == "error":
                cell.outputs = [
                    {
                        "output_type": "error",
                        "ename": type(result.error_in_exec).__name__,
                        "evalue": str(result.error_in_exec),
                        "traceback": [],
                    }
                ]
            out.append(
                {
                    "id": cell_id,
                    "index": index,
                    "status": status,
                    "execution_count": cell.execution_count,
                    "outputs": cell.outputs,
                }
            )
            if status == "error":
                break
        return {"cells": out}


@dataclass
class Windows:
    """Several front ends on one comm (browser windows, or real-time collaborators, on one notebook): the
    kernel's comm open and every message it sends reach each of them, and each answers on its own."""

    fronts: list[FrontEnd]
    replies_on_main_thread: bool = False

    def open(
        self,
        data: dict[str, Any],
        on_message: Callable[[dict[str, Any], str | None], None],
        on_close: Callable[[], None] = lambda: None,
    ) -> Windows:
        for front in self.fronts:
            front.open(data, on_message, on_close)
        return self

    def send(self, data: dict[str, Any]) -> None:
        for front in self.fronts:
            front.send(data)

    def close(self) -> None:
        pass
