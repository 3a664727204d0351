"""The cell tools headless (issue 25): a notebook run by nbclient has no front end that can edit it, so
``notebook_edit``, ``notebook_insert``, ``notebook_delete`` and ``notebook_run`` each answer the model the one
sentence saying so, ``notebook_read`` reads the file on disk and says it did, nothing blocks, the turn ends
with the model's answer, and the saved notebook keeps its cells as they were."""

from __future__ import annotations

import json
import time
from typing import Any

from fakeopenai import Call, Reply
from kernelutil import NOTEBOOK_KEY as KEY
from kernelutil import run_notebook

from shiro_kernel.notebook.channel import UNANSWERED_BLOCKED

TURN = "application/vnd.shiro.turn+json"


def results(body: dict[str, Any]) -> list[str]:
    """The tool results one responses request carries, in order."""
    return [str(item["output"]) for item in body["input"] if item.get("type") == "function_call_output"]


def test_headless_cell_tools_refuse_in_one_sentence_and_the_turn_finishes(fake_openai, tmp_path):
    fake_openai.enqueue(
        Reply(text="Reading first.", tool_calls=[Call("notebook_read", {"cells": None, "images": None})]),
        Reply(
            text="Changing the notebook.",
            tool_calls=[
                Call("notebook_edit", {"cell": 1, "source": "x = 2"}),
                Call("notebook_insert", {"after": 1, "source": "y = x + 1", "cell_type": "code"}),
                Call("notebook_delete", {"cell": 1}),
                Call("notebook_run", {"cells": [1]}),
            ],
        ),
        Reply(text="I cannot edit this notebook here; set `x = 2` in cell 1 yourself."),
    )
    sources = ["%load_ext shiro_kernel\n%config Shiro.approval = 'auto'", "x = 1", "%shiro --wait set x to 2"]
    started = time.monotonic()
    nb = run_notebook(
        tmp_path / "headless.ipynb",
        sources,
        {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake_openai.base_url, "SHIRO_MODEL": "gpt-4o-mini"},
    )
    took = time.monotonic() - started

    assert len(fake_openai.requests) == 3
    read, changed = results(fake_openai.requests[1].body), results(fake_openai.requests[2].body)
    assert len(read) == 1 and "as saved on disk" in read[0] and "x = 1" in read[0], read
    assert changed[-4:] == [f"Error: {UNANSWERED_BLOCKED}"] * 4  # each call, the same one sentence
    assert took < 50, took  # nothing waited for a front end that is not there (a read waits 10 s, a review longer)

    # the turn ended with the model's answer; the document is as it was
    assert [c.source for c in nb.cells] == sources
    (bundle,) = [o["data"][TURN] for o in nb.cells[2].outputs if TURN in o.get("data", {})]
    assert bundle["end"]["reason"] == "answered"
    texts = [e["text"] for e in bundle["entries"] if e["type"] == "text"]
    assert texts[-1] == "I cannot edit this notebook here; set `x = 2` in cell 1 yourself."
    rows = [(e["name"], e["status"]) for e in bundle["entries"] if e["type"] == "tool"]
    assert rows == [
        ("notebook_read", "ok"),
        ("notebook_edit", "error"),
        ("notebook_insert", "error"),
        ("notebook_delete", "error"),
        ("notebook_run", "error"),
    ]
    assert all("change" not in e for e in bundle["entries"] if e["type"] == "tool")  # nothing was changed
    assert KEY not in json.dumps(nb)
    assert fake_openai.validation_errors == []


def test_headless_an_edit_before_any_read_says_nothing_can_edit_first(fake_openai, tmp_path):
    """Issue 32 #6: nbclient, an edit and a run before any read: the model is told that no front end can edit,
    not to read the notebook first (a read would not help it)."""
    fake_openai.enqueue(
        Reply(
            text="Editing.",
            tool_calls=[Call("notebook_edit", {"cell": 1, "source": "x = 2"}), Call("notebook_run", {"cells": [1]})],
        ),
        Reply(text="Set `x = 2` yourself."),
    )
    sources = ["%load_ext shiro_kernel\n%config Shiro.approval = 'auto'", "x = 1", "%shiro --wait set x to 2"]
    nb = run_notebook(
        tmp_path / "edit-first.ipynb",
        sources,
        {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake_openai.base_url, "SHIRO_MODEL": "gpt-4o-mini"},
    )
    assert results(fake_openai.requests[1].body) == [f"Error: {UNANSWERED_BLOCKED}"] * 2
    assert [c.source for c in nb.cells] == sources
