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
