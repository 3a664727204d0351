"""What the notebook channel must never do, on the kernel side (issue 33 points 2, 3 and 11; issue 32 point 6):
start a turn inside a turn when the agent's notebook_run reaches a ``%shiro`` cell; let two windows on one
notebook both act on a request (or count a reply from the one not asked); save a row saying the notebook
changed on a front end's word alone; show a ``%shiro`` cell's output as a widget's repr; ask for a read where
nothing can edit at all. Real turns (the in-process shell, the fake OpenAI server, the real SDK) against the
front end stand-in (tests/frontend.py); the real front end is tested in Chromium
(tests/browser/test_lab_windows.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from fakeopenai import Call, Fault, Reply
from faultlog import record
from frontend import Cell, FrontEnd, Windows
from IPython.utils.capture import capture_output

from shiro_kernel import notebook
from shiro_kernel.magics import RUN_BY_AGENT
from shiro_kernel.notebook.channel import NO_FRONT_END, Channel
from shiro_kernel.notebook.document import SKIPPED_TURN_CELL

READ = Call("notebook_read", {"cells": None, "images": None})
TURN_MIME = "application/vnd.shiro.turn+json"


def turn(shell: Any, source: str, cell_id: str | None = None) -> dict[str, Any]:
    """Run a ``%shiro`` line (in cell ``cell_id``, as JupyterLab sends it); the turn's saved bundle."""
    with capture_output() as cap:
        shell.run_cell(source, cell_id=cell_id)
    return next((o.data[TURN_MIME] for o in cap.outputs if TURN_MIME in o.data), {})


def told(fake: Any) -> list[str]:
    """The results of the newest step's calls, as the model read them."""
    out: list[str] = []
    for item in fake.requests[-1].body["input"]:
        if item.get("type") == "function_call_output":
            out.append(item["output"])
        elif out:
            out = []
    return out


def agent_of(shell: Any) -> Any:
    return shell.magics_manager.registry["ShiroMagics"].agent


def results_per_call(shell: Any) -> Counter[str]:
    """How many results the session's record holds for each call the model made (each must have one)."""
    messages = agent_of(shell).current.session.messages
    calls = Counter(c.call_id for m in messages for c in m.tool_calls())
    answered = Counter(r.call_id for m in messages for r in m.tool_results())
    return Counter({call_id: answered[call_id] for call_id in calls})


@pytest.fixture
def attached(shiro_shell: Any) -> Any:
    def attach(transport: Any) -> Any:
        return notebook.attach(shiro_shell, Channel(transport))

    yield attach
    notebook.detach(shiro_shell)


# -- 33.2: a %shiro cell the agent runs ---------------------------------------------------------------------------


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_a_shiro_cell_the_agents_run_reaches_starts_no_turn_and_each_call_keeps_one_result(
    shiro_shell, fake_openai, attached, api
):
    """An older front end runs every cell a run names, the turn's own %shiro cell too: the magic sees that the
    agent's notebook_run runs it and starts nothing; the model reads the one sentence saying so; the record
    keeps exactly one result per call, and no second turn reaches the model (on either API)."""
    front = FrontEnd(
        cells=[Cell("x = 41", id="c1"), Cell("%shiro rerun all the cells", id="c2"), Cell("x + 1", id="c3")],
        run_in=shiro_shell,
        skips_turn_cells=False,
    )
    attached(front)
    shiro_shell.run_cell('%config Shiro.approval = "auto"')
    shiro_shell.run_cell(f'%config Shiro.api = "{api}"')
    fake_openai.enqueue(
        Reply(tool_calls=[READ]),
        Reply(tool_calls=[Call("notebook_run", {"cells": [0, 1, 2]})]),
        Reply(text="All three ran."),
    )
    bundle = turn(shiro_shell, "%shiro rerun all the cells", cell_id="c2")
    assert len(fake_openai.requests) == 3  # the turn's own three: no turn started inside it
    ran = next(
        r.output
        for m in agent_of(shiro_shell).current.session.messages
        for r in m.tool_results()
        if r.name == "notebook_run"
    )
    assert f"[1] ok (execution 1)\n{RUN_BY_AGENT}" in ran and "[2] ok (execution 1)\n42" in ran, ran
    per_call = results_per_call(shiro_shell)
    assert len(per_call) == 2 and set(per_call.values()) == {1}, per_call
    assert bundle["end"]["reason"] == "answered"
    assert fake_openai.validation_errors == []
    record(
        f"the agent's notebook_run reaches its own %shiro cell (a front end that runs it; {api} API)",
        1,
        sum(n - 1 for n in per_call.values()) + len(fake_openai.requests) - 3,
        "no turn started inside the turn; the model read the cell's one sentence; one result per call",
    )


def test_a_shiro_line_read_as_headless_during_a_background_turn_queues_behind_it(shiro_shell, fake_openai):
    """A %shiro line whose request looks headless (no widget front end seen for it: what a run without
    JupyterLab's metadata looked like) while a background turn runs: it is queued behind that turn, never run
    beside it on the same session."""
    shiro_shell.run_cell('%config Shiro.frontend = "widgets"')
    fake_openai.enqueue(Fault.delay(0.5, Reply(text="first done")), Reply(text="second done"))
    with capture_output():
        shiro_shell.run_cell("%shiro first")
    shiro_shell.run_cell('%config Shiro.frontend = "text"')
    with capture_output() as cap:
        shiro_shell.run_cell("%shiro second")
    assert cap.stdout.splitlines()[0] == "queued (position 1)", cap.stdout
    controller = shiro_shell.magics_manager.registry["ShiroMagics"].controller
    assert controller.wait_idle(15)
    assert [r.body["input"][-1]["content"] for r in fake_openai.requests] == ["first", "second"]
    assert set(results_per_call(shiro_shell).values()) <= {1}


def test_notebook_run_tells_the_model_a_shiro_cell_was_skipped(shiro_shell, fake_openai, attached):
    """The labextension does not run a %shiro cell a run names (status skipped): the model reads why."""
    front = FrontEnd(cells=[Cell("x = 1", id="c1"), Cell("%%shiro\nagain", id="c2")], run_in=shiro_shell)
    attached(front)
    shiro_shell.run_cell('%config Shiro.approval = "auto"')
    fake_openai.enqueue(
        Reply(tool_calls=[READ]), Reply(tool_calls=[Call("notebook_run", {"cells": [0, 1]})]), Reply(text="ok")
    )
    turn(shiro_shell, "%shiro rerun", cell_id="c2")
    assert told(fake_openai) == [f"[0] ok (execution 1)\n(no output)\n\n[1] {SKIPPED_TURN_CELL}"]


# -- 33.3: two windows on one notebook ----------------------------------------------------------------------------


def two_windows(shell: Any) -> tuple[FrontEnd, FrontEnd]:
    """Two windows on one notebook without real-time collaboration: each holds its own copy of the cells."""

    def window(client: str) -> FrontEnd:
        cells = [Cell("runs = []", id="c1"), Cell("runs.append(1)", id="c2"), Cell("%shiro go", id="c3")]
        return FrontEnd(cells=cells, run_in=shell, client=client)

    return window("window-a"), window("window-b")


def test_two_windows_on_one_notebook_one_serves_each_request(shiro_shell, fake_openai, attached):
    """Both windows say hello; every read, change and run goes to one of them (the first, as nobody ran the
    turn's cell from a window here): the cell runs once, the insert lands once."""
    a, b = two_windows(shiro_shell)
    attached(Windows([a, b]))
    shiro_shell.run_cell('%config Shiro.approval = "auto"')
    shiro_shell.run_cell("runs = []")
    fake_openai.enqueue(
        Reply(tool_calls=[READ]),
        Reply(tool_calls=[Call("notebook_insert", {"after": 0, "source": "inserted = 1", "cell_type": "code"})]),
        Reply(tool_calls=[Call("notebook_run", {"cells": [2]})]),
        Reply(text="done"),
    )
    turn(shiro_shell, "%shiro go")
    assert shiro_shell.user_ns["runs"] == [1]  # once, not once per window
    assert [c.source for c in a.cells].count("inserted = 1") == 1
    assert "inserted = 1" not in [c.source for c in b.cells]
    served = {
        f.client: [r["op"] for r in f.requests if r.get("type") == "request" and r.get("to") == f.client]
        for f in (a, b)
    }
    assert served == {"window-a": ["read", "review", "read", "run"], "window-b": []}, served
    record(
        "two windows on one notebook (a second browser, a tab kept open): a turn reads, inserts and runs",
        3,
        len(shiro_shell.user_ns["runs"]) - 1 + sum(c.source == "inserted = 1" for c in b.cells),
        "each request served by one window: the cell ran once, the insert landed once",
    )


def test_the_window_that_ran_the_shiro_cell_serves_its_turn(shiro_shell, fake_openai, attached):
    """The second window ran the %shiro cell: its requests go there, and the first window sees none."""
    a, b = two_windows(shiro_shell)
    live = attached(Windows([a, b]))
    live.note_cell("c3", "window-b")  # what the kernel's pre_run_cell hook notes from the execute request
    fake_openai.enqueue(Reply(tool_calls=[READ]), Reply(text="read"))
    turn(shiro_shell, "%shiro go", cell_id="c3")
    assert [r["to"] for r in b.requests if r.get("type") == "request"] == ["window-b"]
    assert "[2] code (not run) id=c3" in told(fake_openai)[0]


def test_a_window_opened_after_the_comm_gets_it_again_and_serves_the_turn_it_ran(shiro_shell, fake_openai, attached):
    """Window B opened after the kernel opened its comm (so it never heard it) and ran the %shiro cell: the
    channel is opened again once, B says hello, and B serves the turn; A, which heard both, serves nothing."""
    a, b = two_windows(shiro_shell)
    windows = Windows([a])
    live = attached(windows)
    live.channel.open(None)  # %load_ext, while only A was open
    windows.fronts.append(b)
    live.note_cell("c3", "window-b")
    fake_openai.enqueue(Reply(tool_calls=[READ]), Reply(text="read"))
    turn(shiro_shell, "%shiro go", cell_id="c3")
    assert (a.opened, b.opened) == (2, 1)
    assert [r["op"] for r in b.requests if r.get("type") == "request"] == ["read"]
    assert not [r for r in a.requests if r.get("type") == "request" and r.get("to") == "window-a"]


def test_a_reply_from_a_window_not_asked_is_dropped(shiro_shell, fake_openai, attached):
    """A second window that answers requests meant for the first (a forged accept, the document untouched)
    is not heard: the kernel takes the reply of the window it asked, and the user's reject stands."""
    a, rogue = two_windows(shiro_shell)
    a.answers, rogue.forges = ["rejected"], True

    def serve_everything(data: dict[str, Any]) -> None:  # answers whatever it hears, addressed or not
        FrontEnd.send(rogue, {k: v for k, v in data.items() if k != "to"})

    rogue.send = serve_everything  # type: ignore[method-assign]
    attached(Windows([rogue, a]))
    live = notebook.live_notebook(shiro_shell)
    live.note_cell("c3", "window-a")
    fake_openai.enqueue(
        Reply(tool_calls=[READ]),
        Reply(tool_calls=[Call("notebook_edit", {"cell": 1, "source": "runs.append(2)"})]),
        Reply(text="ok"),
    )
    bundle = turn(shiro_shell, "%shiro go", cell_id="c3")
    assert told(fake_openai)[0].startswith("Error: not applied — the user rejected this edit of cell 1")
    rows = [e["change"]["status"] for e in bundle["entries"] if e.get("change")]
    assert rows == ["rejected"]
    record(
        "security: a reply from a window the kernel did not ask (a forged accept of an edit the user rejected)",
        1,
        rows.count("accepted"),
        "dropped: the row and the model say rejected, as the window asked answered",
    )


# -- 33.11: a forged review reply -------------------------------------------------------------------------------------


@pytest.mark.parametrize("approval", ["ask", "auto"])
def test_a_reply_saying_accepted_with_the_document_unchanged_saves_no_changed_row(
    shiro_shell, fake_openai, attached, approval
):
    """The front end's reply says each change was made, but none is in the document: every row says
    unconfirmed, the model is told to read again, and nothing the agent knows follows the false reply."""
    front = FrontEnd(cells=[Cell("a = 1", id="c1"), Cell("b = 2", id="c2")], run_in=shiro_shell, forges=True)
    front.answers = ["accepted"] * 3
    attached(front)
    shiro_shell.run_cell(f'%config Shiro.approval = "{approval}"')
    fake_openai.enqueue(
        Reply(tool_calls=[READ]),
        Reply(
            tool_calls=[
                Call("notebook_edit", {"cell": 0, "source": "a = 10"}),
                Call("notebook_insert", {"after": 0, "source": "c = 3", "cell_type": "code"}),
                Call("notebook_delete", {"cell": 1}),
            ]
        ),
        Reply(text="ok"),
    )
    bundle = turn(shiro_shell, "%shiro change it")
    assert [c.source for c in front.cells] == ["a = 1", "b = 2"]
    rows = [
        (e["change"]["kind"], e["change"]["cell"], e["change"]["status"]) for e in bundle["entries"] if e.get("change")
    ]
    assert rows == [("edit", 0, "unconfirmed"), ("insert", 0, "unconfirmed"), ("delete", 1, "unconfirmed")], rows
    out = told(fake_openai)
    assert all(t.startswith("Error: not confirmed — the front end answered that this") for t in out), out
    assert "read the notebook again" in out[0]
    live = notebook.live_notebook(shiro_shell)
    assert live.order == ["c1", "c2"] and live.seen["c1"] == "a = 1"
    record(
        f"security: a review reply saying accepted with the document unchanged (approval {approval})",
        3,
        sum(status != "unconfirmed" for _, _, status in rows),
        "each row says unconfirmed (none says ✓), and the model is told to read the notebook again",
    )


def test_a_change_the_document_shows_is_confirmed_at_its_index_now(shiro_shell, fake_openai, attached):
    """An accepted change is read back: the row says accepted, at the index the document shows."""
    front = FrontEnd(cells=[Cell("a = 1", id="c1"), Cell("b = 2", id="c2")], run_in=shiro_shell)
    front.answers = ["accepted"]
    attached(front)
    fake_openai.enqueue(
        Reply(tool_calls=[READ]), Reply(tool_calls=[Call("notebook_edit", {"cell": 1, "source": "b = 3"})]), Reply("ok")
    )
    bundle = turn(shiro_shell, "%shiro change it")
    (row,) = [e["change"] for e in bundle["entries"] if e.get("change")]
    assert (row["status"], row["cell"]) == ("accepted", 1)
    reads = [r for r in front.requests if r.get("op") == "read"]
    assert reads[-1]["ids"] == ["c2"]  # the check reads back the changed cell only
    assert told(fake_openai) == ["Edited cell 1: +1 −1 lines (the user accepted it)."]


# -- 32.6: what notebook_read shows, and what a cell tool says first --------------------------------------------------


def test_notebook_read_shows_a_shiro_cells_answer_not_its_widgets_repr(shiro_shell, fake_openai, attached):
    widget = {"application/vnd.jupyter.widget-view+json": {"model_id": "m1", "version_major": 2, "version_minor": 0}}
    saved = {
        "version": 1,
        "entries": [
            {"type": "text", "text": "Computing."},
            {"type": "tool", "name": "python", "args": "df.x.mean()", "status": "ok", "output": "2.0"},
            {"type": "text", "text": "The mean of `df.x` is **2.0**."},
        ],
        "end": {"reason": "answered", "error": None},
    }
    repr_ = "TurnView(children=(VBox(children=(HTML(value='<b>shiro</b>'),)),))"
    front = FrontEnd(
        cells=[
            Cell(
                "%shiro what is the mean?",
                id="c1",
                outputs=[
                    {
                        "output_type": "display_data",
                        "data": {**widget, "text/plain": "the whole turn as text", TURN_MIME: saved},
                        "metadata": {},
                    }
                ],
            ),
            Cell(
                "%shiro and now?",
                id="c2",
                outputs=[{"output_type": "display_data", "data": {**widget, "text/plain": repr_}, "metadata": {}}],
            ),
        ]
    )
    attached(front)
    fake_openai.enqueue(Reply(tool_calls=[READ]), Reply(text="ok"))
    turn(shiro_shell, "%shiro read the notebook")
    (read,) = told(fake_openai)
    assert "shiro's turn (answered): The mean of `df.x` is **2.0**." in read, read
    assert "(a shiro turn, still running: its answer is not in yet)" in read, read
    assert "TurnView(" not in read and "the whole turn as text" not in read, read


def test_an_edit_before_any_read_with_no_front_end_says_there_is_none(shiro_shell, fake_openai, attached):
    """A kernel whose comm nobody answers (a front end without the extension): the edit says there is no
    front end that can edit, not that the notebook must be read first."""
    attached(FrontEnd(answer_hello=False))
    shiro_shell.run_cell('%config Shiro.approval = "auto"')
    fake_openai.enqueue(
        Reply(tool_calls=[Call("notebook_edit", {"cell": 1, "source": "x = 2"}), Call("notebook_run", {"cells": [1]})]),
        Reply(text="ok"),
    )
    turn(shiro_shell, "%shiro set x to 2")
    assert told(fake_openai) == [f"Error: {NO_FRONT_END}"] * 2
