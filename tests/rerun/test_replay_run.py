"""Running a replay in an IPython shell: the events a live turn emits, the line, where it stops; and one
running cell replayed (or refused) from the record or from the notebook."""

from __future__ import annotations

import json

import nbformat
import pytest
from nbformat.sign import NotebookNotary
from replayutil import bundle, call, code_cell, notebook, result, shell, turn, turn_output, write

from shiro_kernel.events import Notice, TextDelta, ToolEnd, ToolStart, TurnEnd
from shiro_kernel.rerun.record import add_turn, new_span
from shiro_kernel.rerun.replay_cell import Refused, Replayed, replay_cell
from shiro_kernel.rerun.replay_plan import plan_from_messages
from shiro_kernel.rerun.replay_run import run_plan
from shiro_kernel.session import Session
from shiro_kernel.store.sessions import SessionStore
from shiro_kernel.ui.render import TurnLog, to_bundle_json

PROMPT = "which region grew the most?"
DATA = "import pandas as pd\ndf = pd.DataFrame({'month': [1, 1, 2], 'amount': [10, 20, 40]})"
MONTHLY = "monthly = df.groupby('month').amount.sum()\nmonthly"
PLOT = (
    "import matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot as plt\n"
    "fig, ax = plt.subplots()\nax.plot([1, 2], [30, 40])\nax.set_title('monthly')\nplt.show()"
)


@pytest.fixture
def ip():
    from IPython.core.interactiveshell import InteractiveShell

    yield shell()
    InteractiveShell.clear_instance()


def ok(cid: str, code: str):
    return call(cid, "python", code=code), result(cid, "python", "(recorded output)")


def test_a_replay_emits_what_a_live_turn_emits(ip):
    plan = plan_from_messages(
        turn(
            PROMPT,
            [
                ok("c1", DATA),
                (call("c2", "inspect", names=["df"]), result("c2", "inspect", "df")),
                ok("c3", MONTHLY),
                ok("c4", PLOT),
            ],
            "Month 2 grew the most.",
        )
    )
    events: list = []
    out = run_plan(plan, ip, on_event=events.append, session_id="0193ab2c-1f2a-7c3d-8000-000000000001")
    assert [type(e).__name__ for e in events] == [
        "ToolStart",
        "ToolEnd",
        "ToolStart",
        "ToolEnd",
        "ToolStart",
        "ToolEnd",
        "TextDelta",
        "Notice",
        "TurnEnd",
    ]
    assert ip.user_ns["monthly"].to_dict() == {1: 30, 2: 40}
    ends = [e for e in events if isinstance(e, ToolEnd)]
    assert [e.call.call_id for e in ends] == ["c1", "c3", "c4"]  # the recorded ids: the rows keep them
    assert "30" in ends[1].result.output and "40" in ends[1].result.output
    figure = ends[2].result.displays
    assert len(figure) == 1 and "image/png" in figure[0]["data"]  # drawn under its row
    assert events[6] == TextDelta("Month 2 grew the most.")
    assert events[7] == Notice(out.line, kind="info")
    assert isinstance(events[8], TurnEnd) and events[8].reason == "replayed"
    assert out.line == (
        "replayed 3 python calls of this turn without the model (recorded in session 0193ab2c); "
        "%shiro --again which region grew the most? asks the model instead"
    )
    assert out.complete and [s.call_id for s in out.ran] == ["c1", "c3", "c4"]
    # the views draw it as they draw a turn
    log = TurnLog()
    for event in events:
        log.feed(event)
    saved = to_bundle_json(log)
    assert [e["callId"] for e in saved["entries"] if e["type"] == "tool"] == ["c1", "c3", "c4"]
    assert log.answer == "Month 2 grew the most." and saved["end"]["reason"] == "replayed"


def test_a_call_that_now_raises_stops_the_replay_there(ip):
    plan = plan_from_messages(
        turn(
            PROMPT,
            [
                ok("c1", "a = 1"),
                (
                    call("c2", "python", code="b = 2"),
                    result("c2", "python", "Error: not approved — denied", refused=True),
                ),
                ok("c3", "total = sales.sum()"),
                ok("c4", "after = 1"),
            ],
            "Done.",
        )
    )
    events: list = []
    out = run_plan(plan, ip, on_event=events.append, source="notebook", end=False)
    assert out.stopped_at is not None and out.stopped_at.call_id == "c3"
    assert out.stop_reason == "stopped at call 3: it raised NameError: name 'sales' is not defined"
    assert "b" not in ip.user_ns and "after" not in ip.user_ns and ip.user_ns["a"] == 1
    assert out.line == (
        "replayed 1 python call of this turn without the model (from the turn saved in this notebook); "
        "skipped 1 call refused when recorded; stopped at call 3: it raised NameError: name 'sales' is not "
        "defined; %shiro --again which region grew the most? asks the model instead"
    )
    assert isinstance(events[-1], Notice) and events[-1].kind == "warning"
    assert not any(isinstance(e, TurnEnd) for e in events)


def test_a_call_that_changed_files_stops_the_replay_before_it(ip, tmp_path):
    target = tmp_path / "report.md"
    plan = plan_from_messages(
        turn(
            "write it up\nwith a table",
            [
                ok("c1", "x = 1"),
                (call("c2", "write_file", path=str(target), content="hi"), result("c2", "write_file", "wrote")),
                ok("c3", f"open({str(target)!r}).read()"),
            ],
            "",
        )
    )
    out = run_plan(plan, ip, on_event=lambda e: None)
    assert out.stop_reason.startswith("stopped before call 2 (write_file …")
    assert "/report.md): it changed files when recorded" in out.stop_reason
    assert out.line.endswith("; %%shiro --again (same body) asks the model instead")
    assert [s.call_id for s in out.ran] == ["c1"] and not target.exists()


def test_a_turn_without_python(ip):
    plan = plan_from_messages(
        turn(PROMPT, [(call("c1", "inspect", names=[]), result("c1", "inspect", "-"))], "It is x.")
    )
    events: list = []
    out = run_plan(plan, ip, on_event=events.append, session_id=None)
    assert out.line.startswith("replayed this turn's answer without the model (it ran no python) (recorded on")
    assert [type(e).__name__ for e in events] == ["TextDelta", "Notice", "TurnEnd"]


# -- one running cell -------------------------------------------------------------------------------------
WRITES = "open('pwned.txt', 'w').write('code from an output ran')"


def _untrusted(tmp_path, code=WRITES):
    messages = turn(PROMPT, [ok("c1", code)], "Wrote it.")
    saved = bundle(messages, prompt=PROMPT, cell_id="turn-cell", turn_id="t-nb")
    return write(tmp_path / "sent.ipynb", notebook([code_cell(f"%shiro {PROMPT}", [turn_output(saved)], "turn-cell")]))


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    folder = tmp_path / "jupyter-data"
    folder.mkdir()
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(folder))
    return folder


def _replay(ip, path, setting, cell_id="turn-cell", **kw):
    events: list = []
    outcome = replay_cell(
        ip,
        prompt=PROMPT,
        cell_id=cell_id,
        ordinal=0,
        setting=setting,
        notebook_path=path,
        on_event=events.append,
        **kw,
    )
    return outcome, events


def test_code_hidden_in_an_untrusted_notebook_never_runs(ip, tmp_path, data_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = _untrusted(tmp_path)
    outcome, events = _replay(ip, path, "auto")
    assert isinstance(outcome, Refused) and events == []
    assert not (tmp_path / "pwned.txt").exists()
    assert "sent.ipynb is not trusted" in outcome.text and "jupyter trust sent.ipynb" in outcome.text
    assert _replay(ip, path, "off")[0] is None and not (tmp_path / "pwned.txt").exists()
    # trusted on this machine (signed as the server signs what the user saves): it replays
    with NotebookNotary(data_dir=str(data_dir)) as notary:
        notary.sign(nbformat.read(path, as_version=4))
    outcome, events = _replay(ip, path, "auto")
    assert isinstance(outcome, Replayed) and outcome.found.source == "notebook"
    assert (tmp_path / "pwned.txt").read_text() == "code from an output ran"
    assert "(from the turn saved in this notebook)" in outcome.result.line
    assert outcome.found.fields["turnId"] == "t-nb" and outcome.found.fields["replay"][0]["code"] == WRITES
    # already run in this kernel: left to the model
    assert _replay(ip, path, "auto", seen={"t-nb"})[0] is None


def test_shiro_replay_notebook_runs_the_saved_turn_untrusted(ip, tmp_path, data_dir, monkeypatch):
    """``notebook`` from the user's own config (what the kernel that owns the shell started with) replays an
    untrusted notebook's turn; the same setting made in the shell itself (a ``%config`` cell) does not."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config, Configurable

    monkeypatch.chdir(tmp_path)
    path = _untrusted(tmp_path)
    outcome, _ = _replay(ip, path, "notebook", cell_id=None)
    assert isinstance(outcome, Refused) and not (tmp_path / "pwned.txt").exists()
    assert "was set inside this kernel (a %config or %env cell), and that does not count" in outcome.text
    InteractiveShell.clear_instance()
    kernel = Configurable(config=Config({"Shiro": {"replay": "notebook"}}))  # as ipykernel's kernel owns its shell
    outcome, events = _replay(InteractiveShell.instance(parent=kernel), path, "notebook", cell_id=None)  # nbclient
    assert isinstance(outcome, Replayed) and (tmp_path / "pwned.txt").exists()
    assert isinstance(events[0], ToolStart) and json.loads(events[0].call.arguments)["code"] == WRITES


def test_a_turn_recorded_on_this_machine_replays_without_trust(ip, tmp_path, data_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "mine.ipynb"
    messages = turn(PROMPT, [ok("c1", "recorded = 'from the record'")], "Done.")
    session = Session(notebook_path=str(path), messages=list(messages))
    span = new_span(session.messages, since=0, prompt=PROMPT, cell_id="turn-cell", ordinal=0, turn_id="t-rec")
    store = SessionStore()
    store.save(session)
    record = store.load_record(session.id)
    record["turns"] = add_turn(None, span)  # what the record gains once the agent records its turns
    (store.root / f"{session.id}.json").write_text(json.dumps(record))
    write(path, notebook([code_cell(f"%shiro {PROMPT}", cell_id="turn-cell")]))  # saved without outputs
    outcome, _ = _replay(ip, path, "auto", store=store)
    assert isinstance(outcome, Replayed) and outcome.found.source == "record"
    assert ip.user_ns["recorded"] == "from the record"
    assert outcome.result.line.startswith(
        f"replayed 1 python call of this turn without the model (recorded in session {session.id[:13]})"  # new: 13
    )
    assert _replay(ip, path, "off", store=store)[0] is None
