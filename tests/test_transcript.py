import json

import pytest

from shiro_kernel.transcript import (
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    messages_from_json,
    messages_to_json,
)


def sample() -> list[Message]:
    return [
        Message.system("be brief"),
        Message.user("what is the mean of df.x?"),
        Message(
            "assistant",
            [
                ReasoningPart(["thinking about it", "second part"], "gAAAA-enc", item_id="rs_1", meta={"k": 1}),
                TextPart("Let me compute.", item_id="msg_1", meta={"phase": "commentary"}),
                ToolCallPart("call_1", "python", '{"code": "df.x.mean()"}', item_id="fc_1"),
            ],
        ),
        Message(
            "tool",
            [
                ToolResultPart("call_1", "python", "2.0"),
                ToolResultPart("call_2", "shell", "Error: boom", is_error=True, meta={"x": [1, 2]}),
            ],
        ),
        Message("assistant", [TextPart("The mean is 2.0.", item_id="msg_2", meta={"phase": "final_answer"})]),
    ]


def test_lossless_json_round_trip():
    messages = sample()
    data = json.loads(json.dumps(messages_to_json(messages)))
    assert messages_from_json(data) == messages
    # and the JSON itself is stable under a second trip
    assert messages_to_json(messages_from_json(data)) == data


def test_json_shape_is_documented_form():
    data = messages_to_json(sample())
    assert data[2]["parts"][1] == {
        "type": "text",
        "text": "Let me compute.",
        "itemId": "msg_1",
        "meta": {"phase": "commentary"},
    }
    assert data[2]["parts"][2]["callId"] == "call_1"
    assert data[3]["parts"][1]["isError"] is True
    assert "itemId" not in data[3]["parts"][0]  # no id: no key at all


def test_helpers():
    msgs = sample()
    assert msgs[2].text == "Let me compute."
    assert [c.call_id for c in msgs[2].tool_calls()] == ["call_1"]
    assert msgs[2].parts[0].text == "thinking about it\n\nsecond part"


@pytest.mark.parametrize(
    "bad", [42, {"role": "robot"}, {"role": "user", "parts": "x"}, {"role": "user", "parts": [{"type": "video"}]}]
)
def test_bad_input_is_a_clear_error(bad):
    with pytest.raises(ValueError):
        Message.from_json(bad)


@pytest.mark.parametrize("args,ok", [('{"a": 1}', True), ("", True), ("{not json", False), ("[1]", False)])
def test_parsed_arguments(args, ok):
    call = ToolCallPart("c", "t", args)
    if ok:
        assert isinstance(call.parsed_arguments(), dict)
    else:
        with pytest.raises(ValueError):
            call.parsed_arguments()


def _trip(part: ToolResultPart) -> tuple[dict, ToolResultPart]:
    """``part`` as a record holds it (through JSON text), and as it is read back."""
    data = json.loads(json.dumps(messages_to_json([Message("tool", [part])])))
    back = messages_from_json(data)[0].parts[0]
    assert isinstance(back, ToolResultPart)
    return data[0]["parts"][0], back


def test_refused_and_stopped_are_fields_saved_only_when_true():
    refused = ToolResultPart("c1", "write_file", "Error: not approved — the user denied it", True, refused=True)
    stopped = ToolResultPart("c2", "python", "Error: not run — the user stopped the turn before this call ran.", True)
    stopped.stopped = True
    plain = ToolResultPart("c3", "python", "2.0")
    saved, back = _trip(refused)
    assert saved["refused"] is True and "stopped" not in saved and back == refused and back.refused
    saved, back = _trip(stopped)
    assert saved["stopped"] is True and "refused" not in saved and back == stopped and back.stopped
    saved, back = _trip(plain)
    assert not {"isError", "refused", "stopped"} & set(saved) and back == plain


def test_a_record_written_before_the_flags_is_read_by_the_text_rule_of_its_time():
    old = [
        {
            "type": "tool_result",
            "callId": "a",
            "name": "python",
            "output": "Error: not approved — denied",
            "isError": True,
        },
        {
            "type": "tool_result",
            "callId": "b",
            "name": "python",
            "output": "Error: interrupted after 2.0 s — the user "
            "stopped the turn while this call ran; its output so far:\n1",
        },
        {
            "type": "tool_result",
            "callId": "c",
            "name": "shell",
            "output": "Error: not run — the kernel restarted before this call ran.",
        },
        {"type": "tool_result", "callId": "d", "name": "shell", "output": "Error: timed out after 5 s"},
    ]
    parts = messages_from_json([{"role": "tool", "parts": old}])[0].tool_results()
    assert [(p.is_error, p.refused, p.stopped) for p in parts] == [
        (True, True, False),
        (True, False, True),
        (True, False, True),
        (True, False, False),
    ]


def test_a_result_that_only_reads_like_a_refusal_or_an_error_stays_what_it_was():
    # a tool's own failure whose text happens to start like a refusal, and code that printed such lines
    failed = ToolResultPart("a", "mcp__x__y", "Error: not approved — the server's own words", True)
    printed = ToolResultPart("b", "python", "Error: not approved — printed by the user's code")
    stop_like = ToolResultPart("c", "python", "Error: not run — x before this call ran.")
    for part in (failed, printed, stop_like):
        saved, back = _trip(part)
        assert back == part, saved
        assert not back.refused and not back.stopped
    assert not _trip(printed)[1].is_error  # printed text is never taken for a failure on load
