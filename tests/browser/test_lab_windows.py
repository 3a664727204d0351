"""Two windows on one notebook (issue 33 #3), in real JupyterLab and Chromium: two browser contexts (a second
browser, or a tab kept open) on the same notebook and kernel, without and with real-time collaboration
(jupyter-collaboration: both windows edit one shared document). Exactly one window serves each request of
the notebook channel — the one that ran the turn's ``%shiro`` cell — so a cell the agent runs runs once, an
insert lands once, and a review shows only in that window; the other window's document is not touched by it
(under real-time collaboration it shows the one change through the shared document)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from conftest import Lab, serve_lab  # tests/browser/conftest.py (its folder is on sys.path)
from fakeopenai import Call, FakeOpenAI, Reply
from faultlog import record
from labutil import kernel_print, open_notebook, run_cell_at, shot, sources, write_notebook

pytestmark = pytest.mark.timeout(240)

READ = Call("notebook_read", {"cells": None, "images": None})
CELLS = [
    "%load_ext shiro_kernel\n%config Shiro.approval = 'auto'",
    "runs = []",
    "runs.append(1)",
    "%shiro add a cell and run the one that appends",
    "%config Shiro.approval = 'ask'",
    "%shiro make cell 2 append 2",
]
APPEND_TWO = "runs.append(2)"


@pytest.fixture(scope="module")
def rtc_lab(lab_fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """A second JupyterLab server, with real-time collaboration on (jupyter-collaboration)."""
    import importlib.util

    if importlib.util.find_spec("jupyter_server_ydoc") is None:
        pytest.fail("real-time collaboration needs jupyter-collaboration (the test extra installs it)")
    with serve_lab(tmp_path_factory.mktemp("rtc"), lab_fake, rtc=True) as served:
        yield served


def window(browser: Any, lab: Lab, name: str) -> Any:
    """A browser context of its own (a second browser, as far as the server can tell) with ``name`` open."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.console_errors = errors
    open_notebook(page, lab, name)
    return page


def turn_text(page: Any, index: int, text: str) -> None:
    page.locator(".jp-Notebook .jp-Cell").nth(index).locator(".jp-RenderedShiroTurn").get_by_text(text).wait_for(
        timeout=60_000
    )


def index_of(page: Any, source: str) -> int:
    return sources(page).index(source)


def hello_order(page: Any) -> list[str]:
    """The client ids of the windows that said hello to the kernel's comm, in the order they did."""
    live = "__import__('shiro_kernel.notebook', fromlist=['live_notebook']).live_notebook(get_ipython())"
    return list(json.loads(kernel_print(page, f"__import__('json').dumps(list({live}.channel.hellos))")))


def client_of(page: Any) -> str:
    return str(page.evaluate("window.jupyterapp.shell.currentWidget.sessionContext.session.kernel.clientId"))


def two_windows_one_request_each(lab: Lab, browser: Any, name: str) -> dict[str, Any]:
    """Window A runs a turn that inserts a cell and runs one (approval auto); then window B runs a turn whose
    edit waits for review. What each window's document and the kernel show after each."""
    write_notebook(lab.root / name, CELLS)
    a = window(browser, lab, name)
    b = window(browser, lab, name)
    seen: dict[str, Any] = {}
    try:
        # both windows are open when %load_ext opens the comm: both hear it and say hello
        run_cell_at(a, 0)
        run_cell_at(a, 1)
        deadline = time.monotonic() + 20
        while len(hello_order(a)) < 2:
            assert time.monotonic() < deadline, hello_order(a)
            time.sleep(0.2)
        seen["hellos"] = hello_order(a)
        seen["clients"] = {"a": client_of(a), "b": client_of(b)}

        lab.fake.enqueue(
            Reply(tool_calls=[READ]),
            Reply(tool_calls=[Call("notebook_insert", {"after": 1, "source": "inserted = 1", "cell_type": "code"})]),
            Reply(tool_calls=[Call("notebook_run", {"cells": [3]})]),  # `runs.append(1)`, below the new cell
            Reply(text="Inserted a cell and ran the append."),
        )
        run_cell_at(a, 3)
        turn_text(a, 4, "Inserted a cell and ran the append.")
        b.wait_for_timeout(1000)  # what B would do with the requests it heard, it has done by now
        seen["runs"] = json.loads(kernel_print(a, "__import__('json').dumps(runs)"))
        seen["a after insert"], seen["b after insert"] = sources(a), sources(b)
        shot(a, f"windows-{name}-a-after-insert")
        shot(b, f"windows-{name}-b-after-insert")

        # window B asks for an edit under review: the review shows in B only
        lab.fake.enqueue(
            Reply(tool_calls=[READ]),
            Reply(tool_calls=[Call("notebook_edit", {"cell": index_of(b, "runs.append(1)"), "source": APPEND_TWO})]),
            Reply(text="Cell 2 appends 2 now."),
        )
        run_cell_at(b, index_of(b, CELLS[4]))
        run_cell_at(b, index_of(b, CELLS[5]))
        box = b.locator(".shiro-review-edit")
        box.wait_for(timeout=60_000)
        a.wait_for_timeout(1000)
        seen["reviews shown in a"] = a.locator(".shiro-review").count()
        shot(a, f"windows-{name}-a-during-review")
        shot(b, f"windows-{name}-b-during-review")
        box.locator(".shiro-review-accept").click()
        turn_text(b, index_of(b, CELLS[5]), "Cell 2 appends 2 now.")
        a.wait_for_timeout(1000)
        seen["a after edit"], seen["b after edit"] = sources(a), sources(b)
        seen["told"] = [
            i["output"] for i in lab.fake.requests[-1].body["input"] if i.get("type") == "function_call_output"
        ][-1]
        seen["errors"] = a.console_errors + b.console_errors
        shot(b, f"windows-{name}-b-end")
        shot(a, f"windows-{name}-a-end")
    finally:
        for page in (a, b):
            page.context.close()
    return seen


def test_two_browser_windows_on_one_notebook_one_serves_each_request(lab: Lab, browser: Any) -> None:
    """No real-time collaboration: each window holds its own copy of the document. A's turn inserts into A's
    document only and runs the cell once; B's review shows in B only, and its accepted edit lands in B's."""
    seen = two_windows_one_request_each(lab, browser, "windows.ipynb")
    assert sorted(seen["hellos"]) == sorted(seen["clients"].values()), seen  # both windows said hello
    assert seen["runs"] == [1], seen  # once, not once per window
    assert seen["a after insert"].count("inserted = 1") == 1 and "inserted = 1" not in seen["b after insert"], seen
    assert seen["reviews shown in a"] == 0, seen
    assert APPEND_TWO in seen["b after edit"] and APPEND_TWO not in seen["a after edit"], seen
    assert seen["told"] == "Edited cell 2: +1 −1 lines (the user accepted it).", seen
    assert not seen["errors"], seen["errors"]
    record(
        "two browser windows on one notebook (JupyterLab, Chromium): a turn's insert, run and review",
        3,
        len(seen["runs"]) - 1 + int("inserted = 1" in seen["b after insert"]) + seen["reviews shown in a"],
        "the window that ran the %shiro cell served each request: the cell ran once, the insert landed in its "
        "document only, the review showed only there",
    )


def test_real_time_collaboration_lands_each_change_once_in_the_shared_document(rtc_lab: Lab, browser: Any) -> None:
    """jupyter-collaboration: both windows edit one shared document. A's insert is in it once (both windows
    show it), the cell runs once; B's review shows in B only, and the accepted edit shows in both."""
    seen = two_windows_one_request_each(rtc_lab, browser, "shared.ipynb")
    assert sorted(seen["hellos"]) == sorted(seen["clients"].values()), seen
    assert seen["runs"] == [1], seen
    assert seen["a after insert"] == seen["b after insert"], seen  # one shared document
    assert seen["a after insert"].count("inserted = 1") == 1, seen
    assert seen["reviews shown in a"] == 0, seen
    assert seen["a after edit"] == seen["b after edit"] and seen["b after edit"].count(APPEND_TWO) == 1, seen
    assert seen["told"] == "Edited cell 3: +1 −1 lines (the user accepted it).", seen
    assert not seen["errors"], seen["errors"]
    record(
        "real-time collaboration, two windows on one shared notebook (jupyter-collaboration, Chromium)",
        3,
        len(seen["runs"]) - 1 + seen["a after insert"].count("inserted = 1") - 1 + seen["reviews shown in a"],
        "each change landed once in the shared document, the cell ran once, the review showed in one window",
    )
