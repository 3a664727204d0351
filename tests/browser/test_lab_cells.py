"""The notebook channel's front end (docs/notebook-protocol.md) in a real JupyterLab and Chromium.

The kernel side is played by a real comm opened from the notebook's own kernel (``comm.create_comm``
on target ``shiro.notebook``), which records what the front end sends; the tests send requests through it
and read the replies back from the kernel. They check the document itself (the panel's model), never the
file: read sees unsaved edits, a review shows its diff in the cell and changes nothing before Accept,
Accept is one undo step, Reject leaves the cell, a cell typed in after the read is refused, run puts the
outputs in the document, cancel withdraws, and "Fix with shiro" inserts the ``%%shiro`` cell.

One page and one notebook serve the module (each test resets the cells), so the suite stays quick.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Iterator
from typing import Any

import nbformat
import pytest
from conftest import ARTIFACTS, ROOT, Lab  # tests/browser/conftest.py (its folder is on sys.path)
from fakeopenai import Call, Reply
from labutil import kernel_print, open_notebook, results_per_call, shot, write_notebook
from nbformat.v4 import new_code_cell, new_notebook, new_output

from shiro_kernel.notebook.channel import BLOCKED, UNANSWERED_BLOCKED
from shiro_kernel.notebook.document import SKIPPED_TURN_CELL

pytestmark = pytest.mark.timeout(120)

NAME = "cells.ipynb"
TURN_MIME = "application/vnd.shiro.turn+json"

# The kernel side of the channel, as a test plays it: open the comm, keep every message the front end sends.
HARNESS = """
import json as _shiro_json
from comm import create_comm as _shiro_create_comm
_shiro_test = {"got": [], "comm": None}
def _shiro_open(path):
    if _shiro_test["comm"] is not None:
        _shiro_test["comm"].close()
    _shiro_test["got"].clear()
    comm = _shiro_create_comm(target_name="shiro.notebook", data={"protocol": 1, "path": path})
    comm.on_msg(lambda msg: _shiro_test["got"].append(msg["content"]["data"]))
    comm.on_close(lambda msg: _shiro_test["got"].append({"type": "closed"}))
    _shiro_test["comm"] = comm
"""


def run_in_kernel(page: Any, code: str) -> None:
    out = kernel_print(page, f"exec({code!r}, globals()) or ''")
    assert out.strip() == "", out


def got(page: Any) -> list[dict[str, Any]]:
    """Every message the front end sent on the test comm so far."""
    for _ in range(20):
        out = kernel_print(page, "_shiro_json.dumps(_shiro_test['got'])")
        if out.strip():
            return list(json.loads(out))
        time.sleep(0.1)  # queued behind a cell that failed, the kernel aborted the request: ask again
    raise AssertionError("the kernel does not answer")


def send(page: Any, message: dict[str, Any]) -> None:
    run_in_kernel(page, f"_shiro_test['comm'].send(_shiro_json.loads({json.dumps(message)!r}))")


def reply(page: Any, request_id: int, timeout: float = 30) -> dict[str, Any]:
    """The front end's reply to ``request_id``, as the kernel received it."""
    deadline = time.monotonic() + timeout
    while True:
        for message in got(page):
            if message.get("type") == "reply" and message.get("id") == request_id:
                return message
        assert time.monotonic() < deadline, f"no reply to {request_id}: {got(page)}"
        time.sleep(0.15)


def request(page: Any, request_id: int, op: str, **fields: Any) -> None:
    send(page, {"type": "request", "id": request_id, "op": op, **fields})


def sources(page: Any) -> list[str]:
    return list(
        page.evaluate(
            """() => { const cells = window.jupyterapp.shell.currentWidget.content.model.cells; const out = [];
                     for (let i = 0; i < cells.length; i++) out.push(cells.get(i).sharedModel.getSource());
                     return out; }"""
        )
    )


def ids(page: Any) -> list[str]:
    return list(
        page.evaluate(
            """() => { const cells = window.jupyterapp.shell.currentWidget.content.model.cells; const out = [];
                     for (let i = 0; i < cells.length; i++) out.push(cells.get(i).id);
                     return out; }"""
        )
    )


def reset(page: Any, cells: list[str]) -> list[str]:
    """Replace the document's cells (no outputs, fresh ids, no undo history); their ids."""
    page.evaluate(
        """sources => { const panel = window.jupyterapp.shell.currentWidget; const nb = panel.content.model.sharedModel;
                      nb.transact(() => { nb.deleteCellRange(0, nb.cells.length);
                        nb.insertCells(0, sources.map(source => ({cell_type: 'code', source, metadata: {}}))); }, false);
                      nb.undoManager.clear(); panel.content.activeCellIndex = 0; panel.content.mode = 'command'; }""",
        cells,
    )
    return ids(page)


def cell(page: Any, index: int) -> Any:
    return page.locator(".jp-Notebook .jp-Cell").nth(index)


def type_into(page: Any, index: int, text: str) -> None:
    """Type at the end of cell ``index``'s editor, as the user does (the cursor stays in it)."""
    cell(page, index).locator(".cm-content").click()
    page.keyboard.press("Control+End")
    page.keyboard.type(text)


def blur(page: Any) -> None:
    page.evaluate("() => { document.activeElement && document.activeElement.blur(); }")
    page.evaluate("() => { window.jupyterapp.shell.currentWidget.content.mode = 'command'; }")


@pytest.fixture(scope="module")
def nb(lab: Lab, browser: Any) -> Iterator[Any]:
    """One page with ``cells.ipynb`` open and the test comm opened from its kernel (hello answered)."""
    path = lab.root / NAME
    write_notebook(path, ["a = 1\nb = 2\nprint(a + b)", "x = 10", "y = x * 2\ny"])
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.console_errors = errors
    open_notebook(page, lab, NAME)
    run_in_kernel(page, HARNESS)
    run_in_kernel(page, f"_shiro_open({str(path)!r})")
    try:
        yield page
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        try:
            page.screenshot(path=str(ARTIFACTS / "cells-module-end.png"), full_page=True)
        except Exception:
            pass
        context.close()
    assert not errors, errors


def wait_hello(page: Any) -> dict[str, Any]:
    deadline = time.monotonic() + 15
    while True:
        hellos = [m for m in got(page) if m.get("type") == "hello"]
        if hellos:
            return hellos[-1]
        assert time.monotonic() < deadline, got(page)
        time.sleep(0.1)


def test_hello_then_read_sees_unsaved_typing(nb: Any) -> None:
    page = nb
    hello = wait_hello(page)
    version = json.loads((ROOT / "labextension" / "package.json").read_text())["version"]
    assert hello == {
        "type": "hello",
        "protocol": 1,
        "path": NAME,
        "panel": page.evaluate("window.jupyterapp.shell.currentWidget.id"),
        "client": page.evaluate("window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.clientId"),
        "version": version,
        "withdraws": True,
    }
    cell_ids = reset(page, ["a = 1\nb = 2\nprint(a + b)", "x = 10", "y = x * 2\ny"])
    type_into(page, 1, "  # typed")
    request(page, 1, "read")
    answer = reply(page, 1)
    assert answer["ok"] is True, answer
    cells = answer["cells"]
    assert [c["id"] for c in cells] == cell_ids
    assert [c["index"] for c in cells] == [0, 1, 2]
    assert cells[1]["source"] == "x = 10  # typed"  # not saved: the document, not the file
    assert answer["dirty"] is True
    assert [c["editing"] for c in cells] == [False, True, False]  # the cursor is in cell 1
    assert cells[0]["cell_type"] == "code" and cells[0]["outputs"] == [] and cells[0]["execution_count"] is None
    blur(page)


def test_a_comm_for_another_notebook_is_not_answered(nb: Any, lab: Lab) -> None:
    page = nb
    run_in_kernel(page, f"_shiro_open({str(lab.root / 'elsewhere.ipynb')!r})")
    time.sleep(1.0)
    assert [m for m in got(page) if m.get("type") == "hello"] == []
    request(page, 2, "read")
    time.sleep(0.8)
    assert got(page) == []  # a panel that did not answer the open serves nothing on it
    run_in_kernel(page, f"_shiro_open({str(lab.root / NAME)!r})")
    wait_hello(page)


def test_review_edit_shows_a_diff_and_accept_is_one_undo_step(nb: Any) -> None:
    page = nb
    first, second, _ = reset(page, ["a = 1\nb = 2\nprint(a + b)", "x = 10", "y = x * 2\ny"])
    old = "a = 1\nb = 2\nprint(a + b)"
    new = "a = 1\nb = 3\nprint(a + b)\nprint('done')"
    change = {"kind": "edit", "id": first, "source": new, "expect": old}
    request(page, 10, "review", changes=[change], review=True, turn=None, title="b should be 3")
    box = cell(page, 0).locator(".shiro-review-edit")
    box.wait_for(timeout=10_000)
    assert box.locator(".shiro-diff-del").all_inner_texts() == ["- b = 2"]
    assert box.locator(".shiro-diff-add").all_inner_texts() == ["+ b = 3", "+ print('done')"]
    assert "+2 −1" in box.locator(".shiro-review-counts").inner_text()
    assert "b should be 3" in box.inner_text()
    assert box.locator(".shiro-review-accept-all").is_hidden()  # one change: no Accept all
    assert cell(page, 1).locator(".shiro-review").count() == 0
    shot(page, "cells-review-edit")
    assert sources(page)[0] == old  # nothing changes before Accept
    box.locator(".shiro-review-accept").click()
    answer = reply(page, 10)
    assert answer["ok"] is True and answer["results"] == [{"status": "accepted", "id": first, "index": 0}], answer
    assert sources(page)[0] == new
    assert cell(page, 0).locator(".shiro-review").count() == 0
    # one undo step in the cell: the agent's edit goes, whole
    page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.cells.get(0).sharedModel.undo()")
    assert sources(page)[0] == old
    assert ids(page)[1] == second


def test_review_edit_reject_leaves_the_cell_and_says_the_users_note(nb: Any) -> None:
    page = nb
    first, _, _ = reset(page, ["a = 1", "x = 10", "y = x * 2\ny"])
    request(page, 11, "review", changes=[{"kind": "edit", "id": first, "source": "a = 2", "expect": "a = 1"}])
    box = cell(page, 0).locator(".shiro-review-edit")
    box.wait_for(timeout=10_000)
    box.locator(".shiro-review-note").fill("keep a at one")
    box.locator(".shiro-review-reject").click()
    answer = reply(page, 11)
    assert answer["results"] == [{"status": "rejected", "id": first, "index": 0, "note": "keep a at one"}], answer
    assert sources(page)[0] == "a = 1"
    assert cell(page, 0).locator(".shiro-review").count() == 0


def test_insert_and_delete_show_in_place_and_accept_all_applies_them(nb: Any) -> None:
    page = nb
    first, second, third = reset(page, ["a = 1", "x = 10", "y = x * 2\ny"])
    changes = [
        {"kind": "insert", "after": first, "source": "inserted_one = 1", "cell_type": "code"},
        {"kind": "insert", "after": first, "source": "## inserted two", "cell_type": "markdown"},
        {"kind": "delete", "id": third, "expect": "y = x * 2\ny"},
    ]
    request(page, 12, "review", changes=changes, review=True, turn=None, title="")
    ghosts = page.locator(".shiro-proposed-cell")
    ghosts.nth(1).wait_for(timeout=10_000)
    # the ghosts sit between cell 0 and cell 1, in order, and are not in the document
    assert ghosts.all_inner_texts()[0].count("inserted_one = 1") == 1
    assert cell(page, 0).locator(".shiro-proposed-source").all_inner_texts() == ["inserted_one = 1", "## inserted two"]
    assert "new markdown cell" in ghosts.nth(1).inner_text()
    doomed = cell(page, 2)
    assert "shiro-marked-for-removal" in (doomed.get_attribute("class") or "")
    assert "delete this cell" in doomed.locator(".shiro-review").inner_text()
    assert page.locator(".shiro-review-accept-all:visible").count() == 1  # once, on the first change
    shot(page, "cells-review-insert-delete")
    assert sources(page) == ["a = 1", "x = 10", "y = x * 2\ny"]
    page.locator(".shiro-review-accept-all").first.click()
    answer = reply(page, 12)
    results = answer["results"]
    assert [r["status"] for r in results] == ["accepted"] * 3, answer
    assert sources(page) == ["a = 1", "inserted_one = 1", "## inserted two", "x = 10"]
    now = ids(page)
    assert results[0] == {"status": "accepted", "id": now[1], "index": 1}
    assert results[1] == {"status": "accepted", "id": now[2], "index": 2}
    assert results[2]["id"] == third and now[3] == second
    assert page.evaluate("window.jupyterapp.shell.currentWidget.content.model.cells.get(2).type") == "markdown"
    assert page.locator(".shiro-review").count() == 0 and page.locator(".shiro-marked-for-removal").count() == 0
    # each accepted change is one notebook undo step: the delete comes back first
    page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.undo()")
    assert sources(page) == ["a = 1", "inserted_one = 1", "## inserted two", "x = 10", "y = x * 2\ny"]


def test_reject_all_leaves_the_document(nb: Any) -> None:
    page = nb
    first, second, _ = reset(page, ["a = 1", "x = 10", "y = 2"])
    changes = [
        {"kind": "insert", "after": None, "source": "at_the_top = 1", "cell_type": "code"},
        {"kind": "delete", "id": second, "expect": "x = 10"},
    ]
    request(page, 13, "review", changes=changes)
    top = cell(page, 0).locator(".shiro-proposed-cell")
    top.wait_for(timeout=10_000)
    # an insert at the top shows above the first cell's input
    assert top.evaluate(
        "(g, cell) => g.getBoundingClientRect().top < cell.getBoundingClientRect().top",
        cell(page, 0).locator(".jp-Cell-inputWrapper").element_handle(),
    )
    page.locator(".shiro-review-reject-all").first.click()
    answer = reply(page, 13)
    assert answer["results"] == [
        {"status": "rejected", "id": None, "index": None},
        {"status": "rejected", "id": second, "index": 1},
    ], answer
    assert sources(page) == ["a = 1", "x = 10", "y = 2"] and ids(page)[0] == first


def test_an_edit_of_a_cell_typed_in_after_the_read_is_refused(nb: Any) -> None:
    page = nb
    first, _, _ = reset(page, ["total = 1 + 1", "x = 10", "y = 2"])
    request(page, 20, "read")
    expect = reply(page, 20)["cells"][0]["source"]
    request(page, 21, "review", changes=[{"kind": "edit", "id": first, "source": "total = 2", "expect": expect}])
    box = cell(page, 0).locator(".shiro-review-edit")
    box.wait_for(timeout=10_000)
    type_into(page, 0, "  # mine")
    # the box says at once that Accept will not apply
    page.wait_for_function("() => !!document.querySelector('.shiro-review-edit.shiro-review-stale')")
    box.locator(".shiro-review-accept").click()
    answer = reply(page, 21)
    assert answer["results"] == [{"status": "conflict", "id": first, "index": 0}], answer
    assert sources(page)[0] == "total = 1 + 1  # mine"  # nothing of the user's is lost
    toast = page.locator(".Toastify__toast", has_text="changed since shiro read it").first
    toast.wait_for(timeout=10_000)
    toast.locator(".jp-Notification-Toast-Close").click()
    blur(page)


def test_review_false_applies_at_once_but_never_over_a_cell_being_typed_in(nb: Any) -> None:
    page = nb
    first, second, _ = reset(page, ["a = 1", "x = 10", "y = 2"])
    request(
        page, 22, "review", review=False, changes=[{"kind": "edit", "id": first, "source": "a = 5", "expect": "a = 1"}]
    )
    assert reply(page, 22)["results"] == [{"status": "accepted", "id": first, "index": 0}]
    assert sources(page)[0] == "a = 5" and page.locator(".shiro-review").count() == 0
    type_into(page, 1, "")  # the cursor sits in cell 1
    request(
        page,
        23,
        "review",
        review=False,
        changes=[{"kind": "edit", "id": second, "source": "x = 11", "expect": "x = 10"}],
    )
    assert reply(page, 23)["results"] == [{"status": "editing", "id": second, "index": 1}]
    assert sources(page)[1] == "x = 10"
    blur(page)
    request(page, 24, "review", review=False, changes=[{"kind": "delete", "id": "no-such-cell", "expect": ""}])
    assert reply(page, 24)["results"] == [{"status": "missing", "id": "no-such-cell", "index": None}]
    request(page, 25, "review", changes=[{"kind": "edit", "id": first}])
    bad = reply(page, 25)
    assert bad["ok"] is False and "expect" in bad["error"], bad


def test_run_puts_outputs_in_the_document_and_stops_at_an_error(nb: Any) -> None:
    page = nb
    cell_ids = reset(page, ["print('from run', 6 * 7)", "1 / 0", "never = 1"])
    page.evaluate(
        """() => { const nb = window.jupyterapp.shell.currentWidget.content.model.sharedModel;
                 nb.insertCell(3, {cell_type: 'markdown', source: '# notes', metadata: {}}); }"""
    )
    md = ids(page)[3]
    request(page, 30, "run", ids=[cell_ids[0], md, "gone-id", cell_ids[1], cell_ids[2]])
    answer = reply(page, 30, timeout=60)
    assert answer["ok"] is True, answer
    out = answer["cells"]
    assert [c["status"] for c in out] == ["ok", "not-code", "missing", "error", "not-run"], out
    assert out[0]["outputs"][0]["output_type"] == "stream" and "from run 42" in out[0]["outputs"][0]["text"]
    assert isinstance(out[0]["execution_count"], int)
    assert out[3]["outputs"][0]["output_type"] == "error" and out[3]["outputs"][0]["ename"] == "ZeroDivisionError"
    # the outputs are in the document, as if the user ran the cells
    assert "from run 42" in cell(page, 0).locator(".jp-OutputArea").inner_text()
    assert "ZeroDivisionError" in cell(page, 1).locator(".jp-OutputArea").inner_text()
    assert page.evaluate("window.jupyterapp.shell.currentWidget.content.model.cells.get(2).executionCount") is None
    assert kernel_print(page, "'never' in globals()").strip() == "False"  # the run stopped at the error


def test_cancel_withdraws_a_review_and_says_what_was_decided_before_it(nb: Any) -> None:
    page = nb
    first, second, _ = reset(page, ["a = 1", "x = 10", "y = 2"])
    request(page, 40, "review", changes=[{"kind": "edit", "id": first, "source": "a = 9", "expect": "a = 1"}])
    cell(page, 0).locator(".shiro-review-edit").wait_for(timeout=10_000)
    send(page, {"type": "cancel", "id": 40})
    cell(page, 0).locator(".shiro-review").wait_for(state="detached", timeout=10_000)
    answer = reply(page, 40)  # withdrawn: what was decided (nothing), so the kernel need not guess
    assert answer["withdrawn"] is True and answer["results"] == [None], answer
    assert sources(page)[0] == "a = 1"

    # one of two accepted, then withdrawn (a Stop): the reply says the edit is in and the delete undecided
    request(
        page,
        41,
        "review",
        changes=[
            {"kind": "edit", "id": first, "source": "a = 9", "expect": "a = 1"},
            {"kind": "delete", "id": second, "expect": "x = 10"},
        ],
    )
    cell(page, 0).locator(".shiro-review-edit .shiro-review-accept").click()
    cell(page, 1).locator(".shiro-review-delete").wait_for(timeout=10_000)
    send(page, {"type": "cancel", "id": 41})
    page.locator(".shiro-review").first.wait_for(state="detached", timeout=10_000)
    answer = reply(page, 41)
    assert answer["results"] == [{"status": "accepted", "id": first, "index": 0}, None], answer
    assert sources(page) == ["a = 9", "x = 10", "y = 2"]
    time.sleep(0.5)
    assert len([m for m in got(page) if m.get("id") == 41]) == 1  # one reply, not a second at the end


def test_a_review_follows_its_cell_when_moved_and_ends_missing_when_deleted(nb: Any) -> None:
    page = nb
    first, second, _ = reset(page, ["a = 1", "x = 10", "y = 2"])
    request(page, 45, "review", changes=[{"kind": "edit", "id": first, "source": "a = 4", "expect": "a = 1"}])
    cell(page, 0).locator(".shiro-review-edit").wait_for(timeout=10_000)
    page.evaluate(
        """() => { const panel = window.jupyterapp.shell.currentWidget; panel.content.activeCellIndex = 0;
                 return window.jupyterapp.commands.execute('notebook:move-cell-down'); }"""
    )
    assert ids(page)[1] == first
    box = cell(page, 1).locator(".shiro-review-edit")
    box.wait_for(timeout=10_000)  # the moved cell is a new widget: the diff went with it
    assert page.locator(".shiro-review").count() == 1
    box.locator(".shiro-review-accept").click()
    assert reply(page, 45)["results"] == [{"status": "accepted", "id": first, "index": 1}]
    assert sources(page)[1] == "a = 4"
    request(page, 46, "review", changes=[{"kind": "delete", "id": second, "expect": "x = 10"}])
    cell(page, 0).locator(".shiro-review-delete").wait_for(timeout=10_000)
    assert "shiro-marked-for-removal" in (cell(page, 0).get_attribute("class") or "")
    page.evaluate("() => window.jupyterapp.shell.currentWidget.content.model.sharedModel.deleteCell(0)")
    assert reply(page, 46)["results"] == [{"status": "missing", "id": second, "index": None}]
    assert page.locator(".shiro-review").count() == 0


def test_change_rows_in_a_turn_bundle_open_on_their_diff(nb: Any) -> None:
    page = nb
    reset(page, ["print('host')", "x = 10", "y = 2"])
    bundle = {
        "version": 1,
        "entries": [
            {
                "type": "tool",
                "name": "notebook_edit",
                "args": "cell 3",
                "status": "ok",
                "output": "cell 3 edited",
                "change": {
                    "kind": "edit",
                    "cell": 3,
                    "added": 2,
                    "removed": 1,
                    "diff": "--- cell 3\n+++ cell 3\n@@ -1,2 +1,3 @@\n a = 1\n-b = 2\n+b = 3\n+<img src=x onerror=alert(1)>\n",
                    "status": "accepted",
                },
            },
            {
                "type": "tool",
                "name": "notebook_delete",
                "args": "cell 1",
                "status": "ok",
                "output": "rejected",
                "change": {
                    "kind": "delete",
                    "cell": 1,
                    "added": 0,
                    "removed": 1,
                    "diff": "-x = 10\n",
                    "status": "rejected",
                },
            },
        ],
    }
    page.evaluate(
        """bundle => { const m = window.jupyterapp.shell.currentWidget.content.model.cells.get(0);
                     m.outputs.add({output_type: 'display_data', metadata: {},
                                    data: {'application/vnd.shiro.turn+json': bundle, 'text/plain': 'turn'}}); }""",
        bundle,
    )
    turn = cell(page, 0).locator(".jp-RenderedShiroTurn")
    turn.wait_for(timeout=10_000)
    rows = turn.locator("details.shiro-change summary").all_inner_texts()
    assert rows == ["✓ edited cell 3: +2 −1", "✗ delete of cell 1: +0 −1 · rejected"], rows
    turn.locator("details.shiro-change summary").first.click()
    diff = turn.locator("details.shiro-change").first.locator(".shiro-diff")
    assert diff.locator(".shiro-diff-add").all_inner_texts() == ["+b = 3", "+<img src=x onerror=alert(1)>"]
    assert diff.locator(".shiro-diff-del").all_inner_texts() == ["-b = 2"]
    assert turn.locator("img").count() == 0  # the model's diff is text, never markup
    shot(page, "cells-turn-change-rows")


def test_fix_with_shiro_inserts_a_shiro_cell_about_the_failed_cell(nb: Any, lab: Lab) -> None:
    page = nb
    lab.fake.enqueue(Reply(text="I looked at the failed cell."))
    cell_ids = reset(page, ["value = 41", "print(valu + 1)", "after = 1"])
    page.evaluate("window.jupyterapp.shell.currentWidget.content.activeCellIndex = 1")
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-cell')")
    button = cell(page, 1).locator(".shiro-fix-button")
    button.wait_for(timeout=30_000)
    assert "NameError" in cell(page, 1).locator(".jp-OutputArea").inner_text()  # the error renders as usual
    assert cell(page, 0).locator(".shiro-fix-button").count() == 0
    assert page.evaluate("window.jupyterapp.commands.label('shiro:fix-cell')") == "Shiro: Fix this cell"
    assert page.evaluate("window.jupyterapp.commands.isEnabled('shiro:fix-cell')") is True
    shot(page, "cells-fix-button")
    button.click()
    page.wait_for_function("document.querySelectorAll('.jp-Notebook .jp-Cell').length === 4")
    turn = sources(page)[2]
    assert turn.startswith("%%shiro\nFix cell 1 (id " + cell_ids[1] + "): running it failed with NameError"), turn
    assert "print(valu + 1)" in turn and "notebook_edit" in turn and "\x1b" not in turn
    assert sources(page)[3] == "after = 1"
    # it ran: the turn reached the (fake) model, with the prompt
    cell(page, 2).locator(".jp-OutputArea", has_text="I looked at the failed cell.").wait_for(timeout=30_000)
    body = json.dumps(lab.fake.requests[-1].body)
    assert "Fix cell 1" in body and "NameError" in body
    # a turn cell's own failure gets no button; a fixed cell loses it
    page.evaluate(
        "window.jupyterapp.shell.currentWidget.content.model.cells.get(1).sharedModel.setSource('print(41 + 1)')"
    )
    page.evaluate("window.jupyterapp.shell.currentWidget.content.activeCellIndex = 1")
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-cell')")
    cell(page, 1).locator(".jp-OutputArea", has_text="42").wait_for(timeout=30_000)
    assert cell(page, 1).locator(".shiro-fix-button").count() == 0


def test_closing_the_notebook_rejects_what_waits_for_review(nb: Any, lab: Lab) -> None:
    page = nb
    # the %%shiro turn above opened shiro's own comm, which the panel answers now: take it back
    run_in_kernel(page, f"_shiro_open({str(lab.root / NAME)!r})")
    wait_hello(page)
    first, _, _ = reset(page, ["a = 1", "x = 10", "y = 2"])
    request(page, 50, "review", changes=[{"kind": "edit", "id": first, "source": "a = 3", "expect": "a = 1"}])
    cell(page, 0).locator(".shiro-review-edit").wait_for(timeout=10_000)
    page.evaluate("() => window.jupyterapp.shell.currentWidget.dispose()")  # closed, unsaved: no dialog
    # reopen it: the same kernel session holds what the front end sent before the panel went
    open_notebook(page, lab, NAME)
    answer = reply(page, 50)
    assert answer["results"] == [{"status": "rejected", "id": first, "index": None, "note": "the notebook was closed"}]
    assert {"type": "closed"} in got(page)  # and the front end closed the comm: no document is attached


# -- end to end: the kernel's cell tools (shiro_kernel/notebook/) with the fake model ------------------------------

READ = Call("notebook_read", {"cells": None, "images": None})
#: one step that inserts `b = a + 1` after cell 1 and deletes cell 2
TIDY = [
    Call("notebook_insert", {"after": 1, "source": "b = a + 1", "cell_type": "code"}),
    Call("notebook_delete", {"cell": 2}),
]


@pytest.fixture(scope="module")
def agent(nb: Any, lab: Lab) -> Any:
    """The module's page with ``agent.ipynb`` open: shiro's own comm, a scripted model."""
    write_notebook(lab.root / "agent.ipynb", ["%load_ext shiro_kernel"])
    open_notebook(nb, lab, "agent.ipynb")
    return nb


def run_all(page: Any) -> None:
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")


def final_turn(page: Any, index: int, text: str) -> Any:
    turn = cell(page, index).locator(".jp-RenderedShiroTurn")
    turn.get_by_text(text).wait_for(timeout=30_000)
    return turn


def last_results(lab: Lab) -> list[str]:
    """The results of the newest step's calls, as the model read them (the last run of tool outputs)."""
    out: list[str] = []
    for item in lab.fake.requests[-1].body["input"]:
        if item.get("type") == "function_call_output":
            out.append(item["output"])
        elif out:  # a call, or a reference to one: the outputs before it were an earlier step's
            out = []
    return out


def model_saw(lab: Lab) -> str:
    """What the model was sent last (the tool results of the step before), as JSON text."""
    return json.dumps(lab.fake.requests[-1].body, ensure_ascii=False)


def test_the_agent_edits_a_cell_the_user_accepts_then_rejects(agent: Any, lab: Lab) -> None:
    page = agent
    lab.fake.enqueue(
        Reply(text="Reading the notebook.", tool_calls=[READ]),
        Reply(
            text="Doubling it.",
            tool_calls=[Call("notebook_edit", {"cell": 1, "source": "price = 20\nprint(price * 2)"})],
        ),
        Reply(
            text="And a comment.",
            tool_calls=[Call("notebook_edit", {"cell": 1, "source": "price = 20  # doubled\nprint(price * 2)"})],
        ),
        Reply(text="The price is now **20**."),
    )
    reset(
        page,
        [
            '%load_ext shiro_kernel\n%config Shiro.approval = "ask"',
            "price = 10\nprint(price * 2)",
            "%shiro double the price",
        ],
    )
    run_all(page)
    box = cell(page, 1).locator(".shiro-review-edit")
    box.wait_for(timeout=30_000)
    assert box.locator(".shiro-diff-del").all_inner_texts() == ["- price = 10"]
    assert box.locator(".shiro-diff-add").all_inner_texts() == ["+ price = 20"]
    shot(page, "cells-agent-edit-diff")
    assert sources(page)[1] == "price = 10\nprint(price * 2)"  # nothing changed before Accept
    box.locator(".shiro-review-accept").click()
    # the second edit builds on the accepted one: its diff is against the new source
    second = cell(page, 1).locator(".shiro-review-edit", has_text="# doubled")
    second.wait_for(timeout=30_000)
    assert sources(page)[1] == "price = 20\nprint(price * 2)"
    assert second.locator(".shiro-diff-del").all_inner_texts() == ["- price = 20"]
    second.locator(".shiro-review-note").fill("no comments please")
    second.locator(".shiro-review-reject").click()
    turn = final_turn(page, 2, "The price is now 20.")
    assert sources(page)[1] == "price = 20\nprint(price * 2)"  # the rejected edit left the cell as it was
    saw = model_saw(lab)
    assert "Edited cell 1: +1 −1 lines (the user accepted it)." in saw, saw
    assert "the user rejected this edit of cell 1" in saw and "no comments please" in saw, saw
    rows = turn.locator("details.shiro-change summary").all_inner_texts()
    assert rows == ["✓ edited cell 1: +1 −1", "✗ edit of cell 1: +1 −1 · rejected"], rows


def test_an_edit_of_a_cell_the_user_changed_after_the_agent_read_it_is_refused(agent: Any, lab: Lab) -> None:
    page = agent
    read_done = threading.Event()
    typed = threading.Event()

    def edit_once_the_user_typed(_: Any) -> Reply:
        read_done.set()
        typed.wait(30)
        return Reply(tool_calls=[Call("notebook_edit", {"cell": 1, "source": "total = 2"})])

    lab.fake.enqueue(Reply(tool_calls=[READ]), edit_once_the_user_typed, Reply(text="I will read it again."))
    reset(page, ['%load_ext shiro_kernel\n%config Shiro.approval = "ask"', "total = 1 + 1", "%shiro simplify cell 1"])
    run_all(page)
    assert read_done.wait(30)
    type_into(page, 1, "  # mine")  # after the agent read the cell, before its edit arrives
    blur(page)
    typed.set()
    box = cell(page, 1).locator(".shiro-review-edit.shiro-review-stale")
    box.wait_for(timeout=30_000)
    box.locator(".shiro-review-accept").click()
    final_turn(page, 2, "I will read it again.")
    assert sources(page)[1] == "total = 1 + 1  # mine"
    saw = model_saw(lab)
    assert "cell 1 changed since you read it" in saw, saw
    page.locator(".jp-Notification-Toast-Close").first.click()


def test_notebook_run_puts_outputs_in_the_document_and_returns_them(agent: Any, lab: Lab) -> None:
    page = agent
    lab.fake.enqueue(
        Reply(tool_calls=[READ]),
        Reply(tool_calls=[Call("notebook_run", {"cells": [1]})]),
        Reply(text="It printed **42**."),
    )
    reset(
        page,
        [
            '%load_ext shiro_kernel\n%config Shiro.approval = "auto"',
            "print('ran by shiro', 6 * 7)",
            "%shiro run cell 1",
        ],
    )
    run_all(page)
    final_turn(page, 2, "It printed 42.")
    assert "ran by shiro 42" in cell(page, 1).locator(".jp-OutputArea").inner_text()
    count = page.evaluate("window.jupyterapp.shell.currentWidget.content.model.cells.get(1).executionCount")
    assert isinstance(count, int)
    saw = model_saw(lab)
    assert "ran by shiro 42" in saw and f"[1] ok (execution {count})" in saw, saw


def test_rerunning_all_cells_skips_the_turns_own_shiro_cell_and_keeps_one_result_per_call(agent: Any, lab: Lab) -> None:
    """Issue 33 #2: "rerun all the cells" names the %shiro cell that asked: it is not run (no turn starts inside
    the turn), the model reads that it was skipped, the cells after it run, and the saved record keeps exactly
    one result per call."""
    page = agent
    lab.fake.enqueue(
        Reply(tool_calls=[READ]),
        Reply(tool_calls=[Call("notebook_run", {"cells": [0, 1, 2, 3]})]),
        Reply(text="Reran every cell but this one."),
    )
    reset(
        page,
        [
            '%load_ext shiro_kernel\n%config Shiro.approval = "auto"',
            "reruns = globals().get('reruns', 0) + 1",
            "%shiro rerun all the cells",
            "print('after', reruns)",
        ],
    )
    kernel_print(page, "globals().pop('reruns', None) and ''")
    before = len(lab.fake.requests)
    run_all(page)
    final_turn(page, 2, "Reran every cell but this one.")
    page.wait_for_timeout(1500)  # a turn the run had started (or queued) would be asking the model by now
    assert len(lab.fake.requests) == before + 3, [r.body.get("input", [])[:1] for r in lab.fake.requests[before:]]
    ran = last_results(lab)
    assert len(ran) == 1 and f"[2] {SKIPPED_TURN_CELL}" in ran[0] and "[3] ok" in ran[0] and "after 2" in ran[0], ran
    assert kernel_print(page, "reruns").strip() == "2"  # cell 1: by Run All, then by the agent
    assert cell(page, 2).locator(".jp-RenderedShiroTurn").count() == 1  # one turn in the cell
    per_call: dict[str, int] = {}
    for _ in range(50):  # the record is written when the turn ends
        per_call = results_per_call(page)
        if len(per_call) >= 2:
            break
        time.sleep(0.1)
    assert per_call and set(per_call.values()) == {1}, per_call
    shot(page, "cells-rerun-all-skips-the-shiro-cell")


def test_fix_with_shiro_ends_with_the_fixed_cell_after_accept(agent: Any, lab: Lab) -> None:
    page = agent
    reset(page, ['%load_ext shiro_kernel\n%config Shiro.approval = "ask"', "value = 41", "print(valu + 1)"])
    run_all(page)
    button = cell(page, 2).locator(".shiro-fix-button")
    button.wait_for(timeout=30_000)
    lab.fake.enqueue(
        Reply(text="Reading it.", tool_calls=[READ]),
        Reply(text="A typo.", tool_calls=[Call("notebook_edit", {"cell": 2, "source": "print(value + 1)"})]),
        Reply(text="Fixed the typo: `valu` → `value`."),
    )
    button.click()
    # the %%shiro cell runs below the failed one; the fix arrives as a diff on the failed cell
    box = cell(page, 2).locator(".shiro-review-edit")
    box.wait_for(timeout=30_000)
    assert sources(page)[3].startswith("%%shiro\nFix cell 2 (id ")
    assert box.locator(".shiro-diff-add").all_inner_texts() == ["+ print(value + 1)"]
    shot(page, "cells-fix-diff")
    ARTIFACTS.mkdir(exist_ok=True)
    cell(page, 2).screenshot(path=str(ARTIFACTS / "cell-review.png"))  # the README's picture (docs/images/)
    box.locator(".shiro-review-accept").click()
    final_turn(page, 3, "Fixed the typo")
    assert sources(page)[2] == "print(value + 1)"
    asked = json.dumps(lab.fake.requests[-3].body, ensure_ascii=False)
    assert "Fix cell 2" in asked and "NameError" in asked, asked
    page.evaluate("window.jupyterapp.shell.currentWidget.content.activeCellIndex = 2")
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-cell')")
    cell(page, 2).locator(".jp-OutputArea", has_text="42").wait_for(timeout=30_000)
    assert cell(page, 2).locator(".shiro-fix-button").count() == 0
    shot(page, "cells-fix-done")


def test_a_kernel_restart_withdraws_what_waits_for_review(agent: Any, lab: Lab) -> None:
    page = agent
    first, _, _ = reset(page, ["a = 1", "x = 10", "y = 2"])
    run_in_kernel(page, HARNESS)
    run_in_kernel(page, f"_shiro_open({str(lab.root / 'agent.ipynb')!r})")
    wait_hello(page)
    request(page, 60, "review", changes=[{"kind": "edit", "id": first, "source": "a = 3", "expect": "a = 1"}])
    cell(page, 0).locator(".shiro-review-edit").wait_for(timeout=10_000)
    page.evaluate("() => { void window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.restart(); }")
    cell(page, 0).locator(".shiro-review").wait_for(state="detached", timeout=30_000)
    assert sources(page)[0] == "a = 1"


def test_the_agent_inserts_and_deletes_and_accept_all_applies_both(agent: Any, lab: Lab) -> None:
    page = agent
    lab.fake.enqueue(
        Reply(text="Reading.", tool_calls=[READ]),
        Reply(
            text="One new cell, one stale cell gone.",
            tool_calls=TIDY,
        ),
        Reply(text="Added `b`, removed the stale cell."),
    )
    reset(page, ['%load_ext shiro_kernel\n%config Shiro.approval = "ask"', "a = 1", "stale = 0", "%shiro tidy up"])
    run_all(page)
    ghost = cell(page, 1).locator(".shiro-proposed-cell")
    ghost.wait_for(timeout=30_000)
    assert ghost.locator(".shiro-proposed-source").inner_text() == "b = a + 1"
    assert "shiro-marked-for-removal" in (cell(page, 2).get_attribute("class") or "")
    assert page.locator(".shiro-review-accept-all:visible").count() == 1  # the step proposed two: Accept all, once
    shot(page, "cells-agent-insert-delete")
    assert sources(page)[1:3] == ["a = 1", "stale = 0"]  # nothing changed before Accept
    page.locator(".shiro-review-accept-all:visible").click()
    turn = final_turn(page, 3, "Added b, removed the stale cell.")
    assert sources(page) == [
        '%load_ext shiro_kernel\n%config Shiro.approval = "ask"',
        "a = 1",
        "b = a + 1",
        "%shiro tidy up",
    ]
    assert last_results(lab) == ["Inserted cell 2 (the user accepted it).", "Deleted cell 3 (the user accepted it)."]
    rows = turn.locator("details.shiro-change summary").all_inner_texts()
    # results say the indices after the change: the stale cell was cell 3 once the insert above it was in
    assert rows == ["✓ inserted cell 2: +1 −0", "✓ deleted cell 3: +0 −1"], rows
    # each accepted change is one undo step of the notebook: `z` in command mode brings the deleted cell back
    cell(page, 1).locator(".jp-InputPrompt").click()  # the notebook has the focus, in command mode
    page.keyboard.press("Escape")
    page.keyboard.press("z")
    assert sources(page)[1:4] == ["a = 1", "b = a + 1", "stale = 0"]


def test_the_agent_is_told_when_the_user_rejects_an_insert_and_a_delete(agent: Any, lab: Lab) -> None:
    page = agent
    lab.fake.enqueue(
        Reply(tool_calls=[READ]),
        Reply(tool_calls=TIDY),
        Reply(text="Leaving the notebook as it is."),
    )
    reset(page, ['%load_ext shiro_kernel\n%config Shiro.approval = "ask"', "a = 1", "keep = 0", "%shiro tidy up"])
    run_all(page)
    cell(page, 1).locator(".shiro-proposed-cell").wait_for(timeout=30_000)
    ghost = cell(page, 1).locator(".shiro-proposed-cell")
    ghost.locator(".shiro-review-note").fill("no new cells")
    ghost.locator(".shiro-review-reject").click()
    cell(page, 2).locator(".shiro-review-delete .shiro-review-reject").click()
    turn = final_turn(page, 3, "Leaving the notebook as it is.")
    assert sources(page)[1:3] == ["a = 1", "keep = 0"]
    assert last_results(lab) == [
        'Error: not applied — the user rejected this new cell (the user said: "no new cells"); the notebook is '
        "unchanged. Ask before trying something else.",
        "Error: not applied — the user rejected this deletion of cell 2; the notebook is unchanged. Ask before "
        "trying something else.",
    ]
    rows = turn.locator("details.shiro-change summary").all_inner_texts()
    assert rows == ["✗ insert after cell 1: +1 −0 · rejected", "✗ delete of cell 2: +0 −1 · rejected"], rows


def test_a_stop_after_one_accept_keeps_it_and_says_exactly_what_went_in(agent: Any, lab: Lab) -> None:
    """The user accepts the insert of a step that also deletes, then presses Stop: the insert stays, the
    delete goes away undecided, and the saved rows and what the model is told say exactly that."""
    page = agent
    lab.fake.enqueue(
        Reply(tool_calls=[READ]),
        Reply(
            text="One new cell, one stale cell gone.",
            tool_calls=TIDY,
        ),
    )
    reset(page, ['%load_ext shiro_kernel\n%config Shiro.approval = "ask"', "a = 1", "stale = 0", "%shiro tidy up"])
    before = len(lab.fake.requests)
    run_all(page)
    ghost = cell(page, 1).locator(".shiro-proposed-cell")
    ghost.wait_for(timeout=30_000)
    ghost.locator(".shiro-review-accept").click()
    cell(page, 3).locator(".shiro-review-delete").wait_for(timeout=10_000)  # the stale cell, below the new one
    page.locator(".jupyter-widgets button:has-text('Stop')").first.click()
    turn = final_turn(page, 4, "One new cell, one stale cell gone.")
    page.locator(".shiro-review").first.wait_for(state="detached", timeout=10_000)
    assert sources(page)[1:4] == ["a = 1", "b = a + 1", "stale = 0"]
    rows = turn.locator("details.shiro-change summary").all_inner_texts()
    assert rows == ["✓ inserted cell 2: +1 −0", "✗ delete of cell 2: +0 −1 · stopped"], rows
    told = kernel_print(
        page,
        "__import__('json').dumps([p.output for m in get_ipython().magics_manager.registry['ShiroMagics'].agent"
        ".current.session.messages for p in m.tool_results()][-2:])",
    )
    assert json.loads(told) == [
        "Inserted cell 2 (the user accepted it).",
        "Error: not applied — the user stopped the turn before deciding on this deletion of cell 2; the notebook "
        "is unchanged there",
    ]
    assert len(lab.fake.requests) == before + 2  # no model call after the Stop
    shot(page, "cells-agent-stop-after-accept")


def test_an_accepted_edit_is_one_undo_step_in_the_cells_editor(agent: Any, lab: Lab) -> None:
    page = agent
    lab.fake.enqueue(
        Reply(tool_calls=[READ]),
        Reply(tool_calls=[Call("notebook_edit", {"cell": 1, "source": "rate = 0.2\ntotal = 100 * (1 + rate)"})]),
        Reply(text="Done."),
    )
    reset(
        page, ['%load_ext shiro_kernel\n%config Shiro.approval = "ask"', "rate = 0.1\ntotal = 100 * rate", "%shiro fix"]
    )
    run_all(page)
    box = cell(page, 1).locator(".shiro-review-edit")
    box.wait_for(timeout=30_000)
    box.locator(".shiro-review-accept").click()
    final_turn(page, 2, "Done.")
    assert sources(page)[1] == "rate = 0.2\ntotal = 100 * (1 + rate)"
    # the user's Ctrl+Z in the cell takes the agent's whole edit back, in one step
    cell(page, 1).locator(".cm-content").click()
    page.keyboard.press("Control+z")
    assert sources(page)[1] == "rate = 0.1\ntotal = 100 * rate"
    page.keyboard.press("Control+Shift+z")
    assert sources(page)[1] == "rate = 0.2\ntotal = 100 * (1 + rate)"
    blur(page)


def test_a_blocking_wait_turn_is_refused_in_one_sentence_and_finishes(lab: Lab, page: Any) -> None:
    """--wait holds the kernel's thread, and JupyterLab hands comm messages to the kernel only between cells:
    the cell tools refuse at once (before the front end's hello arrived, and after), never wait."""
    answer = "Set `x = 2` in cell 1 yourself; I cannot edit while --wait blocks the kernel."
    steps = [Reply(tool_calls=[READ]), Reply(tool_calls=[Call("notebook_edit", {"cell": 1, "source": "x = 2"})])]
    lab.fake.enqueue(*steps, Reply(text=answer))
    write_notebook(
        lab.root / "wait.ipynb",
        ['%load_ext shiro_kernel\n%config Shiro.approval = "ask"', "x = 1", "%shiro --wait set x to 2"],
    )
    open_notebook(page, lab, "wait.ipynb")

    def turn_told() -> list[str]:
        started = time.monotonic()
        turn = final_turn(page, 2, "Set x = 2 in cell 1 yourself")
        took = time.monotonic() - started
        assert took < 20, took  # no wait for a reply that cannot arrive (a read would wait 10 s, a review far longer)
        assert page.locator(".shiro-review").count() == 0 and sources(page)[1] == "x = 1"
        body = lab.fake.requests[-1].body["input"]
        read, edit = [i["output"] for i in body if i.get("type") == "function_call_output"][-2:]
        # the read fell back to the file, saying so
        assert read.startswith("wait.ipynb as saved on disk (3 cells; unsaved edits are not included)"), read
        assert turn.locator("div.shiro-tool-error").inner_text().startswith(f"↳ {edit[:100]}")
        return [edit]

    # Run All: the front end's hello to %load_ext's comm is queued behind the --wait cell
    run_all(page)
    assert turn_told() == [f"Error: {UNANSWERED_BLOCKED}"]
    shot(page, "cells-wait-refused")
    # the kernel is free at once, and has the hello now; run again, the turn is refused as blocked
    assert kernel_print(page, "x").strip() == "1"
    lab.fake.enqueue(*steps, Reply(text=answer + " Again."))
    page.evaluate("window.jupyterapp.shell.currentWidget.content.activeCellIndex = 2")
    page.evaluate("window.jupyterapp.commands.execute('notebook:run-cell')")
    cell(page, 2).locator(".jp-RenderedShiroTurn", has_text="Again.").wait_for(timeout=30_000)
    assert turn_told() == [f"Error: {BLOCKED}"]


NUMBERS_ANSWER = (
    "📈 The mean is **2.0**, up 16.4 % on [last year 1,234](https://example.com/y 'about 5,555'); "
    'the ratio `0.1314` <b onclick="alert(1)">bold?</b>'
)


def _numbers() -> list[dict[str, Any]]:
    def at(text: str, found: bool, call_id: str | None, line: str | None) -> dict[str, Any]:
        start = NUMBERS_ANSWER.index(text)  # Python offsets: code points, as the kernel writes them
        return {
            "text": text,
            "found": found,
            "call_id": call_id,
            "start": start,
            "end": start + len(text),
            "line": line,
        }

    return [
        at("2.0", True, "call_a", "mean <b>2.0</b>"),
        at("16.4 %", False, None, None),
        at("1,234", True, "call_a", "count 1,234"),
        at("5,555", False, None, None),
        at("0.1314", False, None, None),
    ]


def test_saved_numbers_are_marked_after_sanitizing_and_the_footer_counts_them(lab: Lab, page: Any) -> None:
    bundle = {
        "version": 1,
        "entries": [
            {"type": "text", "text": "Computing 9.99 first."},
            {
                "type": "tool",
                "callId": "call_a",
                "name": "python",
                "args": "df.x.mean()",
                "status": "ok",
                "output": "mean 2.0\ncount 1,234",
                "code": "df.x.mean()",
                "outputs": [],
            },
            {"type": "text", "text": NUMBERS_ANSWER},
        ],
        "numbers": _numbers(),
        "usage": {"inputTokens": 3856, "cachedInputTokens": 3712, "outputTokens": 1, "costUsd": 0.0003},
        "end": {"reason": "answered", "error": None},
    }
    nb = new_notebook(
        cells=[
            new_code_cell(
                "%shiro what is the mean?",
                outputs=[new_output("display_data", data={TURN_MIME: bundle, "text/plain": "the turn"})],
            )
        ]
    )
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nbformat.write(nb, lab.root / "numbers.ipynb")
    open_notebook(page, lab, "numbers.ipynb")
    turn = cell(page, 0).locator(".jp-RenderedShiroTurn")
    turn.locator(".shiro-number-missing").first.wait_for(timeout=30_000)
    answer = turn.locator(".shiro-text").nth(1)
    missing = answer.locator(".shiro-number-missing")
    assert missing.all_inner_texts() == ["16.4 %⚠", "0.1314⚠"]  # 5,555 is in a link's title: counted, not marked
    assert {missing.nth(i).get_attribute("title") for i in range(2)} == {"not found in this turn's outputs"}
    assert answer.locator("code .shiro-number-missing").inner_text() == "0.1314⚠"
    found = answer.locator("a.shiro-number")
    assert found.inner_text() == "2.0" and found.get_attribute("title") == "from call 1 (python): mean <b>2.0</b>"
    assert found.get_attribute("href") == "#shiro-call-call_a"
    assert answer.locator("strong a.shiro-number").count() == 1  # the Markdown's bold kept around the mark
    in_link = answer.locator("a[href='https://example.com/y'] span.shiro-number")  # no link inside a link
    assert in_link.inner_text() == "1,234" and in_link.get_attribute("title") == "from call 1 (python): count 1,234"
    assert answer.locator("a[href='https://example.com/y']").get_attribute("title") == "about 5,555"
    # the model's HTML went through JupyterLab's sanitizer: harmless markup kept, its handler gone
    assert answer.locator("b").inner_text() == "bold?" and answer.locator("[onclick]").count() == 0
    html = answer.evaluate("e => e.innerHTML")
    assert not any(0xE000 <= ord(ch) < 0xF900 for ch in html), html  # no mark left over
    assert turn.locator(".shiro-number, .shiro-number-missing").count() == 4  # the first text is not the answer
    foot = turn.locator(".shiro-footer").inner_text()
    assert foot == "⚠ 3 numbers not found in this turn's outputs · 3,856 in (3,712 cached) · 1 out tokens · $0.0003"
    # following a found number opens its tool row, and JupyterLab's page does not navigate
    row = turn.locator("details.shiro-tool", has_text="df.x.mean()")
    assert row.get_attribute("open") is None
    found.click()
    assert row.get_attribute("open") == ""
    assert page.evaluate("location.hash") == ""
    shot(page, "cells-numbers-saved")
    assert not page.console_errors, page.console_errors


def test_a_live_turn_marks_its_numbers_and_shows_cached_input(agent: Any, lab: Lab) -> None:
    page = agent
    lab.fake.enqueue(
        Reply(
            text="Computing.", tool_calls=[Call("python", {"code": "sales = [1200, 1400]\nsum(sales) / len(sales)"})]
        ),
        Reply(text="The mean is **1,300**, up 16.4 % on last year."),
    )
    reset(page, ['%load_ext shiro_kernel\n%config Shiro.approval = "auto"', "%shiro what is the mean of the sales?"])
    run_all(page)
    turn = final_turn(page, 1, "up 16.4")
    turn.locator(".shiro-number-missing").wait_for(timeout=30_000)
    assert turn.locator(".shiro-number-missing").all_inner_texts() == ["16.4 %⚠"]
    found = turn.locator("a.shiro-number")
    assert found.inner_text() == "1,300" and found.get_attribute("title") == "from call 1 (python): 1300.0"
    foot = turn.locator(".shiro-footer").inner_text()
    assert re.match(
        r"⚠ 1 number not found in this turn's outputs · [\d,]+ in \([\d,]+ cached\) · [\d,]+ out tokens", foot
    ), foot
    shot(page, "cells-numbers-live")
