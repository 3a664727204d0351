"""A long session against the strict fake OpenAI server: 300 tool steps in one turn, reasoning in
every reply, a small pruning threshold (so the reasoning strip, the keep-tail ladder and the digest
happen on most steps), with ``store`` on and off. The fake enforces the real history rules and the
OpenAPI request schema on every request, so a single broken wire copy shows up as a 400/404."""

from __future__ import annotations

import json
import re

import pytest
from fakeopenai import Call, Reply
from turnutil import KEY

from shiro_kernel.events import Notice
from shiro_kernel.provider.client import Provider, ProviderSettings
from shiro_kernel.session import Session
from shiro_kernel.tools import Effect, Tool, ToolContext
from shiro_kernel.tools.base import schema
from shiro_kernel.transcript import ReasoningPart
from shiro_kernel.turn import Turn, TurnOptions

STEPS = 300
THOUGHT = "weighing the next echo "
REASONING = re.compile(
    r"^context compacted: earlier reasoning left out of the request \(([\d,]+) → ([\d,]+) estimated tokens\); "
    r"all (\d+) messages kept$"
)

SAMPLE = 20  # the OpenAPI schema check runs on every SAMPLE-th request (see `tools`)


def tools(fake):
    """A cheap tool (no I/O, a short deterministic answer) that also picks which requests the fake
    validates against the OpenAPI spec. Validating all 301 bodies costs ~110 ms each here (~40 s per
    parametrisation), far over the ~20 s budget, so the schema check runs on the first request, every
    SAMPLE-th one and the last few; the history rules (the 400/404 this test is about) are enforced
    by the fake on every request regardless of ``validate``."""

    def echo(args, ctx):
        n = args["n"]
        fake.validate = (n + 1) % SAMPLE == 0 or n >= STEPS - 3  # for the request after this result
        return f"echo {n}\n" + "payload line\n" * 4

    return {"echo": Tool("echo", "Echo a number back.", schema({"n": {"type": "integer"}}), echo, effects=Effect.READS)}


@pytest.fixture
def env(monkeypatch, fake_openai):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    return fake_openai


def run_turn(fake, tmp_path, session, prompt, *, store, threshold, max_steps):
    provider = Provider(
        ProviderSettings(
            model="gpt-5-mini",
            api="responses",
            base_url=fake.base_url,
            store=store,
            stream=True,
            max_retries=0,
            timeout_s=10.0,
        )
    )
    events: list = []
    turn = Turn(
        session,
        provider,
        tools(fake),
        ToolContext(root=tmp_path),
        "You are a test.",
        TurnOptions(approval="auto", max_steps=max_steps, compact_threshold=threshold, store=store),
        observers=[events.append],
    )
    return turn.run(prompt), events


@pytest.mark.parametrize("store", [True, False], ids=["store", "no-store"])
def test_300_step_session_never_breaks_the_wire(env, tmp_path, store):
    assert env.validate  # the first request is schema-checked; `tools` samples the rest
    env.enqueue(
        *[Reply(reasoning=THOUGHT * 8, text=f"step {i}", tool_calls=[Call("echo", {"n": i})]) for i in range(STEPS)],
        Reply(reasoning=THOUGHT, text="all echoed"),
    )
    session = Session()
    end, events = run_turn(
        env, tmp_path, session, "echo 0..299, one call per step", store=store, threshold=1_200, max_steps=STEPS + 5
    )
    assert end.reason == "answered", end.error

    # zero 400/404: every one of the 301 requests was accepted as it was first sent
    statuses = [r.status for r in env.requests]
    assert len(statuses) == STEPS + 1
    assert statuses.count(400) == statuses.count(404) == 0
    assert statuses == [200] * (STEPS + 1)

    # pruning really happened over and over: the ladder (a digest) on late requests, and with the
    # threshold this small, reasoning never went out once the history outgrew it
    pruned = sum("[context pruned:" in json.dumps(r.body["input"]) for r in env.requests)
    assert pruned > STEPS // 2
    for rec in env.requests[-50:]:
        sent = json.dumps(rec.body["input"])
        assert THOUGHT not in sent and "item_reference" not in sent
        assert '"type": "reasoning"' not in sent
    if not store:
        assert all(r.body.get("store") is False for r in env.requests)

    # exactly one `compacted` notice for the turn, before its end
    compacted = [e for e in events if isinstance(e, Notice) and e.kind == "compacted"]
    assert len(compacted) == 1
    # the notice is the first compaction's: the history just outgrew the threshold, and leaving earlier
    # reasoning out was enough (all messages kept)
    reasoning_match = REASONING.match(compacted[0].text)
    assert reasoning_match is not None, compacted[0].text
    tokens_before, tokens_after = (int(g.replace(",", "")) for g in reasoning_match.groups()[:2])
    assert tokens_before > tokens_after > 0

    # the session's own history is complete: every reasoning item, call and result, in order
    msgs = session.messages
    calls = [c for m in msgs for c in m.tool_calls()]
    results = [r for m in msgs for r in m.tool_results()]
    assert [c.parsed_arguments()["n"] for c in calls] == list(range(STEPS))
    assert [r.call_id for r in results] == [c.call_id for c in calls]
    assert [r.output.splitlines()[0] for r in results] == [f"echo {i}" for i in range(STEPS)]
    assert sum(isinstance(p, ReasoningPart) for m in msgs for p in m.parts) == STEPS + 1
    assert msgs[-1].text == "all echoed"

    # a second turn in the same session: again one notice, again no 400/404
    env.enqueue(Reply(reasoning=THOUGHT, tool_calls=[Call("echo", {"n": STEPS})]), Reply(text="done"))
    end2, events2 = run_turn(env, tmp_path, session, "one more", store=store, threshold=1_200, max_steps=5)
    assert end2.reason == "answered", end2.error
    assert [r.status for r in env.requests[STEPS + 1 :]] == [200, 200]
    assert len([e for e in events2 if isinstance(e, Notice) and e.kind == "compacted"]) == 1
    assert sum(len(m.tool_calls()) for m in session.messages) == STEPS + 1
