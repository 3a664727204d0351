"""The answer's numbers marked in every rendering of a turn (issue 28): the checked numbers reach the views as
a NumbersChecked event, the bundle carries them, Markdown and text put ⚠ after a number found nowhere, HTML
links a found number to its tool row and titles both, the footer and the live view's status count the ones
not found; and no mark carries markup of the answer or of an output."""

from __future__ import annotations

import html
import json
import re
import unicodedata

import pytest
from faultlog import record

from shiro_kernel.config import Shiro
from shiro_kernel.events import (
    Event,
    Notice,
    NumbersChecked,
    StepStart,
    TextDelta,
    ToolEnd,
    ToolStart,
    TurnEnd,
    Usage,
)
from shiro_kernel.numbers.tool_outputs import OutputIndex
from shiro_kernel.numbers.turn_check import TurnNumbers, call_inputs, check_turn, for_turn
from shiro_kernel.transcript import Message, TextPart, ToolCallPart, ToolResultPart
from shiro_kernel.ui import marks
from shiro_kernel.ui.marks import numbers_line
from shiro_kernel.ui.render import TurnLog, log_entry_html, to_bundle_json, to_html, to_markdown, to_text
from shiro_kernel.ui.text_view import TextView
from shiro_kernel.ui.widgets import TurnView

ISSUE_OUTPUT = "cocoa -0.151335, coffee 0.131417, tea 0.050296"
ISSUE_ANSWER = "**Coffee** grew the most … (+16.4 %). Tea was flat and cocoa fell 3 %."
PROMPT = "which product grew the most?"
FOUND_TITLE = f"from call 1 (python): {ISSUE_OUTPUT}"
MISSING_SPAN = (
    '<span class="shiro-number-missing" title="not found in this turn\'s outputs" '
    'style="text-decoration:underline dotted #b8860b">{}⚠</span>'
)
FOUND_LINK = (
    '<a class="shiro-number" href="#shiro-call-call_growth" title="{}" '
    'style="color:inherit;text-decoration:underline dotted">{}</a>'
)


def turn_events(answer: str, output: str = ISSUE_OUTPUT, *, call_id: str = "call_growth") -> list[Event]:
    """A turn as the loop reports it: text, one python call with its output, the answer streamed in pieces."""
    call = ToolCallPart(call_id, "python", json.dumps({"code": "print(growth.to_string())"}))
    pieces = [answer[i : i + 7] for i in range(0, len(answer), 7)]
    return [
        StepStart(1),
        TextDelta("I'll compute the growth."),
        ToolStart(call),
        ToolEnd(call, ToolResultPart(call_id, "python", output), 0.012),
        StepStart(2),
        *(TextDelta(p) for p in pieces),
    ]


def checked_log(answer: str, output: str = ISSUE_OUTPUT, *, call_id: str = "call_growth") -> TurnLog:
    """The events through a TurnNumbers (as the agent feeds it) and a TurnLog, then its NumbersChecked and
    the TurnEnd, as the agent emits them."""
    numbers, log = TurnNumbers(), TurnLog()
    for event in turn_events(answer, output, call_id=call_id):
        numbers.feed(event)
        log.feed(event)
    log.feed(numbers.event(PROMPT))
    log.feed(TurnEnd("answered", Usage(1200, 80, None)))
    return log


def answer_of(rendering: str, log: TurnLog, index: int = 3) -> str:
    return rendering.split("\n\n")[index]


# -- the issue's example ------------------------------------------------------------------------------------


def test_the_issues_example_in_the_bundle():
    log = checked_log(ISSUE_ANSWER)
    bundle = to_bundle_json(log)
    assert bundle["numbers"] == [
        {"text": "+16.4 %", "found": False, "call_id": None, "start": 28, "end": 35, "line": None},
        {"text": "3 %", "found": False, "call_id": None, "start": 66, "end": 69, "line": None},
    ]
    answer = bundle["entries"][-1]["text"]  # the offsets are in the answer as saved: the last text entry
    assert [answer[n["start"] : n["end"]] for n in bundle["numbers"]] == ["+16.4 %", "3 %"]
    assert json.loads(json.dumps(bundle))["numbers"] == bundle["numbers"]  # plain JSON


def test_the_issues_example_in_markdown_and_text():
    log = checked_log(ISSUE_ANSWER)
    md = to_markdown(log).split("\n\n")
    assert md[2] == "**Coffee** grew the most … (+16.4 %⚠). Tea was flat and cocoa fell 3 %⚠."
    assert md[-1] == "<sub>⚠ 2 numbers not found in this turn's outputs · 1,200 in · 80 out tokens</sub>"
    text = to_text(log).split("\n\n")
    assert text[2] == "**Coffee** grew the most … (+16.4 %⚠). Tea was flat and cocoa fell 3 %⚠."
    assert text[-1] == "⚠ 2 numbers not found in this turn's outputs · 1,200 in · 80 out tokens"
    assert to_markdown(log, "saved").endswith("outputs · 1,200 in · 80 out tokens · saved</sub>")


def test_the_issues_example_in_html():
    log = checked_log(ISSUE_ANSWER)
    answer = log_entry_html(log, 2)
    assert answer == (
        "<p><strong>Coffee</strong> grew the most … ("
        + MISSING_SPAN.format("+16.4 %")
        + "). Tea was flat and cocoa fell "
        + MISSING_SPAN.format("3 %")
        + ".</p>\n"
    )
    page = to_html(log)
    assert answer in page
    assert "<p><sub>⚠ 2 numbers not found in this turn&#x27;s outputs · 1,200 in · 80 out tokens</sub></p>" in page


def test_a_number_found_links_to_the_output_of_its_call():
    log = checked_log("Coffee grew 13.1 %, the most.")
    assert to_bundle_json(log)["numbers"] == [
        {"text": "13.1 %", "found": True, "call_id": "call_growth", "start": 12, "end": 18, "line": ISSUE_OUTPUT}
    ]
    assert log_entry_html(log, 2) == f"<p>Coffee grew {FOUND_LINK.format(FOUND_TITLE, '13.1 %')}, the most.</p>\n"
    page = to_html(log)
    target = re.search(r'<pre id="shiro-call-call_growth"[^>]*>([^<]*)</pre></details>', page)
    assert target is not None and target.group(1) == ISSUE_OUTPUT  # the link's target: the row's output
    # Markdown and text leave a found number as written, and the footer has no numbers line
    assert to_markdown(log).split("\n\n")[2] == "Coffee grew 13.1 %, the most."
    assert to_markdown(log).split("\n\n")[-1] == "<sub>1,200 in · 80 out tokens</sub>"
    assert to_text(log).split("\n\n")[-1] == "1,200 in · 80 out tokens"


# -- the live view and the text view ------------------------------------------------------------------------


def test_the_widget_view_redraws_the_answer_with_its_marks_and_counts_them_in_its_status():
    view = TurnView()
    events = turn_events("Coffee grew 13.1 %; cocoa fell 3 %.")
    numbers = TurnNumbers()
    for event in events:
        numbers.feed(event)
        view.feed(event)
    view.flush()
    answer_row = view.entries.children[2]
    assert answer_row.value == "<p>Coffee grew 13.1 %; cocoa fell 3 %.</p>\n"  # before the check: unmarked
    view.feed(numbers.event(PROMPT))
    view.feed(TurnEnd("answered", Usage(1200, 80, None)))
    assert answer_row.value == (
        f"<p>Coffee grew {FOUND_LINK.format(FOUND_TITLE, '13.1 %')}; cocoa fell {MISSING_SPAN.format('3 %')}.</p>\n"
    )
    assert 'id="shiro-call-call_growth"' in view.entries.children[1].value  # the tool row the link goes to
    status = html.unescape(view.status.value)
    assert re.fullmatch(
        r"done · \d+\.\d s · 1,200 in · 80 out tokens · ⚠ 1 number not found in this turn's outputs", status
    )


def test_the_widget_status_has_no_numbers_line_when_all_were_found():
    view = TurnView()
    numbers = TurnNumbers()
    for event in turn_events("Coffee grew 13.1 %."):
        numbers.feed(event)
        view.feed(event)
    view.feed(numbers.event(PROMPT))
    view.feed(TurnEnd("answered", Usage(1200, 80, None)))
    assert html.unescape(view.status.value).endswith("1,200 in · 80 out tokens")


def test_the_text_views_final_bundle_carries_the_marks():
    view = TextView(live=False)
    numbers = TurnNumbers()
    for event in turn_events(ISSUE_ANSWER):
        numbers.feed(event)
        view.log.feed(event)  # TextView.__call__ would display; the bundle is what it displays
    view.log.feed(numbers.event(PROMPT))
    view.log.feed(TurnEnd("answered", Usage(1200, 80, None)))
    final = view.bundle(final=True)
    assert "(+16.4 %⚠)" in final["text/plain"] and "(+16.4 %⚠)" in final["text/markdown"]
    assert MISSING_SPAN.format("3 %") in final["text/html"]
    assert [n["text"] for n in final["application/vnd.shiro.turn+json"]["numbers"]] == ["+16.4 %", "3 %"]


def test_a_turn_not_checked_has_no_numbers_field_and_no_marks():
    log = TurnLog()
    for event in turn_events(ISSUE_ANSWER):
        log.feed(event)
    log.feed(TurnEnd("answered", Usage(1200, 80, None)))
    assert "numbers" not in to_bundle_json(log)
    assert "⚠" not in to_markdown(log) + to_text(log) + to_html(log)
    checked = TurnLog()
    checked.feed(TextDelta("no numbers here"))
    checked.feed(NumbersChecked([]))
    assert to_bundle_json(checked)["numbers"] == []


# -- marks never carry markup ---------------------------------------------------------------------------------


def test_an_answer_with_markup_next_to_its_numbers_stays_inert():
    answer = 'See <img src=x onerror="alert(1)">16.4 % and <script>alert(2)</script> 13.1 %<b>!</b>'
    log = checked_log(answer)
    page = to_html(log)
    assert "<img" not in page and "<script" not in page and "<b>" not in page
    answer_html = log_entry_html(log, 2)
    assert answer_html == (
        "<p>See &lt;img src=x onerror=&quot;alert(1)&quot;&gt;"
        + MISSING_SPAN.format("16.4 %")
        + " and &lt;script&gt;alert(2)&lt;/script&gt; "
        + FOUND_LINK.format(FOUND_TITLE, "13.1 %")
        + "&lt;b&gt;!&lt;/b&gt;</p>\n"
    )
    md = to_markdown(log)
    assert "<img" not in md and "<script" not in md and "16.4 %⚠" in md


def test_an_output_line_with_markup_is_escaped_in_the_title():
    output = 'growth "><img src=x onerror=alert(1)> 0.131417'
    log = checked_log("Coffee grew 13.1 %.", output)
    answer_html = log_entry_html(log, 2)
    title = html.escape(f"from call 1 (python): {output}")
    assert answer_html == f"<p>Coffee grew {FOUND_LINK.format(title, '13.1 %')}.</p>\n"
    assert "<img" not in to_html(log)


def test_a_call_id_with_odd_characters_makes_a_plain_anchor():
    log = checked_log("Coffee grew 13.1 %.", call_id='c"1 <x>')
    assert marks.call_anchor('c"1 <x>') == "shiro-call-c_1__x_"
    page = to_html(log)
    assert 'href="#shiro-call-c_1__x_"' in page and '<pre id="shiro-call-c_1__x_"' in page


def test_no_mark_goes_into_an_attribute_or_a_link_inside_a_link():
    """A link's title keeps its number unmarked (a tag there would break the attribute), and a number in a
    link's text is a titled span, not a second link."""
    answer = "![growth 16.4 %](chart.png) and [13.1 %](https://example.com/growth) and [see][r]\n\n" + (
        '[r]: https://example.com "up 16.4 %"'
    )
    log = checked_log(answer)
    answer_html = log_entry_html(log, 2)
    # an image is a link to it (issue 33): its alt text is the link's text, so its number is marked there
    assert f'<a href="chart.png">image: growth {MISSING_SPAN.format("16.4 %")}</a>' in answer_html
    assert '<a href="https://example.com" title="up 16.4 %">see</a>' in answer_html
    # in a link's text the found number is a titled span, not a second link
    assert (
        f'<a href="https://example.com/growth"><span class="shiro-number" title="{FOUND_TITLE}">13.1 %</span></a>'
    ) in answer_html
    assert not re.search("[\ue000-\uf8ff]", answer_html)
    assert [n["found"] for n in to_bundle_json(log)["numbers"]] == [False, True, False]


def test_a_number_after_a_link_is_a_link_again():
    log = checked_log("[the data](https://example.com) show 13.1 %.")
    assert log_entry_html(log, 2) == (
        f'<p><a href="https://example.com">the data</a> show {FOUND_LINK.format(FOUND_TITLE, "13.1 %")}.</p>\n'
    )


def test_private_use_characters_of_the_answer_are_not_taken_for_marks():
    answer = "a \ue000 b 13.1 % c \ue000\ue001\uec80 d 3 %"
    log = checked_log(answer)
    answer_html = log_entry_html(log, 2)
    assert answer_html == (
        f"<p>a \ufffd b {FOUND_LINK.format(FOUND_TITLE, '13.1 %')} c \ufffd\ufffd\ufffd d {MISSING_SPAN.format('3 %')}</p>\n"
    )
    assert to_text(log).split("\n\n")[2] == "a \ufffd b 13.1 % c \ufffd\ufffd\ufffd d 3 %⚠"


def test_code_the_number_is_alone_in_gets_the_mark_after_it_and_fenced_code_none():
    answer = "Growth: `16.4 %` and `` 3 % ``.\n\n```python\nprint(0.731)  # 16.4 %\n```\n"
    log = checked_log(answer)
    assert [n["text"] for n in to_bundle_json(log)["numbers"]] == ["16.4 %", "3 %"]
    md = to_markdown(log).split("\n\n")
    assert md[2] == "Growth: `16.4 %`⚠ and `` 3 % ``⚠."
    assert md[3] == "```python\nprint(0.731)  # 16.4 %\n```"
    assert MISSING_SPAN.format("16.4 %") in log_entry_html(log, 2)  # in HTML, a span inside the <code>
    assert "<code>" + MISSING_SPAN.format("16.4 %") + "</code>" in log_entry_html(log, 2)


# -- where the numbers come from --------------------------------------------------------------------------------


def test_offsets_that_do_not_fit_the_logs_answer_are_moved_or_dropped():
    numbers = [
        {"text": "13.1 %", "found": True, "call_id": "c", "start": 0, "end": 6, "line": "x"},
        {"text": "2.5", "found": False, "call_id": None, "start": 3, "end": 6, "line": None},
        {"text": "9.75", "found": False, "call_id": None, "start": 30, "end": 34, "line": None},
    ]
    got = marks.aligned("Coffee 13.1 %, tea 2.5.", numbers)
    assert [(n["start"], n["end"]) for n in got] == [(7, 13), (19, 22), (None, None)]
    log = TurnLog()
    log.feed(TextDelta("Coffee 13.1 %, tea 2.5."))
    log.feed(NumbersChecked(numbers))
    log.feed(TurnEnd("answered", Usage(1, 1, None)))
    # the one that fits nowhere is not marked, and still counts
    assert (
        to_text(log) == "Coffee 13.1 %, tea 2.5⚠.\n\n⚠ 2 numbers not found in this turn's outputs · 1 in · 1 out tokens"
    )


def test_turn_numbers_follows_the_last_block_of_text_as_the_log_does():
    events: list[Event] = [
        TextDelta("first 1,234"),
        Notice("context compacted", kind="compacted"),
        TextDelta("after the notice 5,678"),
        *turn_events("final 13.1 %")[1:],
    ]
    numbers, log = TurnNumbers(), TurnLog()
    for event in events:
        numbers.feed(event)
        log.feed(event)
        assert numbers.answer == log.answer
    assert numbers.answer == "final 13.1 %"
    assert [(n["text"], n["found"]) for n in numbers.check(PROMPT)] == [("13.1 %", True)]


def test_turn_numbers_gives_what_the_cold_check_gives_and_exempts_the_calls_arguments():
    call = ToolCallPart("call_1", "python", json.dumps({"code": "big = orders[orders.total > 1000]\nbig.total.mean()"}))
    result = ToolResultPart("call_1", "python", "234.51")
    answer = "Orders above $1,000 average 234.5; the rest 98.25."
    numbers = TurnNumbers()
    for event in [ToolStart(call), ToolEnd(call, result, 0.1), TextDelta(answer)]:
        numbers.feed(event)
    assert numbers.check("orders?") == [
        {"text": "234.5", "found": True, "call_id": "call_1", "start": 28, "end": 33, "line": "234.51"},
        {"text": "98.25", "found": False, "call_id": None, "start": 44, "end": 49, "line": None},
    ]
    # the same as the cold check, with the call's code as the turn's own input
    assert numbers.check("orders?") == check_turn(answer, "orders?", [result], inputs=[call_inputs(call)])
    assert check_turn(answer, "orders?", [result])[0]["text"] == "$1,000"  # not exempt without it


def test_call_inputs_reads_the_arguments_values_not_the_json():
    call = ToolCallPart("c", "python", json.dumps({"code": "x = 1\nx > 1000", "n": 2500, "opts": {"k": ["7,500"]}}))
    assert call_inputs(call).splitlines() == ["x = 1", "x > 1000", "2500", "7,500"]
    assert call_inputs(ToolCallPart("c", "python", "not json 1500")) == "not json 1500"


def test_a_refused_calls_text_is_not_a_source():
    call = ToolCallPart("call_1", "shell", json.dumps({"command": "ls"}))
    refusal = ToolResultPart("call_1", "shell", "Error: not approved — waited 600 s", is_error=True, refused=True)
    numbers = TurnNumbers()
    for event in [ToolStart(call), ToolEnd(call, refusal, 0.0), TextDelta("It took 600 s.")]:
        numbers.feed(event)
    assert [(n["text"], n["found"]) for n in numbers.check("")] == [("600", False)]


def test_no_answer_no_numbers():
    numbers = TurnNumbers()
    numbers.feed(TextDelta("   "))
    assert numbers.check("") == [] and numbers.event("").numbers == []


def test_for_turn_reads_the_answer_and_results_from_the_messages():
    call = ToolCallPart("call_growth", "python", json.dumps({"code": "print(growth)"}))
    result = ToolResultPart("call_growth", "python", ISSUE_OUTPUT)
    messages = [
        Message.user(PROMPT),
        Message("assistant", [TextPart("Computing."), call]),
        Message("tool", [result]),
        Message("assistant", [TextPart(ISSUE_ANSWER)]),
    ]
    expected = check_turn(ISSUE_ANSWER, PROMPT, [result], inputs=["print(growth)"])
    assert for_turn(messages, PROMPT) == expected
    assert [n["text"] for n in expected] == ["+16.4 %", "3 %"]
    assert for_turn(messages, PROMPT, OutputIndex([result])) == expected
    assert for_turn(messages[:3], PROMPT) == []  # "Computing." holds no number
    assert for_turn([Message.user("x")], "x") == []


def test_the_setting_is_on_by_default_and_documented():
    config = Shiro()
    assert config.check_numbers is True
    trait = Shiro.class_traits()["check_numbers"]
    assert trait.metadata.get("config") is True
    assert "False: no check" in trait.help


@pytest.mark.parametrize("count", [0, 1, 40])
def test_many_numbers_are_each_marked(count):
    answer = " ".join(f"value {i}.25 %" for i in range(count))
    log = TurnLog()
    log.feed(TextDelta(answer))
    log.feed(NumbersChecked(check_turn(answer, "", [])))
    assert log_entry_html(log, 0).count("shiro-number-missing") == count
    assert to_text(log).count("⚠") == count


# -- a number the model disguised is checked in what the reader sees (issue 33, point 8) ---------------------

#: "16.4 %" written so that it reads 16.4 % rendered but is not those characters in the source
DISGUISED = {
    "decimal references": "&#49;&#54;&#46;&#52; %",
    "hex references": "&#x31;&#x36;&#x2e;&#x34;&#x25;",
    "named references": "16&period;4&percnt;",
    "references without ;": "<b>&#49</b>6&#46<b>4</b>&#37",
    "zero-width spaces": "1\u200b6\u200b.\u200b4\u200b%",
    "word joiners": "1\u20606.\u20604\u2060%",
    "soft hyphens": "16\u00ad.\u00ad4\u00ad%",
    "bidi controls": "1\u202c6\u202c.\u202c4\u202c%",
    "variation selectors": "1\ufe0f6\ufe0f.\ufe0f4\ufe0f%",
    "referenced zero-width spaces": "1&#8203;6&#8203;.&#8203;4&#8203;%",
    "empty tags": "1<b></b>6<i></i>.<b></b>4<b></b>%",
    "comments": "1<!-- x > y -->6<!---->.<!-- -->4<!-- -->%",
    "emphasis": "1**6**.*4*%",
    "code spans": "1`6`.`4`%",
    "escapes": "16\\.4\\%",
    "wide forms": "１６．４％",
}
INVISIBLE_CATEGORIES = ("Cf", "Mn", "Me")


def seen(html_text: str) -> str:
    """What a reader sees of an HTML rendering: text between tags, references decoded, characters no one
    sees gone, wide forms read as plain."""
    text = "".join(html.unescape(run) for run in re.split(r"<!--.*?-->|<[^>]*>", html_text, flags=re.S))
    text = "".join(c for c in text if unicodedata.category(c) not in INVISIBLE_CATEGORIES)
    return unicodedata.normalize("NFKC", text)


def unmarked(reader_text: str) -> list[str]:
    """Each 16.4 the reader sees with no ⚠ right after it (its %, spaces and closing markup between)."""
    return [m.group() for m in re.finditer(r"16\.4(?![\s%]*⚠)[\s%]*", reader_text.replace("\\", ""))]


def renderings(answer: str, output: str = ISSUE_OUTPUT) -> dict[str, str]:
    """What a reader sees of the answer in each kernel rendering: text/markdown rendered by marked (as
    JupyterLab, GitHub, nbviewer render it), text/html, text/plain, and the live widget view."""
    from test_sanitize import marked  # tests/ui/test_sanitize.py: marked, as JupyterLab renders Markdown

    log = checked_log(f"Coffee grew {answer}, the most.", output)
    view = TurnView()
    numbers = TurnNumbers()
    for event in turn_events(f"Coffee grew {answer}, the most.", output):
        numbers.feed(event)
        view.feed(event)
    view.feed(numbers.event(PROMPT))
    view.feed(TurnEnd("answered", Usage(1200, 80, None)))
    return {
        "text/markdown": seen(marked([answer_of(to_markdown(log), log, 2)])[0]),
        "text/html": seen(log_entry_html(log, 2)),
        "text/plain": seen(html.escape(answer_of(to_text(log), log, 2))),
        "live widgets": seen(view.entries.children[2].value),
    }


@pytest.mark.parametrize("way", list(DISGUISED))
def test_a_disguised_number_is_checked_and_marked_in_every_rendering(way):
    answer = DISGUISED[way]
    log = checked_log(f"Coffee grew {answer}, the most.")
    numbers = to_bundle_json(log)["numbers"]
    # the answer reads 16.4 % rendered; one number, not found, its text the answer's as written from its
    # first digit to its % (so that it is marked there)
    assert re.sub(r"[\\*` ]", "", seen(answer)) == "16.4%"
    assert [n["found"] for n in numbers] == [False] and answer.rstrip("\u202c").endswith(numbers[0]["text"])
    assert numbers_line(numbers) == "⚠ 1 number not found in this turn's outputs"
    for name, text in renderings(answer).items():
        assert text.count("⚠") == 1 and not unmarked(text), (name, text)


def test_disguised_numbers_escape_no_rendering():
    """The figure for docs/reliability.md: each disguise in each kernel rendering."""
    escaped = [
        f"{way} in {name}"
        for way, answer in DISGUISED.items()
        for name, text in renderings(answer).items()
        if text.count("⚠") != 1 or unmarked(text)
    ]
    record(
        "security: numbers the model disguised (references, zero-width and format characters, markup between "
        "digits) in the kernel's Markdown, HTML, text and live widgets",
        4 * len(DISGUISED),
        len(escaped),
        f"{len(DISGUISED)} ways of writing 16.4 % that render as 16.4 %, each in 4 renderings; {len(escaped)} "
        "showed no ⚠",
    )
    assert not escaped, escaped


def test_a_disguised_number_found_in_an_output_is_found():
    log = checked_log("Coffee grew 1\u200b3.1 %, tea &#53;.0 %.")
    assert [(n["text"], n["found"]) for n in to_bundle_json(log)["numbers"]] == [
        ("1\u200b3.1 %", True),
        ("&#53;.0 %", True),
    ]
    assert FOUND_LINK.format(FOUND_TITLE, "1\u200b3.1 %") in log_entry_html(log, 2)


def test_a_markdown_link_cannot_pass_for_a_found_number():
    """A found number's mark is a link to its tool row titled with where it was found: the model's own link
    there, with such a title, keeps neither (and its number is marked as any other)."""
    forged = f'[16.4 %](#shiro-call-call_growth "{FOUND_TITLE}") and [13.1 %](https://example.com "about it")'
    answer_html = log_entry_html(checked_log(forged), 2)
    assert answer_html.count('href="#shiro-call-') == 0 and answer_html.count(f'title="{FOUND_TITLE}"') == 1
    assert f'<a href="#">{MISSING_SPAN.format("16.4 %")}</a>' in answer_html
    assert '<a href="https://example.com" title="about it"><span class="shiro-number"' in answer_html
