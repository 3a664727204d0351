"""The validator run on every outgoing request: each rule, its repair line, and the healthy fast path."""

from __future__ import annotations

import copy

from shiro_kernel.context.rules import NEVER_ANSWERED, check_and_repair, notable
from shiro_kernel.transcript import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart


def call(cid: str, name: str = "python", item_id: str | None = None) -> ToolCallPart:
    return ToolCallPart(cid, name, "{}", item_id=item_id)


def result(cid: str, name: str = "python", out: str = "ok") -> ToolResultPart:
    return ToolResultPart(cid, name, out)


def healthy_history(n: int = 10) -> list[Message]:
    msgs = [Message.user("go")]
    for i in range(n):
        msgs.append(
            Message(
                "assistant",
                [
                    ReasoningPart(["r"], "enc", item_id=f"rs_{i}"),
                    TextPart("t", item_id=f"msg_{i}"),
                    call(f"c{i}", item_id=f"fc_{i}"),
                ],
            )
        )
        msgs.append(Message("tool", [result(f"c{i}")]))
    return msgs


def test_healthy_history_returns_the_identical_list():
    msgs = healthy_history()
    out, repairs = check_and_repair(msgs, store=True)
    assert out is msgs and repairs == []


def test_store_off_with_encrypted_reasoning_only_is_healthy():
    msgs = [Message.user("go"), Message("assistant", [ReasoningPart(["r"], "enc", item_id="rs_1"), TextPart("t")])]
    out, repairs = check_and_repair(msgs, store=False)
    assert out is msgs and repairs == []


def test_result_without_its_call_is_dropped():
    msgs = [
        Message.user("go"),
        Message("assistant", [call("c1")]),
        Message("tool", [result("c0", "grep"), result("c1")]),
        Message("tool", [result("c9", "read_file")]),
    ]
    snapshot = copy.deepcopy(msgs)
    out, repairs = check_and_repair(msgs, store=True)
    assert repairs == [
        "dropped a tool result whose call is missing (grep, c0)",
        "dropped a tool result whose call is missing (read_file, c9)",
    ]
    assert [m.role for m in out] == ["user", "assistant", "tool"]
    assert [r.call_id for r in out[2].tool_results()] == ["c1"]
    assert msgs == snapshot  # the input is not mutated


def test_unanswered_call_gets_an_error_result():
    msgs = [
        Message.user("go"),
        Message("assistant", [call("c1"), call("c2", "grep")]),
        Message("tool", [result("c1")]),
        Message.user("next"),
        Message("assistant", [TextPart("hi")]),
    ]
    out, repairs = check_and_repair(msgs, store=True)
    assert repairs == ["answered a call that never got a result (grep, c2)"]
    assert [r.output for r in out[2].tool_results()] == ["ok", NEVER_ANSWERED]
    assert out[2].tool_results()[1].is_error


def test_unanswered_call_with_no_tool_message_gets_one_inserted():
    msgs = [Message.user("go"), Message("assistant", [call("c1")]), Message.user("hello?")]
    out, repairs = check_and_repair(msgs, store=True)
    assert [m.role for m in out] == ["user", "assistant", "tool", "user"]
    assert out[2].tool_results()[0].output == NEVER_ANSWERED
    assert repairs == ["answered a call that never got a result (python, c1)"]


def test_pending_approval_is_kept():
    msgs = [
        Message.user("go"),
        Message("assistant", [call("c1"), call("c2", "write_file")]),
        Message("tool", [result("c1")]),
    ]  # c2 waits for approval; only its partial results follow
    out, repairs = check_and_repair(msgs, store=True)
    assert out is msgs and repairs == []
    out, repairs = check_and_repair(msgs, store=True, keep_pending=False)
    assert repairs == ["answered a call that never got a result (write_file, c2)"]


def test_a_call_is_not_pending_when_something_else_follows():
    msgs = [Message.user("go"), Message("assistant", [call("c1", "write_file")]), Message.user("more")]
    out, repairs = check_and_repair(msgs, store=True)
    assert repairs == ["answered a call that never got a result (write_file, c1)"]


def test_reasoning_that_lost_its_id_detaches_the_message():
    msgs = [
        Message.user("go"),
        Message(
            "assistant",
            [ReasoningPart(["r"]), TextPart("t", item_id="msg_1", meta={"phase": "x"}), call("c1", item_id="fc_1")],
        ),
        Message("tool", [result("c1")]),
    ]
    out, repairs = check_and_repair(msgs, store=True)
    assert repairs == ["sent 1 assistant message inline: its reasoning item is missing"]
    assert all(p.item_id is None for p in out[1].parts) and len(out[1].parts) == 3
    assert out[1].parts[1].meta == {"phase": "x"}
    assert msgs[1].parts[1].item_id == "msg_1"


def test_store_off_detaches_ids_except_encrypted_reasoning():
    msgs = [
        Message.user("go"),
        Message(
            "assistant",
            [ReasoningPart(["r"], "enc", item_id="rs_1"), TextPart("t", item_id="msg_1"), call("c1", item_id="fc_1")],
        ),
        Message("tool", [result("c1")]),
    ]
    out, repairs = check_and_repair(msgs, store=False)
    assert [p.item_id for p in out[1].parts] == ["rs_1", None, None]
    assert repairs == ["store is off: sent 2 stored item ids inline"]
    assert notable(repairs) == []  # routine: not worth a warning
