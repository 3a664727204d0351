"""What ``shiro check`` compares, without a kernel: outputs as a reader sees them, how a difference is said,
and what a failure says about the notebook."""

from __future__ import annotations

import base64

from replayutil import bundle, call, code_cell, png, result, turn, turn_output

from shiro_kernel.rerun.check import compare, diagnosis
from shiro_kernel.rerun.reading import (
    Item,
    difference,
    display_view,
    html_text,
    image_size,
    normal_text,
    reader_view,
    replayed_calls,
)
from shiro_kernel.rerun.sites import Ordinals


def stream(text, name="stdout"):
    return {"output_type": "stream", "name": name, "text": text}


def result_output(data, count=3):
    return {"output_type": "execute_result", "execution_count": count, "data": data, "metadata": {}}


def test_text_is_compared_without_what_changes_every_run():
    a = "\x1b[31mWall time: 1.24 s\x1b[0m\n<object object at 0x7f3a2b1c9e40>  \n<shiro-python-3>:1: UserWarning\n\n"
    b = "Wall time: 950 ms\n<object object at 0x7f00deadbeef>\n<shiro-python-12>:1: UserWarning"
    assert (
        normal_text(a) == normal_text(b) == "Wall time: <time>\n<object object at 0x…>\n<shiro-python>:1: UserWarning"
    )
    assert normal_text("total 1,204") != normal_text("total 1,187")
    assert normal_text("100%|██████| 10/10 [00:01<00:00, 9.50it/s]") == normal_text(
        "100%|██████| 10/10 [00:02<00:00, 4.1it/s]"
    )


def test_images_by_their_size():
    assert image_size("image/png", png(640, 480)) == (640, 480)
    assert image_size("image/png", [png(3, 2)[:40], png(3, 2)[40:]]) == (3, 2)  # saved as a list of lines
    gif = base64.b64encode(b"GIF89a" + (20).to_bytes(2, "little") + (10).to_bytes(2, "little") + b"\x00" * 8).decode()
    assert image_size("image/gif", gif) == (20, 10)
    jpeg = (
        b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
        + b"\xff\xc0\x00\x11\x08"
        + (480).to_bytes(2, "big")
        + (640).to_bytes(2, "big")
        + b"\x03"
        + b"\x00" * 9
    )
    assert image_size("image/jpeg", base64.b64encode(jpeg).decode()) == (640, 480)
    assert image_size("image/png", "bm90IGFuIGltYWdl") is None
    fig = {"image/png": png(640, 480), "text/plain": "<Figure size 640x480 with 1 Axes>"}
    other = {"image/png": png(640, 480), "text/plain": "<Figure size 640x480 with 2 Axes>"}
    assert display_view(fig) == display_view(other) == ("image", "image/png 640×480")
    assert display_view({"image/png": png(800, 600)}) != display_view(fig)


def test_html_by_its_text():
    frame = (
        "<div><style scoped>.dataframe tbody tr th { vertical-align: top; }</style>"
        '<table border="1" class="dataframe"><thead><tr><th></th><th>amount</th></tr></thead>'
        "<tbody><tr><th>0</th><td>10</td></tr><tr><th>1</th><td>20 &amp; 5</td></tr></tbody></table></div>"
    )
    assert html_text(frame) == "amount 0 10 1 20 & 5"
    assert display_view({"text/html": frame, "text/plain": "   amount\n0  10"}) == ("text", "amount 0 10 1 20 & 5")


def _turn_bundle(output="m\n1  30", answer="Made it.", usage=100):
    messages = turn(
        "make monthly",
        [
            (call("c1", "python", code="monthly = 1"), result("c1", "python", output)),
            (call("c2", "inspect", names=[]), result("c2", "inspect", "x")),
        ],
        answer,
    )
    data = bundle(messages, prompt="make monthly")
    data["usage"]["inputTokens"] = usage
    return data


def test_a_turn_is_compared_by_its_replayed_calls_and_its_answer():
    saved = _turn_bundle()
    calls = [replayed_calls(saved)]
    assert calls == [["c1"]]
    view = reader_view([turn_output(saved), stream("resumed 0193 — 4 messages\n")], shiro_only=True, calls=calls)
    assert [i.kind for i in view] == ["turn"]  # shiro's own lines in a %shiro cell are not compared
    same = reader_view([turn_output(_turn_bundle(usage=9999))], shiro_only=True, calls=calls)
    assert difference(view, same) is None  # token counts, footers and ids are not what a reader compares
    changed = reader_view([turn_output(_turn_bundle(output="m\n1  31"))], shiro_only=True, calls=calls)
    assert difference(view, changed) == 'shiro turn: replayed call 1\'s output differs: saved "1 30", now "1 31"'
    answer = reader_view([turn_output(_turn_bundle(answer="Other."))], shiro_only=True, calls=calls)
    assert difference(view, answer) == "shiro turn: the answer shown differs from the saved one"
    failed = _turn_bundle()
    failed["entries"] = [e for e in failed["entries"] if e["type"] != "tool"]
    failed["end"] = {"reason": "error", "error": "Could not reach the model server at http://x: set OPENAI_BASE_URL"}
    now = reader_view([turn_output(failed)], shiro_only=True, calls=calls)
    assert difference(view, now) == (
        "its shiro turn was not replayed now; it ended: Could not reach the model server at http://x: set OPENAI_BASE_URL"
    )
    old = {k: v for k, v in saved.items() if k != "replay"}
    assert difference(reader_view([turn_output(old)], shiro_only=True, calls=[None]), now).startswith(
        "its shiro turn was saved without replay information"
    )


def test_how_a_difference_is_said():
    assert difference([Item("stdout", "a\nb")], [Item("stdout", "a\nc")]) == 'output 1 differs: saved "b", now "c"'
    long_a = "value: " + "x" * 80 + " 1.25 end"
    long_b = "value: " + "x" * 80 + " 1.30 end"
    said = difference([Item("text", long_a)], [Item("text", long_b)])
    assert said == 'output 1 differs: saved "…xxxxxxxxxxxx 1.25 end", now "…xxxxxxxxxxxx 1.30 end"'
    assert difference([Item("image", "image/png 640×480")], [Item("image", "image/png 800×600")]) == (
        "output 1, an image, is 800×600 now, 640×480 when saved"
    )
    assert (
        difference([Item("text", "1")], [Item("error", "KeyError: 'x'")])
        == "output 1 is an error now, a result when saved"
    )
    assert difference([Item("text", "1"), Item("image", "i")], [Item("text", "1")]) == (
        "1 outputs now, 2 when saved (an image is missing)"
    )


def test_what_a_failure_says():
    cells = [
        code_cell("import pandas as pd"),
        code_cell("if False:\n    maybe = 1"),
        code_cell("broken = 1 / 0\nfrom_failed = 2"),
        code_cell("%shiro make monthly", [turn_output(_turn_bundle())]),
        code_cell("later = 5"),
    ]
    assert diagnosis("NameError: name 'ghost' is not defined", 4, cells, set()) == (
        " — no cell before it defines ghost (hidden state)"
    )
    assert diagnosis("NameError: name 'later' is not defined", 3, cells, set()) == (
        " — later is defined only by cell 5, which runs after it (out-of-order dependency)"
    )
    assert diagnosis("NameError: name 'from_failed' is not defined", 4, cells, {2}) == (
        " — cell 3, which defines from_failed, failed"
    )
    assert "a condition" in diagnosis("NameError: name 'maybe' is not defined", 4, cells, set())
    # what a %shiro turn's replayed code defines counts: `monthly` is made by cell 4's turn
    assert diagnosis("NameError: name 'monthly' is not defined", 4, cells, set()).startswith(
        " — cell 4 assigns monthly"
    )
    assert diagnosis("KeyError: 'amount'", 4, cells, set()) == ""


def test_compare_checks_only_failures_in_cells_never_run_when_saved():
    saved = [code_cell("x = 1"), code_cell("print(x)"), code_cell("y")]
    saved[1]["execution_count"] = None
    new = [
        code_cell("x = 1"),
        code_cell("print(x)", [stream("1\n")]),
        code_cell(
            "y", [{"output_type": "error", "ename": "NameError", "evalue": "name 'y' is not defined", "traceback": []}]
        ),
    ]
    problems = compare(saved, new, None)
    assert [(p.cell, p.kind) for p in problems] == [(3, "failed")]
    tagged = [code_cell("raise ValueError('shown on purpose')")]
    tagged[0]["metadata"]["tags"] = ["raises-exception"]
    error = {"output_type": "error", "ename": "ValueError", "evalue": "shown on purpose", "traceback": []}
    tagged[0]["outputs"] = [error]
    assert compare(tagged, [{**tagged[0], "outputs": [error]}], None) == []
    assert [p.line() for p in compare(saved, new[:1] + new[1:], 1)] == [
        "cell 2: the kernel died while it ran (out of memory?)"
    ]


def test_the_running_ordinal():
    from replayutil import notebook

    nb = notebook([code_cell("%shiro plot it", cell_id="a"), code_cell("%shiro plot it", cell_id="b")])
    ordinals = Ordinals()
    assert ordinals.running("plot it", "b", nb) == 1  # by the cell's place in the file
    assert ordinals.running("plot it") == 1  # counted: the call above counted one already
    assert ordinals.running("plot it", "not-in-file", nb) == 2
