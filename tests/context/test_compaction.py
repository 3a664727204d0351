"""Compaction end to end against the strict fake OpenAI server, through the real ``openai`` client:
automatic pruning of the wire copy inside a turn, the 404 inline repair, validator repairs in a turn,
and ``/compact``."""

from __future__ import annotations

import json
import re

import pytest
from fakeopenai import Call, Reply
from turnutil import KEY, TOOLS

from shiro_kernel.context.compact import COMPACT_SYSTEM, EMPTY_SUMMARY, compact_message, compact_session
from shiro_kernel.context.rules import detach_provider_items
from shiro_kernel.errors import ProviderError
from shiro_kernel.events import Notice, Sent, TextDelta, TurnEnd
from shiro_kernel.provider.client import Provider, ProviderSettings, answer
from shiro_kernel.session import Session
from shiro_kernel.tools import ToolContext
from shiro_kernel.transcript import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from shiro_kernel.turn import INLINE_RETRY_NOTICE, Turn, TurnOptions

COMPACTED = re.compile(r"^context compacted: (\d+) messages pruned to (\d+) on the wire$")
THOUGHT = "pondering the sum very carefully "


@pytest.fixture
def env(monkeypatch, fake_openai):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return fake_openai


def provider_for(fake, *, store=True, model="gpt-5-mini", api="responses", stream=True):
    provider = Provider(
        ProviderSettings(
            model=model, api=api, base_url=fake.base_url, store=store, stream=stream, max_retries=0, timeout_s=10.0
        )
    )
    # these sessions were answered by a server that keeps items (the fake, as OpenAI: its answers said
    # "store": true), so their history refers to stored items by id
    provider.profile.keeps_state = True
    return provider


def make_turn(fake, tmp_path, *, session=None, events=None, provider=None, **options):
    options.setdefault("approval", "auto")
    return Turn(
        session or Session(),
        provider or provider_for(fake),
        TOOLS,
        ToolContext(root=tmp_path),
        "You are a test.",
        TurnOptions(**options),
        observers=[(events if events is not None else []).append],
    )


def notices(events, kind=None):
    return [e for e in events if isinstance(e, Notice) and (kind is None or e.kind == kind)]


# -- automatic pruning in a turn -----------------------------------------------------------------------
@pytest.mark.parametrize("store,api", [(True, "responses"), (False, "responses"), (True, "chat")])
def test_multi_step_pruned_turn(env, tmp_path, store, api):
    steps = 8
    env.enqueue(
        *[
            Reply(reasoning=THOUGHT * 20, text=f"step {i}", tool_calls=[Call("add", {"a": i, "b": 1})])
            for i in range(steps)
        ],
        Reply(reasoning=THOUGHT, text="finished"),
    )
    session = Session()
    session.messages.append(Message.user("earlier: read the data files"))
    for i in range(40):  # an earlier, long task in the same session
        session.messages += [
            Message("assistant", [ToolCallPart(f"call_old{i}", "read_file", json.dumps({"path": f"data/{i}.csv"}))]),
            Message("tool", [ToolResultPart(f"call_old{i}", "read_file", f"row {i}\n" * 60)]),
        ]
    events = []
    turn = make_turn(
        env,
        tmp_path,
        session=session,
        events=events,
        compact_threshold=1_500,
        provider=provider_for(env, store=store, api=api),
    )
    end = turn.run("add things up, step by step")
    assert end.reason == "answered", end.error
    # zero 400s: the fake enforces the real history rules on every request
    assert [r.status for r in env.requests] == [200] * (steps + 1)
    # exactly one `compacted` notice for the whole turn, with before > after > 0
    compacted = notices(events, "compacted")
    assert len(compacted) == 1
    before, after = map(int, COMPACTED.match(compacted[0].text).groups())
    assert before > after > 0
    assert events.index(compacted[0]) < events.index(end)
    # pruned reasoning never goes out, and nothing refers to a stored item once pruned
    for rec in env.requests:
        sent = json.dumps(rec.body.get("input") or rec.body["messages"])
        assert THOUGHT not in sent and '"reasoning"' not in sent and "item_reference" not in sent
    last = env.requests[-1].body
    sent = [m for m in last.get("input") or last["messages"] if m.get("role") != "system"]
    assert sent[0] == {"role": "user", "content": "earlier: read the data files"}
    # the digest of what was pruned, right after the first prompt
    assert sent[1]["role"] == "user"
    assert re.fullmatch(r"\[context pruned: \d+ earlier messages not shown\]", sent[1]["content"].split("\n")[0])
    # the session's own history is complete: every reasoning item, call and result is still there
    msgs = turn.session.messages
    if api == "responses":
        assert sum(isinstance(p, ReasoningPart) for m in msgs for p in m.parts) == steps + 1
    assert sum(len(m.tool_calls()) for m in msgs) == steps + 40 == sum(len(m.tool_results()) for m in msgs)
    if api == "responses":
        assert all(p.item_id for m in msgs[81:] if m.role == "assistant" for p in m.parts)


def test_small_history_is_sent_unchanged(env, tmp_path):
    env.enqueue(Reply(reasoning="hm", tool_calls=[Call("add", {"a": 1, "b": 1})]), Reply(text="2"))
    events = []
    turn = make_turn(env, tmp_path, events=events)
    assert turn.run("add").reason == "answered"
    assert notices(events) == []
    assert [i.get("type", "message") for i in env.requests[-1].body["input"]] == [
        "message",
        "item_reference",
        "item_reference",
        "function_call_output",
    ]


def test_validator_repairs_are_reported_once_and_the_fake_accepts(env, tmp_path):
    session = Session()
    session.messages += [
        Message.user("earlier"),
        Message("tool", [ToolResultPart("call_lost", "add", "3")]),
        Message("assistant", [ToolCallPart("call_x", "add", '{"a":1,"b":1}')]),
        Message.user("and then"),
    ]
    env.enqueue(Reply(tool_calls=[Call("add", {"a": 1, "b": 2})]), Reply(text="done"))
    events = []
    end = make_turn(env, tmp_path, session=session, events=events).run("go on")
    assert end.reason == "answered", end.error
    warnings = notices(events, "warning")
    assert [w.text for w in warnings] == [
        "repaired the history before sending: dropped a tool result whose call is missing (add, call_lost); "
        "answered a call that never got a result (add, call_x)"
    ]
    assert all(r.status == 200 for r in env.requests) and len(env.requests) == 2
    assert session.messages[1].tool_results()[0].call_id == "call_lost"  # the session itself is untouched


# -- the 404 repair ------------------------------------------------------------------------------------
def gone_session() -> Session:
    session = Session()
    session.messages += [
        Message.user("yesterday's question"),
        Message("assistant", [TextPart("yesterday's answer", item_id="msg_gone", meta={"phase": "final_answer"})]),
    ]
    return session


def test_404_for_a_lost_item_rewrites_inline_and_retries_once(env, tmp_path):
    env.enqueue(Reply(text="carried on"))
    session = gone_session()
    events = []
    end = make_turn(env, tmp_path, session=session, events=events).run("and today?")
    assert end.reason == "answered", end.error
    assert [r.status for r in env.requests] == [404, 200]  # exactly 2 requests
    kinds = [type(e).__name__ for e in events if not isinstance(e, (TextDelta, Sent))]  # Sent: the ledger's
    assert kinds[:2] == ["StepStart", "Notice"] and kinds[-1] == "TurnEnd"
    assert notices(events) == [Notice(INLINE_RETRY_NOTICE)]
    assert any(isinstance(e, TextDelta) for e in events)
    # the session's own history went inline (content and other meta kept)
    part = session.messages[1].parts[0]
    assert part.item_id is None and part.text == "yesterday's answer" and part.meta == {"phase": "final_answer"}
    assert "item_reference" not in json.dumps(env.requests[1].body["input"])


def test_repeated_404_is_an_error_after_two_calls(env, tmp_path):
    env.enqueue_error(404, "Item with id 'msg_a' not found.")
    env.enqueue_error(404, "Item with id 'msg_b' not found.")
    events = []
    end = make_turn(env, tmp_path, events=events).run("hi")
    assert len(env.requests) == 2
    assert end.reason == "error" and "Item with id 'msg_b' not found" in end.error
    assert [type(e).__name__ for e in events if isinstance(e, (Notice, TurnEnd))] == ["Notice", "TurnEnd"]


class TextFirst:
    """A provider that has already shown some text when the real server's 404 arrives."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.store = inner.store
        self.threshold = inner.threshold

    def stream(self, system, messages, tools, abort=None, state="", resend=None):
        yield TextDelta("Let me look")
        yield from self.inner.stream(system, messages, tools, abort, state, resend)  # the inner call repairs


def test_404_after_streamed_text_is_an_error_not_a_retry(env, tmp_path):
    events = []
    turn = make_turn(env, tmp_path, session=gone_session(), events=events, provider=TextFirst(provider_for(env)))
    end = turn.run("and today?")
    assert end.reason == "error" and "Item with id 'msg_gone' not found" in end.error
    assert len(env.requests) == 1
    assert notices(events) == []
    assert turn.session.messages[1].parts[0].item_id == "msg_gone"  # not rewritten


class Lost:
    """A history as the provider's retry loop repairs it (:class:`~shiro_kernel.provider.client.Resend`)."""

    def __init__(self, session: Session) -> None:
        self.session, self.asked = session, []

    def wire_messages(self):
        self.asked.append("messages")
        return list(self.session.messages)

    def estimate(self, messages):
        return 0

    def inline_history(self):
        self.asked.append("inline")
        self.session.messages[:] = detach_provider_items(self.session.messages)
        return True

    def fits_window(self, room, window):
        return False


def test_the_provider_repairs_a_lost_item_in_its_own_retry_loop(env):
    session = gone_session()
    session.append(Message.user("and today?"))
    history = Lost(session)
    env.enqueue(Reply(text="carried on"))
    said = answer(provider_for(env).stream("You are a test.", list(session.messages), [], resend=history))
    assert said.text == "carried on" and [r.status for r in env.requests] == [404, 200]
    assert history.asked == ["inline", "messages"]  # inline, then the history as it goes out now
    assert "item_reference" not in json.dumps(env.requests[1].body["input"])
    # with no history to repair through (a call outside a turn, as /compact's), the lost item is the call's error
    with pytest.raises(ProviderError, match="not found"):
        answer(provider_for(env).stream("You are a test.", list(gone_session().messages), []))
    assert [r.status for r in env.requests] == [404, 200, 404]


def test_404_for_an_unknown_model_is_not_repaired(env, tmp_path):
    env.enqueue_error(404, "The model 'gpt-nope' does not exist or you do not have access to it.")
    events = []
    end = make_turn(env, tmp_path, events=events).run("hi")
    assert end.reason == "error" and len(env.requests) == 1 and notices(events) == []


# -- /compact -----------------------------------------------------------------------------------------
def long_session(env, tmp_path) -> Session:
    env.enqueue(
        Reply(reasoning="hm", text="adding", tool_calls=[Call("add", {"a": 1, "b": 2})]), Reply(text="It is 3.")
    )
    turn = make_turn(env, tmp_path)
    assert turn.run("what is 1 + 2?").reason == "answered"
    turn.session.append(Message.user("now write it to a.py"))
    turn.session.append(Message("assistant", [ToolCallPart("call_wait", "write", '{"x":"3"}')]))  # pending
    return turn.session


def test_compact_replaces_the_history_with_one_summary(env, tmp_path):
    session = long_session(env, tmp_path)
    before = len(session.messages)
    env.enqueue(Reply(text="- goal: add 1 and 2\n- outcome: 3\n- remains: write a.py"))
    result = compact_session(session, provider_for(env))
    assert result == (before, 1)
    assert compact_message(*result) == f"compacted {before} messages into 1"
    assert [m.role for m in session.messages] == ["user"]
    assert session.messages[0].text == (
        "Summary of the session so far:\n\n- goal: add 1 and 2\n- outcome: 3\n- remains: write a.py"
    )
    body = env.requests[-1].body
    assert body["instructions"] == COMPACT_SYSTEM and "tools" not in body
    assert env.requests[-1].status == 200


@pytest.mark.parametrize("failure", ["empty", "error"])
def test_failed_compact_leaves_the_history_untouched(env, tmp_path, failure):
    session = long_session(env, tmp_path)
    snapshot = [m.to_json() for m in session.messages]
    if failure == "empty":
        env.enqueue(Reply(text=""))
    else:
        env.enqueue_error(400, "This model's maximum context length was exceeded.")
    with pytest.raises(ProviderError) as info:
        compact_session(session, provider_for(env))
    error = str(info.value)
    assert error == EMPTY_SUMMARY if failure == "empty" else "maximum context length" in error
    assert [m.to_json() for m in session.messages] == snapshot


def test_compact_of_an_empty_history(env):
    assert compact_session(Session(), provider_for(env)) == (0, 0)
    assert env.requests == []


def test_compact_system_prompt_is_the_seeds():
    assert COMPACT_SYSTEM == (
        "Summarize this coding session for use as the sole context of a fresh session. Keep: the user goal, "
        "files touched with paths, decisions made, commands run and their outcome, and what remains to be done. "
        "Drop pleasantries and full file contents. Write it as notes, not prose."
    )
