"""Finding a running cell's recorded turn: the notebook's %shiro lines, the record's ``turns`` field, and
find_turn by cell id, by prompt and ordinal, from the record or from the notebook's bundle."""

from __future__ import annotations

from replayutil import bundle, call, code_cell, notebook, result, turn, turn_output

from shiro_kernel.line import prompt_of as line_prompt
from shiro_kernel.rerun.find import find_turn
from shiro_kernel.rerun.record import TURNS_KEPT, TurnSpan, add_turn, new_span, turns_of
from shiro_kernel.rerun.sites import COMMAND, SETUP, TURN, Ordinals, notebook_sites, shiro_lines
from shiro_kernel.transcript import Message, messages_to_json


def test_shiro_lines_read_prompts_as_the_magic_does():
    source = (
        "%load_ext shiro_kernel\n"
        '%config Shiro.approval = "auto"\n'
        "x = 1\n"
        "%shiro --wait --model gpt-5 which region grew the most?\n"
        "%shiro /todos\n"
        "%shiro --new\n"
        "%shiro -- -x is negative?\n"
        "%shiro --again  plot it  \n"
        "%shiro --bogus hi\n"
        "  %shiro indented too\n"
        "%shiro?\n"
    )
    assert [(m.number, m.kind, m.prompt) for m in shiro_lines(source)] == [
        (0, SETUP, ""),
        (1, SETUP, ""),
        (3, TURN, "which region grew the most?"),
        (4, COMMAND, ""),
        (5, COMMAND, ""),
        (6, TURN, "-x is negative?"),
        (7, TURN, "plot it"),
        (8, COMMAND, ""),  # the magic refuses an unknown option: no turn
        (9, TURN, "indented too"),
    ]
    cell = shiro_lines("\n%%shiro --wait first line\nthe body\n  and more\n")
    assert [(m.number, m.kind, m.prompt, m.whole) for m in cell] == [
        (1, TURN, "first line\nthe body\n  and more", True)
    ]
    assert [m.kind for m in shiro_lines("%%shiro\n/todos\n")] == [COMMAND]
    assert line_prompt("-r 0193 hello") == "hello" and line_prompt("--mute=a,b hi") == "hi"
    assert line_prompt("-r") is None


def test_ordinals_count_the_sites_with_the_same_prompt():
    nb = notebook(
        [
            code_cell("%shiro plot it"),
            code_cell("%shiro other"),
            {"cell_type": "markdown", "metadata": {}, "source": "%shiro plot it"},
            code_cell("y = 1\n%shiro plot it\n%shiro plot it"),
        ]
    )
    sites = [(s.cell, s.line, s.prompt, s.ordinal, s.cell_id) for s in notebook_sites(nb)]
    assert sites == [
        (0, 0, "plot it", 0, "cell-0"),
        (1, 0, "other", 0, "cell-1"),
        (3, 1, "plot it", 1, "cell-3"),
        (3, 2, "plot it", 2, "cell-3"),
    ]
    counter = Ordinals()
    assert [counter.next(p) for p in ("plot it", "other", "plot it", "plot it")] == [0, 0, 1, 2]


PROMPT = "make monthly"


def _turn(code: str = "monthly = 1", answer: str = "Made monthly.") -> list[Message]:
    return turn(PROMPT, [(call("c1", "python", code=code), result("c1", "python", "(no output)"))], answer)


def _record(*turns: tuple[list[Message], TurnSpan | None]) -> dict:
    messages: list[Message] = []
    spans: list = []
    for msgs, span in turns:
        start = len(messages)
        messages += msgs
        if span is not None:
            got = new_span(
                messages,
                since=start,
                prompt=span.prompt,
                cell_id=span.cell_id,
                ordinal=span.ordinal,
                turn_id=span.turn_id,
            )
            assert got is not None and (got.start, got.end) == (start, len(messages))
            spans = add_turn(spans, got)
    return {"id": "s1", "messages": messages_to_json(messages), "turns": spans}


def _span(turn_id: str, cell_id: str | None, prompt: str = PROMPT, ordinal: int = 0) -> TurnSpan:
    return TurnSpan(turn_id, cell_id, prompt, ordinal, 0, 1)


def test_the_record_turns_field():
    record = _record((_turn("a = 1"), _span("t1", "cellA")), (_turn("b = 2"), _span("t2", None, ordinal=1)))
    assert [(s.turn_id, s.cell_id, s.ordinal, s.start, s.end) for s in turns_of(record)] == [
        ("t1", "cellA", 0, 0, 4),
        ("t2", None, 1, 4, 8),
    ]
    assert record["turns"][0] == {
        "turnId": "t1",
        "cellId": "cellA",
        "prompt": PROMPT,
        "ordinal": 0,
        "start": 0,
        "end": 4,
    }
    # broken entries are skipped; the same turn again replaces its entry; the list is capped
    assert (
        len(turns_of({"turns": [{"turnId": 3}, {"turnId": "x", "prompt": "p", "cellId": None, "start": 2, "end": 1}]}))
        == 0
    )
    again = add_turn(record["turns"], TurnSpan("t1", "cellA", PROMPT, 0, 8, 12))
    assert [t["turnId"] for t in again] == ["t2", "t1"] and again[-1]["start"] == 8
    many: list = []
    for n in range(TURNS_KEPT + 3):
        many = add_turn(many, TurnSpan(f"t{n}", None, "p", 0, n, n + 1))
    assert len(many) == TURNS_KEPT and many[0]["turnId"] == "t3"
    # a turn that first answered a call left waiting starts at its user message, not at `since`
    waiting = [Message("tool", [result("old", "python", "done")]), *_turn()]
    assert new_span(waiting, since=0, prompt=PROMPT, cell_id=None, ordinal=0, turn_id="t").start == 1
    assert new_span(waiting, since=0, prompt="other", cell_id=None, ordinal=0, turn_id="t") is None
    # a turn no model answered (no key, a server that failed) is no turn to replay: its prompt alone
    unanswered = [*_turn(), Message.user("and next?")]
    assert new_span(unanswered, since=len(_turn()), prompt="and next?", cell_id=None, ordinal=0, turn_id="t") is None


def _find(record=None, nb=None, **kw):
    args = {"cell_id": None, "prompt": PROMPT, "ordinal": 0, **kw}
    records = {"s1": record} if record else {}
    return find_turn(notebook=nb, load=records.get, sessions=["s1"] if record else [], **args)


def test_find_in_the_record_by_cell_id_then_by_prompt_and_ordinal():
    record = _record((_turn("first = 1"), _span("t1", "cellA")), (_turn("second = 2"), _span("t2", "cellB", ordinal=1)))
    found = _find(record, cell_id="cellA")
    assert found.source == "record" and found.turn_id == "t1" and found.session_id == "s1"
    assert [s.code for s in found.plan.runs] == ["first = 1"]
    assert found.fields["cellId"] == "cellA" and found.fields["replay"][0]["code"] == "first = 1"
    # no id from the front end (nbclient): the prompt and its ordinal decide
    assert _find(record, ordinal=1).turn_id == "t2"
    assert _find(record, ordinal=0).turn_id == "t1"
    assert _find(record, ordinal=2) is None
    # the cell's prompt is no longer the one recorded for it: nothing
    assert _find(record, cell_id="cellA", prompt="make weekly") is None
    assert _find(record, prompt="make weekly") is None
    # a cell the record never saw, with a prompt and ordinal it did see
    assert _find(record, cell_id="new-cell").turn_id == "t1"


def test_a_span_that_no_longer_holds_its_turn_is_ignored():
    record = _record((_turn(), _span("t1", "cellA")))
    record["messages"] = record["messages"][2:]  # /compact replaced the transcript
    assert _find(record, cell_id="cellA") is None


def test_find_in_the_notebook_by_cell_id_and_by_prompt_and_ordinal():
    one = bundle(_turn("from_nb = 1"), prompt=PROMPT, cell_id="c-turn", turn_id="nb1")
    two = bundle(_turn("from_nb = 2"), prompt=PROMPT, cell_id="c-two", ordinal=1, turn_id="nb2")
    nb = notebook(
        [
            code_cell("import pandas"),
            code_cell(f"%shiro {PROMPT}", [turn_output(one)], cell_id="c-turn"),
            code_cell(f"%shiro {PROMPT}", [turn_output(two)], cell_id="c-two"),
        ]
    )
    found = _find(nb=nb, cell_id="c-turn")
    assert (
        found.source == "notebook" and found.turn_id == "nb1" and [s.code for s in found.plan.runs] == ["from_nb = 1"]
    )
    assert _find(nb=nb, cell_id="c-two").turn_id == "nb2"
    assert _find(nb=nb, ordinal=1).turn_id == "nb2" and _find(nb=nb, ordinal=0).turn_id == "nb1"
    assert _find(nb=nb, cell_id="c-turn", prompt="make weekly") is None
    # the bundle in the cell must be of that prompt: an edited cell whose output is older finds nothing
    nb["cells"][1]["source"] = "%shiro make weekly"
    assert _find(nb=nb, cell_id="c-turn", prompt="make weekly") is None
    # a bundle from before replay (no `replay` field) and no record: nothing to replay
    old = {k: v for k, v in one.items() if k != "replay"}
    nb["cells"][1] = code_cell(f"%shiro {PROMPT}", [turn_output(old)], cell_id="c-turn")
    assert _find(nb=nb, cell_id="c-turn") is None


def test_the_record_vouches_for_the_turn_the_notebook_shows():
    record = _record((_turn("recorded = 1"), _span("t1", "cellA")))
    saved = bundle(_turn("tampered = 1"), prompt=PROMPT, cell_id="cellA", turn_id="t1", session_id="s1")
    nb = notebook([code_cell(f"%shiro {PROMPT}", [turn_output(saved)], cell_id="cellA")])
    found = _find(record, nb, cell_id="cellA")
    assert found.source == "record" and [s.code for s in found.plan.runs] == ["recorded = 1"]
    # the notebook shows another turn than the record's: that one, from the notebook
    saved["turnId"] = "t-other"
    found = _find(record, nb, cell_id="cellA")
    assert found.source == "notebook" and [s.code for s in found.plan.runs] == ["tampered = 1"]


def test_an_older_bundle_is_found_in_the_record_by_its_calls():
    messages = _turn("old = 1")
    record = {"id": "s1", "messages": messages_to_json([Message.user("earlier"), *messages])}  # no `turns`
    old = {k: v for k, v in bundle(messages, prompt=PROMPT, session_id="s1").items() if k not in ("replay", "turnId")}
    nb = notebook([code_cell(f"%shiro {PROMPT}", [turn_output(old)])])
    found = _find(record, nb)
    assert found.source == "record" and [s.code for s in found.plan.runs] == ["old = 1"]
    assert found.fields["replay"][0]["code"] == "old = 1"
