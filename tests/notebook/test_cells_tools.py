"""The cell tools on the kernel side (issue 25): real turns (the in-process shell with the extension, the fake
OpenAI server, the real SDK) against a stand-in for the labextension's end of the channel (tests/frontend.py,
which answers as docs/notebook-protocol.md says). What the model is told, what the front end is asked, and
what the saved turn shows; the real front end is tested in Chromium."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from fakeopenai import Call, Reply
from frontend import Cell, FrontEnd
from IPython.utils.capture import capture_output

from shiro_kernel import notebook
from shiro_kernel.approval import UNANSWERED_DENIAL
from shiro_kernel.notebook.channel import BLOCKED, CLOSED, NO_FRONT_END, STOPPED, Channel


def run(shell: Any, source: str) -> str:
    with capture_output() as cap:
        shell.run_cell(source)
    return cap.stdout + cap.stderr + "".join(o.data.get("text/plain", "") for o in cap.outputs)


def told(fake: Any) -> list[str]:
    """The results of the newest step's calls, as the model read them (the last block of outputs)."""
    out: list[str] = []
    for item in fake.requests[-1].body["input"]:
        if item.get("type") == "function_call_output":
            out.append(item["output"])
        elif out:  # a call (or a reference to one): the outputs before it were an earlier step's
            out = []
    return out


def bundle_of(shell: Any, source: str) -> dict[str, Any]:
    with capture_output() as cap:
        shell.run_cell(source)
    return next(
        o.data["application/vnd.shiro.turn+json"] for o in cap.outputs if "application/vnd.shiro.turn+json" in o.data
    )


@pytest.fixture
def front(shiro_shell: Any) -> FrontEnd:
    fe = FrontEnd(
        cells=[
            Cell("import pandas as pd", id="c1"),
            Cell("df = pd.read_csv('sales.csv', parse_dates=['date'])", id="c2"),
            Cell("df.groupby('month').sum()", id="c3"),
        ],
        run_in=shiro_shell,
    )
    notebook.attach(shiro_shell, Channel(fe))
    yield fe
    notebook.detach(shiro_shell)


READ = Call("notebook_read", {"cells": None, "images": None})
FIX = "df = pd.read_csv('sales.csv', parse_dates=['date'], dayfirst=True)"


def test_without_a_front_end_the_cell_tools_say_so_in_one_sentence(shiro_shell, fake_openai):
    fake_openai.enqueue(
        Reply(tool_calls=[Call("notebook_edit", {"cell": 1, "source": FIX}), Call("notebook_run", {"cells": [1]})]),
        Reply(text="I'll show the code instead."),
    )
    run(shiro_shell, '%config Shiro.approval = "auto"')
    run(shiro_shell, "%shiro fix the date parsing in cell 1")
    assert told(fake_openai) == [f"Error: {NO_FRONT_END}"] * 2


def test_an_edit_is_reviewed_in_the_notebook_and_accepted(shiro_shell, fake_openai, front):
    front.answers = ["accepted"]
    fake_openai.enqueue(
        Reply(tool_calls=[READ]),
        Reply(tool_calls=[Call("notebook_edit", {"cell": 1, "source": FIX})]),
        Reply(text="Fixed cell 1."),
    )
    bundle = bundle_of(shiro_shell, "%shiro fix the date parsing in cell 1")
    read = json.loads(json.dumps(fake_openai.requests[1].body))["input"][-1]["output"]
    assert read.startswith("the notebook live in the notebook (3 cells):")
    assert "[1] code (not run) id=c2" in read
    review = next(r for r in front.requests if r.get("op") == "review")
    assert review["review"] is True  # approval "ask": shown for Accept / Reject, not applied
    assert review["changes"] == [
        {"kind": "edit", "id": "c2", "expect": "df = pd.read_csv('sales.csv', parse_dates=['date'])", "source": FIX}
    ]
    assert front.cells[1].source == FIX
    assert told(fake_openai) == ["Edited cell 1: +1 −1 lines (the user accepted it)."]
    row = next(e for e in bundle["entries"] if e.get("name") == "notebook_edit")
    assert {k: row["change"][k] for k in ("kind", "cell", "added", "removed", "status")} == {
        "kind": "edit",
        "cell": 1,
        "added": 1,
        "removed": 1,
        "status": "accepted",
    }
    assert "+df = pd.read_csv('sales.csv', parse_dates=['date'], dayfirst=True)" in row["change"]["diff"]


def test_a_change_renders_as_a_compact_row_that_expands_to_its_diff() -> None:
    from shiro_kernel.events import ToolEnd, ToolStart
    from shiro_kernel.transcript import ToolCallPart, ToolResultPart
    from shiro_kernel.ui.render import TurnLog, to_html, to_markdown, to_text

    log = TurnLog()
    for n, status in enumerate(("accepted", "rejected")):
        call = ToolCallPart(f"c{n}", "notebook_edit", "{}")
        change = {"kind": "edit", "cell": 3, "added": 2, "removed": 1, "diff": "-a <b>\n+c\n+d", "status": status}
        log.feed(ToolStart(call))
        log.feed(ToolEnd(call, ToolResultPart(call.call_id, call.name, "x", meta={"change": change}), 0.1))
    html, md, text = to_html(log), to_markdown(log), to_text(log)
    assert "<summary><code>✓ edited cell 3: +2 −1</code></summary>" in html
    assert '<span style="color:#b31d28">-a &lt;b&gt;</span>' in html and "<b>" not in html  # the diff is text
    assert "`✓ edited cell 3: +2 −1`" in md and "`✗ edit of cell 3: +2 −1 · rejected`" in md
    assert "✓ edited cell 3: +2 −1\n" in text + "\n"


def test_the_change_rows_say_what_the_labextensions_rows_say() -> None:
    """The kernel's renderings (widgets, HTML, Markdown, text) and the labextension's (format.ts changeLine,
    checked in Chromium) word a change the same way, an insert not made by where it was to go."""
    from shiro_kernel.ui.render import change_line

    def row(kind: str, cell: int, status: str, added: int = 1, removed: int = 0) -> str:
        return change_line({"kind": kind, "cell": cell, "added": added, "removed": removed, "status": status})

    assert row("insert", 4, "applied") == "✓ inserted cell 4: +1 −0"
    assert row("delete", 1, "rejected", 0, 1) == "✗ delete of cell 1: +0 −1 · rejected"
    assert row("insert", 1, "rejected") == "✗ insert after cell 1: +1 −0 · rejected"
    assert row("insert", -1, "conflict") == "✗ insert at the top: +1 −0 · conflict"
    assert row("insert", -2, "rejected") == "✗ insert below this cell: +1 −0 · rejected"


def test_a_rejected_edit_leaves_the_cell_and_the_model_is_told(shiro_shell, fake_openai, front):
    front.answers = ["rejected"]
    fake_openai.enqueue(
        Reply(tool_calls=[READ]),
        Reply(tool_calls=[Call("notebook_edit", {"cell": 1, "source": FIX})]),
        Reply(text="ok"),
    )
    run(shiro_shell, "%shiro fix cell 1")
    assert front.cells[1].source == "df = pd.read_csv('sales.csv', parse_dates=['date'])"
    assert told(fake_openai) == [
        "Error: not applied — the user rejected this edit of cell 1; the notebook is unchanged. Ask before trying "
        "something else."
    ]


def test_an_edit_of_a_cell_the_user_changed_after_the_read_is_refused(shiro_shell, fake_openai, front):
    def user_types_first(fe: FrontEnd) -> str:
        fe.cells[1].source += "  # mine"
        return "accepted"

    front.answers = [user_types_first]
    fake_openai.enqueue(
        Reply(tool_calls=[READ]),
        Reply(tool_calls=[Call("notebook_edit", {"cell": 1, "source": FIX})]),
        Reply(text="ok"),
    )
    run(shiro_shell, "%shiro fix cell 1")
    assert front.cells[1].source.endswith("  # mine")  # the user's typing is kept
    assert told(fake_openai) == [
        "Error: not applied — cell 1 changed since you read it (the user edited it); read it again with "
        "notebook_read, then change it"
    ]


def test_a_cell_the_user_is_typing_in_is_never_overwritten(shiro_shell, fake_openai, front):
    front.answers = ["accepted"]
    front.editing = "c2"
    fake_openai.enqueue(
        Reply(tool_calls=[READ]),
        Reply(tool_calls=[Call("notebook_edit", {"cell": 1, "source": FIX})]),
        Reply(text="ok"),
    )
    run(shiro_shell, "%shiro fix cell 1")
    assert "(the user is typing in it)" in fake_openai.requests[1].body["input"][-1]["output"]
    assert told(fake_openai)[0].startswith("Error: not applied — the user is typing in cell 1")
    assert front.cells[1].source != FIX


def test_a_step_with_several_changes_is_one_review_and_each_call_its_answer(shiro_shell, fake_openai, front):
    front.answers = ["accepted", "rejected", "accepted"]
    fake_openai.enqueue(
        Reply(tool_calls=[READ]),
        Reply(
            tool_calls=[
                Call("notebook_edit", {"cell": 1, "source": FIX}),
                Call("notebook_insert", {"after": 1, "source": "df.info()", "cell_type": None}),
                Call("notebook_delete", {"cell": 2}),
            ]
        ),
        Reply(text="done"),
    )
    run(shiro_shell, "%shiro tidy up")
    reviews = [r for r in front.requests if r.get("op") == "review"]
    assert len(reviews) == 1 and [c["kind"] for c in reviews[0]["changes"]] == ["edit", "insert", "delete"]
    assert [c.source for c in front.cells] == ["import pandas as pd", FIX, "df.groupby('month').sum()"][:2]
    out = told(fake_openai)
    assert out[0] == "Edited cell 1: +1 −1 lines (the user accepted it)."
    assert out[1].startswith("Error: not applied — the user rejected this new cell")
    assert out[2] == "Deleted cell 2 (the user accepted it)."


def test_auto_applies_at_once_and_read_only_refuses_without_asking(shiro_shell, fake_openai, front):
    run(shiro_shell, '%config Shiro.approval = "auto"')
    fake_openai.enqueue(
        Reply(tool_calls=[READ]),
        Reply(tool_calls=[Call("notebook_edit", {"cell": 0, "source": "import numpy as np"})]),
        Reply(text="ok"),
    )
    run(shiro_shell, "%shiro use numpy")
    review = next(r for r in front.requests if r.get("op") == "review")
    assert review["review"] is False and front.cells[0].source == "import numpy as np"
    assert told(fake_openai) == ["Edited cell 0: +1 −1 lines."]
    run(shiro_shell, '%config Shiro.approval = "read-only"')
    front.requests.clear()
    fake_openai.enqueue(Reply(tool_calls=[Call("notebook_delete", {"cell": 0})]), Reply(text="ok"))
    run(shiro_shell, "%shiro delete cell 0")
    assert not [r for r in front.requests if r.get("op") == "review"]
    assert told(fake_openai)[0].startswith('Error: not approved — Shiro.approval is "read-only", so notebook_delete')


def test_notebook_run_runs_cells_in_the_front_end_and_returns_their_outputs(shiro_shell, fake_openai, front):
    front.cells[0].source = "x = 21"
    front.cells.append(Cell("x * 2", id="c4"))
    run(shiro_shell, '%config Shiro.approval = "auto"')
    fake_openai.enqueue(
        Reply(tool_calls=[READ]), Reply(tool_calls=[Call("notebook_run", {"cells": [0, 3]})]), Reply(text="42")
    )
    run(shiro_shell, "%shiro run cells 0 and 3")
    ran = next(r for r in front.requests if r.get("op") == "run")
    assert ran["ids"] == ["c1", "c4"]
    assert told(fake_openai) == ["[0] ok (execution 1)\n(no output)\n\n[3] ok (execution 1)\n42"]
    assert front.cells[3].outputs == [{"output_type": "execute_result", "data": {"text/plain": "42"}}]


def test_an_edit_before_any_read_asks_for_one(shiro_shell, fake_openai, front):
    fake_openai.enqueue(Reply(tool_calls=[Call("notebook_edit", {"cell": 1, "source": FIX})]), Reply(text="ok"))
    run(shiro_shell, "%shiro fix cell 1")
    assert told(fake_openai) == [
        "Error: read the notebook with notebook_read first: changes name cells by the index it shows"
    ]


def test_propose_cell_inserts_below_the_asking_cell(shiro_shell, fake_openai, front):
    front.answers = ["accepted"]
    fake_openai.enqueue(Reply(tool_calls=[Call("propose_cell", {"code": "df.describe()"})]), Reply(text="ok"))
    with capture_output():  # the %shiro line runs in cell c2 (JupyterLab sends its id with the request)
        shiro_shell.run_cell("%shiro give me a summary cell", cell_id="c2")
    insert = next(r for r in front.requests if r.get("op") == "review")["changes"][0]
    assert insert == {"kind": "insert", "after": "c2", "source": "df.describe()", "cell_type": "code"}
    assert [c.source for c in front.cells][2] == "df.describe()"
    assert told(fake_openai)[0].startswith("Inserted cell 2 (the user accepted it). It has not been run")


def test_a_blocking_turn_is_refused_in_one_sentence_never_deadlocks(shiro_shell, fake_openai):
    fe = FrontEnd(cells=[Cell("x = 1", id="c1")], replies_on_main_thread=True)
    notebook.attach(shiro_shell, Channel(fe))
    try:
        live = notebook.live_notebook(shiro_shell)
        live.channel.open(None)
        live.remember([{"id": "c1", "source": "x = 1"}])
        fake_openai.enqueue(Reply(tool_calls=[Call("notebook_edit", {"cell": 0, "source": "x = 2"})]), Reply(text="ok"))
        done = threading.Event()

        def turn() -> None:  # a blocking (--wait) turn runs its tools on the kernel's thread: this one
            run(shiro_shell, "%shiro --wait set x to 2")
            done.set()

        turn()
        assert done.is_set()
        assert told(fake_openai) == [f"Error: {BLOCKED}"]
        assert not [r for r in fe.requests if r.get("op") == "review"]
    finally:
        notebook.detach(shiro_shell)


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_the_requests_carrying_the_cell_tools_validate_against_the_openapi_spec(shiro_shell, fake_openai, front, api):
    """Every request of a turn that reads, edits, inserts, deletes and runs cells (the tools' JSON Schema and
    their calls and results on the wire) is checked by the fake against OpenAI's OpenAPI spec, on both APIs."""
    run(shiro_shell, f'%config Shiro.api = "{api}"')
    run(shiro_shell, '%config Shiro.approval = "auto"')
    fake_openai.enqueue(
        Reply(tool_calls=[READ]),
        Reply(
            tool_calls=[
                Call("notebook_edit", {"cell": 0, "source": "import numpy as np"}),
                Call("notebook_insert", {"after": 2, "source": "# done", "cell_type": "markdown"}),
                Call("notebook_delete", {"cell": 1}),
            ]
        ),
        Reply(tool_calls=[Call("notebook_run", {"cells": [0]})]),
        Reply(text="ok"),
    )
    run(shiro_shell, "%shiro tidy the notebook")
    assert fake_openai.validate and fake_openai.validation_errors == []
    assert len(fake_openai.requests) == 4
    body = fake_openai.requests[0].body
    names = {t.get("name") or t.get("function", {}).get("name") for t in body["tools"]}
    assert {"notebook_read", "notebook_edit", "notebook_insert", "notebook_delete", "notebook_run"} <= names
    assert [c.source for c in front.cells] == ["import numpy as np", "df.groupby('month').sum()", "# done"]


def test_a_notebook_closed_during_a_review_answers_at_once_and_the_next_turn_reopens(shiro_shell, fake_openai, front):
    """The user closes the notebook's tab while an edit waits for review: the front end closes the comm, the
    call is answered at once (not after Shiro.approval_timeout_s), and the next turn opens the channel again
    and reads the live document."""
    front.answers = [lambda fe: (threading.Timer(0.3, fe.panel_closed).start(), None)[1]]
    fake_openai.enqueue(
        Reply(tool_calls=[READ]), Reply(tool_calls=[Call("notebook_edit", {"cell": 0, "source": "x"})]), Reply("ok")
    )
    run(shiro_shell, "%shiro edit it")
    assert told(fake_openai) == [f"Error: {CLOSED}"] and front.cells[0].source == "import pandas as pd"
    assert front.opened == 1
    fake_openai.enqueue(Reply(tool_calls=[READ]), Reply("read"))
    run(shiro_shell, "%shiro read it again")
    assert front.opened == 2 and "import pandas as pd" in told(fake_openai)[0]


def test_after_a_page_reload_a_review_nobody_answers_ends_and_the_next_turn_reopens(shiro_shell, fake_openai, front):
    """A reload closes nothing: the old comm just never answers. The review ends at Shiro.approval_timeout_s,
    and the next turn opens the channel again, which the reloaded page answers."""
    run(shiro_shell, "%config Shiro.approval_timeout_s = 0.5")
    front.answers = [lambda fe: (fe.page_reloaded(), None)[1]]
    fake_openai.enqueue(
        Reply(tool_calls=[READ]), Reply(tool_calls=[Call("notebook_edit", {"cell": 0, "source": "x"})]), Reply("ok")
    )
    run(shiro_shell, "%shiro edit it")
    assert told(fake_openai)[0].startswith("Error: ") and front.cells[0].source == "import pandas as pd"
    fake_openai.enqueue(Reply(tool_calls=[READ]), Reply("read"))
    run(shiro_shell, "%shiro read it again")
    assert front.opened == 2 and "import pandas as pd" in told(fake_openai)[0]


def test_a_review_nobody_answers_is_a_refusal_and_no_other_is_put_that_turn(shiro_shell, fake_openai, front):
    """A review left unanswered for Shiro.approval_timeout_s (the user is away) is told to the model as an
    approval nobody answered (do not retry); the turn's next change is refused without asking, so the turn and
    the queue move on; the next turn asks again."""
    run(shiro_shell, "%config Shiro.approval_timeout_s = 0.3")
    front.answers = [lambda fe: None]
    edit = Call("notebook_edit", {"cell": 0, "source": "import numpy as np"})
    fake_openai.enqueue(Reply(tool_calls=[READ]), Reply(tool_calls=[edit]), Reply(tool_calls=[edit]), Reply("ok"))
    run(shiro_shell, "%shiro use numpy")
    unanswered = UNANSWERED_DENIAL.format(name="notebook_edit", seconds=0.3)
    assert told(fake_openai) == [unanswered]  # the second edit: refused as the first was, and not put
    assert [r["op"] for r in front.requests if r.get("type") == "request"] == ["read", "review"]
    assert front.cells[0].source == "import pandas as pd"
    front.answers = ["accepted"]
    fake_openai.enqueue(Reply(tool_calls=[READ]), Reply(tool_calls=[edit]), Reply("ok"))
    run(shiro_shell, "%shiro use numpy now")
    assert front.cells[0].source == "import numpy as np"


def test_a_stop_during_a_review_says_what_an_accept_before_it_left(shiro_shell, fake_openai, front):
    """Stop while a review waits, with a front end that does not say what was decided (an older one): the
    call's result does not claim nothing changed (a change accepted before the stop is applied at its
    Accept); it tells the model to read the notebook again."""
    front.withdraws = False
    agent = shiro_shell.magics_manager.registry["ShiroMagics"].agent
    front.answers = [lambda fe: (threading.Timer(0.3, agent.abort.set).start(), None)[1]]
    fake_openai.enqueue(
        Reply(tool_calls=[READ]), Reply(tool_calls=[Call("notebook_edit", {"cell": 0, "source": "x"})]), Reply("ok")
    )
    run(shiro_shell, "%shiro edit it")
    results = [p.output for m in agent.current.session.messages for p in m.tool_results() if p.name == "notebook_edit"]
    assert results == [f"Error: {STOPPED['review']}"]


TIDY = [
    Call("notebook_edit", {"cell": 1, "source": FIX}),
    Call("notebook_delete", {"cell": 2}),
]


def rows_of(bundle: dict[str, Any]) -> list[tuple[str, str]]:
    return [(e["change"]["kind"], e["change"]["status"]) for e in bundle["entries"] if e.get("change")]


def test_a_stop_after_one_accept_says_exactly_what_went_in(shiro_shell, fake_openai, front):
    """Stop after the user accepted the first of two changes: the front end answers the cancel with what was
    decided, so the model and the saved rows say the edit is in and the delete is not (nothing vague)."""
    agent = shiro_shell.magics_manager.registry["ShiroMagics"].agent
    front.answers = ["accepted", lambda fe: (threading.Timer(0.3, agent.abort.set).start(), None)[1]]
    fake_openai.enqueue(Reply(tool_calls=[READ]), Reply(tool_calls=TIDY), Reply("ok"))
    bundle = bundle_of(shiro_shell, "%shiro tidy up")
    assert [c.source for c in front.cells] == ["import pandas as pd", FIX, "df.groupby('month').sum()"]
    results = [p.output for m in agent.current.session.messages for p in m.tool_results()][1:]
    assert results == [
        "Edited cell 1: +1 −1 lines (the user accepted it).",
        "Error: not applied — the user stopped the turn before deciding on this deletion of cell 2; the notebook "
        "is unchanged there",
    ]
    assert rows_of(bundle) == [("edit", "accepted"), ("delete", "stopped")]
    assert next(r for r in front.requests if r["type"] == "cancel")["id"] == 2  # the review's request


def test_a_review_half_answered_when_the_time_is_up_keeps_the_answered_half(shiro_shell, fake_openai, front):
    """The user accepted one change and went away: at Shiro.approval_timeout_s the accepted edit is told as
    accepted, the other as an approval nobody answered; the front end answered, so it stays attached."""
    run(shiro_shell, "%config Shiro.approval_timeout_s = 0.4")
    front.answers = ["accepted", lambda fe: None]
    fake_openai.enqueue(Reply(tool_calls=[READ]), Reply(tool_calls=TIDY), Reply("ok"))
    bundle = bundle_of(shiro_shell, "%shiro tidy up")
    assert told(fake_openai) == [
        "Edited cell 1: +1 −1 lines (the user accepted it).",
        UNANSWERED_DENIAL.format(name="notebook_delete", seconds=0.4),
    ]
    assert rows_of(bundle) == [("edit", "accepted"), ("delete", "unanswered")]
    fake_openai.enqueue(Reply(tool_calls=[READ]), Reply("read"))
    run(shiro_shell, "%shiro read it")
    assert front.opened == 1 and FIX in told(fake_openai)[0]  # no new comm was needed


def test_a_stop_after_the_user_accepted_a_later_change_tells_it_as_accepted(shiro_shell, fake_openai, front):
    """The user accepted the second change of a step and then stopped the turn: the second call (which the
    turn no longer runs after a Stop) is still told and recorded as accepted, the first as not applied."""
    agent = shiro_shell.magics_manager.registry["ShiroMagics"].agent
    front.answers = ["later", lambda fe: (threading.Timer(0.3, agent.abort.set).start(), "accepted")[1]]
    fake_openai.enqueue(Reply(tool_calls=[READ]), Reply(tool_calls=TIDY), Reply("ok"))
    bundle = bundle_of(shiro_shell, "%shiro tidy up")
    assert [c.source for c in front.cells] == [
        "import pandas as pd",
        "df = pd.read_csv('sales.csv', parse_dates=['date'])",
    ]
    results = [p.output for m in agent.current.session.messages for p in m.tool_results()][1:]
    assert results == [
        "Error: not applied — the user stopped the turn before deciding on this edit of cell 1; the notebook is "
        "unchanged there",
        "Deleted cell 2 (the user accepted it).",
    ]
    assert rows_of(bundle) == [("edit", "stopped"), ("delete", "accepted")]
