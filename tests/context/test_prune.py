"""Automatic pruning of the wire copy (shiro-neko test/prune.test.ts, ported) and its extras:
the incremental meter, the status-bar label, and the digest of what was pruned."""

from __future__ import annotations

import copy
import json
import random
from dataclasses import replace

import pytest
from prune_oracle import rung

from shiro_kernel.context.digest import pruned_digest
from shiro_kernel.context.estimate import estimate_tokens, percent
from shiro_kernel.context.limits import WIRE_RESULT_CHARS, limit_images, limit_sizes
from shiro_kernel.context.meter import TokenMeter, wire_ready
from shiro_kernel.context.prune import LADDER, prune_to_fit
from shiro_kernel.context.rules import answered_only, check_and_repair, detach_provider_items, pending_calls
from shiro_kernel.transcript import (
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    messages_to_json,
)
from shiro_kernel.ui.context_label import meter_label


# -- builders -------------------------------------------------------------------------------------
def step(
    i: int,
    *,
    reasoning: int = 0,
    output: int = 10,
    text: str = "",
    name: str = "python",
    args: dict | None = None,
    ids: bool = True,
    error: bool = False,
) -> list[Message]:
    parts = []
    if reasoning:
        parts.append(ReasoningPart(["r" * reasoning], "enc" if ids else None, item_id=f"rs_{i}" if ids else None))
    if text:
        parts.append(TextPart(text, item_id=f"msg_{i}" if ids else None, meta={"phase": "commentary"}))
    parts.append(
        ToolCallPart(f"call_{i}", name, json.dumps(args or {"code": f"x = {i}"}), item_id=f"fc_{i}" if ids else None)
    )
    out = "Error: boom" if error else "o" * output
    return [Message("assistant", parts), Message("tool", [ToolResultPart(f"call_{i}", name, out, is_error=error)])]


def history(steps: int, **kw) -> list[Message]:
    msgs = [Message.user("first prompt: analyse the data")]
    for i in range(steps):
        msgs += step(i, **kw)
    msgs.append(Message("assistant", [TextPart("all done", item_id="msg_end")]))
    return msgs


def random_history(rng: random.Random) -> list[Message]:
    msgs = [Message.user("first prompt")]
    n = rng.randint(1, 120)
    call = 0
    for _ in range(n):
        r = rng.random()
        if r < 0.1:
            msgs.append(Message.user("another prompt " * rng.randint(1, 5)))
            continue
        parts = []
        if rng.random() < 0.5:
            parts.append(ReasoningPart(["think " * rng.randint(1, 50)], "enc", item_id=f"rs_{call}"))
        if rng.random() < 0.4:
            parts.append(TextPart("say " * rng.randint(1, 30), item_id=f"msg_{call}"))
        calls = [
            ToolCallPart(
                f"call_{call}_{k}",
                rng.choice(["python", "read_file", "grep"]),
                json.dumps({"path": f"f{k}.py"}),
                item_id=f"fc_{call}_{k}",
            )
            for k in range(rng.randint(0, 3))
        ]
        parts += calls
        call += 1
        if not parts:
            continue
        msgs.append(Message("assistant", parts))
        if calls:
            results = [ToolResultPart(c.call_id, c.name, "out " * rng.randint(1, 200)) for c in calls]
            if len(results) > 1 and rng.random() < 0.3:  # results split over two tool messages
                msgs.append(Message("tool", results[:1]))
                msgs.append(Message("tool", results[1:]))
            else:
                msgs.append(Message("tool", results))
    if rng.random() < 0.3:  # a call waiting for approval at the end
        msgs.append(Message("assistant", [ToolCallPart("call_pending", "write_file", "{}", item_id="fc_p")]))
    return msgs


def stranded(messages: list[Message]) -> list[str]:
    """Tool results whose call does not come before them."""
    seen: set[str] = set()
    bad = []
    for m in messages:
        seen.update(c.call_id for c in m.tool_calls())
        bad += [r.call_id for r in m.tool_results() if r.call_id not in seen]
    return bad


def all_ids(messages: list[Message]) -> list[str]:
    return [p.item_id for m in messages for p in m.parts if p.item_id]


# -- estimate and meter ---------------------------------------------------------------------------
def test_estimate_is_json_length_over_four():
    msgs = history(5, reasoning=100)
    assert estimate_tokens(msgs) == round(len(json.dumps(messages_to_json(msgs))) / 4)
    assert estimate_tokens([]) == round(2 / 4)


def test_meter_matches_the_estimate_and_only_serialises_what_changed():
    msgs = history(50, reasoning=40)
    meter = TokenMeter()
    assert meter.estimate(msgs) == estimate_tokens(msgs)
    assert meter.serialised == len(msgs)
    msgs += step(99)
    assert meter.estimate(msgs) == estimate_tokens(msgs)
    assert meter.serialised == 2  # only the new messages
    msgs[3].parts.append(TextPart("edited in place"))  # a change inside a cached message is noticed
    assert meter.estimate(msgs) == estimate_tokens(msgs) and meter.serialised == 1
    msgs[0].parts[0] = TextPart(msgs[0].parts[0].text + " and more")  # a part replaced
    assert meter.estimate(msgs) == estimate_tokens(msgs) and meter.serialised == 1
    msgs[1] = Message("assistant", list(msgs[1].parts))  # a message replaced by a copy
    assert meter.estimate(msgs) == estimate_tokens(msgs) and meter.serialised == 1
    del msgs[5:9]
    assert meter.estimate(msgs) == estimate_tokens(msgs) and meter.serialised == 0


def test_the_meter_reads_only_what_follows_the_unchanged_start_and_forgets_steps_taken_back():
    msgs = history(30, reasoning=10)
    meter = TokenMeter()
    meter.estimate(msgs)
    for i in range(40):  # a step taken back each time (a retry, an aborted step), another one taken
        assert meter.estimate(msgs + step(i)) == estimate_tokens(msgs + step(i)) and meter.serialised == 2
    assert meter.estimate(msgs) == estimate_tokens(msgs) and meter.serialised == 0
    assert len(meter._cache) == len(msgs)  # nothing kept of the steps taken back
    msgs[-1].parts.append(TextPart("the last one changed in place"))
    assert meter.estimate(msgs) == estimate_tokens(msgs) and meter.serialised == 1


@pytest.mark.parametrize(
    "est,pct,label,level",
    [
        (0, 0, "0% ctx", "normal"),
        (78_000, 65, "65% ctx", "normal"),
        (79_200, 66, "66% ctx", "amber"),
        (107_000, 89, "89% ctx", "amber"),
        (108_000, 90, "90% ctx compacting soon", "red"),
        (500_000, 100, "100% ctx compacting soon", "red"),
    ],
)
def test_percent_and_label(est, pct, label, level):
    assert percent(est, 120_000) == pct
    assert meter_label(pct) == (label, level)


# -- prune_to_fit ---------------------------------------------------------------------------------
def test_under_threshold_is_unchanged():
    msgs = history(3)
    res = prune_to_fit(msgs, 120_000)
    assert res.messages is msgs and not res.changed and res.before == res.after == len(msgs)


def test_at_threshold_is_unchanged():
    msgs = history(3)
    res = prune_to_fit(msgs, estimate_tokens(msgs))
    assert res.messages is msgs and not res.changed


def test_stripping_reasoning_suffices_for_200_steps_and_keeps_all_200_calls():
    msgs = history(200, reasoning=2_000, output=50)
    snapshot = copy.deepcopy(msgs)
    threshold = estimate_tokens(msgs) // 3
    res = prune_to_fit(msgs, threshold)
    assert res.changed and res.dropped_span is None and res.rung is None
    assert res.tokens_after <= threshold
    assert sum(len(m.tool_calls()) for m in res.messages) == 200
    assert sum(len(m.tool_results()) for m in res.messages) == 200
    assert not any(isinstance(p, ReasoningPart) for m in res.messages for p in m.parts)
    assert all_ids(res.messages) == []  # a pruned request is always inline
    assert msgs == snapshot  # the session's history is untouched


def test_ladder_takes_the_widest_rung_that_fits():
    msgs = history(100, output=400)
    wire32, wire16 = rung(msgs, 32), rung(msgs, 16)
    threshold = (estimate_tokens(wire32) + estimate_tokens(wire16)) // 2  # 32 too big, 16 fits
    res = prune_to_fit(msgs, threshold)
    assert res.rung == 16 and res.messages == wire16 and res.tokens_after <= threshold
    assert res.before == len(msgs) and 0 < res.after < res.before


def test_nothing_fits_gives_the_narrowest_never_empty_and_first_prompt_survives():
    msgs = history(100, output=400)
    res = prune_to_fit(msgs, 1)
    assert res.rung == LADDER[-1] and res.messages
    assert res.messages[0].text == "first prompt: analyse the data"
    assert res.messages[-1].text == "all done"


@pytest.mark.parametrize("seed", range(40))
def test_no_tool_result_is_stranded_at_any_rung(seed):
    rng = random.Random(seed)
    msgs = random_history(rng)
    snapshot = copy.deepcopy(msgs)
    for keep in LADDER:
        wire = rung(msgs, keep)
        assert stranded(wire) == [], (seed, keep)
        assert all_ids(wire) == []
        assert wire and wire[0].text == "first prompt"
        assert not any(isinstance(p, ReasoningPart) for m in wire for p in m.parts)
        assert all(m.parts for m in wire)  # no empty message goes out
    for threshold in (1, 50, 500, 5_000):
        res = prune_to_fit(msgs, threshold)
        assert stranded(res.messages) == [] and res.messages
    assert msgs == snapshot


def test_pending_call_in_the_tail_is_kept():
    msgs = history(30, output=300)
    msgs.append(Message("assistant", [ToolCallPart("call_wait", "write_file", '{"path": "a.py"}')]))
    res = prune_to_fit(msgs, 1)
    assert res.rung == 4  # the narrowest rung: the last 4 messages
    assert res.messages[-1].tool_calls()[0].call_id == "call_wait"


# -- the repairs ----------------------------------------------------------------------------------
def test_answered_only_keeps_healthy_neighbour_and_pending_calls():
    msgs = [
        Message.user("x"),
        Message("assistant", [ToolCallPart("call_ok", "a", "{}"), ToolCallPart("call_wait", "b", "{}")]),
        Message("tool", [ToolResultPart("call_gone", "a", "1"), ToolResultPart("call_ok", "a", "2")]),
        Message("tool", [ToolResultPart("call_gone2", "a", "3")]),
    ]
    calls: set[str] = set()
    out = [answered_only(m.parts, calls) for m in msgs]
    assert out[0] is msgs[0].parts and out[1] is msgs[1].parts  # nothing to drop: the same list
    assert [r.call_id for r in out[2]] == ["call_ok"] and out[3] == []
    assert [c.call_id for c in out[1]] == ["call_ok", "call_wait"]  # no result: kept
    wire = prune_to_fit(msgs, 1).messages  # the pruned wire copy applies the same rule
    assert [r.call_id for m in wire for r in m.tool_results()] == ["call_ok"]


def test_detach_provider_items_copies():
    msgs = history(2, reasoning=5)
    out = detach_provider_items(msgs)
    assert all_ids(out) == [] and all_ids(msgs)
    assert out[0] is msgs[0]  # a message without ids is not copied


# -- the digest -----------------------------------------------------------------------------------
def test_pruning_tool_calls_inserts_a_bounded_digest_after_the_first_prompt():
    msgs = [Message.user("first prompt")]
    for i in range(60):
        name = ["read_file", "edit_file", "python", "grep"][i % 4]
        msgs += step(
            i,
            output=500,
            name=name,
            args={"path": f"src/mod{i % 7}.py", "code": "x"},
            text=f"Decided to use approach {i}" if i % 10 == 0 else "",
            error=i % 9 == 0,
        )
    res = prune_to_fit(msgs, 1_500)
    assert res.changed and res.dropped_span is not None
    digest = res.messages[1]
    assert digest.role == "user" and res.messages[0].text == "first prompt"
    hidden = res.before - (res.after - 1)
    assert digest.text.startswith(f"[context pruned: {hidden} earlier messages not shown]")
    assert "read_file ×" in digest.text and "edit_file ×" in digest.text
    assert "src/mod" in digest.text and "errors" in digest.text and "Decided to use approach" in digest.text
    assert len(digest.text) <= 1_500
    assert pruned_digest(msgs, (0, len(msgs)), 10**6).startswith("[context pruned: 1000000 earlier")


def test_stripping_reasoning_alone_adds_no_digest():
    msgs = history(20, reasoning=3_000)
    res = prune_to_fit(msgs, estimate_tokens(msgs) // 2)
    assert res.changed and not any("[context pruned" in m.text for m in res.messages)


def _variant(rng: random.Random, msgs: list[Message], kind: int) -> list[Message]:
    """Histories the ladder must treat exactly as the oracle does: plain (no reasoning, no ids); with
    orphaned results and an empty message (the rare plan measured part by part); as generated."""
    if kind == 0:
        msgs = [
            Message(m.role, [p for p in m.parts if not isinstance(p, ReasoningPart)])
            for m in msgs
            if m.role != "system"
        ]
        for m in msgs:
            for p in m.parts:
                p.item_id = None
        return [m for m in msgs if m.parts]
    if kind == 1:
        callers = [i for i, m in enumerate(msgs) if m.tool_calls()]
        for i in sorted(rng.sample(callers, min(2, len(callers))), reverse=True):
            del msgs[i]  # its results are orphans now
        msgs.insert(rng.randrange(len(msgs) + 1), Message("assistant", []))
    return msgs


@pytest.mark.parametrize("seed", range(48))
def test_the_ladder_agrees_with_the_oracle_cold_and_with_the_sessions_meter(seed):
    """The ladder that adds up sizes the meter keeps gives exactly the request the previous ladder (which
    measured every part each step) gave: cold, with a warm meter, and as the session grows step by step
    while the meter measures only the new messages."""
    from prune_oracle import prune_to_fit_oracle

    rng = random.Random(seed)
    msgs = _variant(rng, random_history(rng), seed % 3)
    meter = TokenMeter()
    for threshold in (10**9, 5_000, 500, 50, 1):
        expected = prune_to_fit_oracle(msgs, threshold)
        assert prune_to_fit(msgs, threshold) == expected
        assert prune_to_fit(msgs, threshold, meter=meter) == expected
        assert meter.serialised == (len(msgs) if threshold == 10**9 else 0)  # measured once, then kept
        assert expected.tokens_before == estimate_tokens(msgs) == meter.last
        assert expected.messages and (stranded(expected.messages) == [] or not expected.changed)
    threshold = rng.choice([300, 2_000, 8_000])
    for i in range(6):
        new = step(1000 + i, reasoning=rng.choice([0, 40]), output=rng.randint(5, 400), text="noted" * (i % 2))
        msgs = msgs + new
        got = prune_to_fit(msgs, threshold, meter=meter)
        assert meter.serialised == len(new)
        assert got == prune_to_fit_oracle(msgs, threshold)
    again = prune_to_fit(msgs, threshold, meter=meter)  # the copies the meter keeps are sent again, unchanged
    assert again == got and meter.serialised == 0


def _flawed(rng: random.Random, msgs: list[Message], flaw: int) -> list[Message]:
    """A history with one thing a check before pruning must act on (flaw 0: none)."""
    from shiro_kernel.transcript import ImageRef

    msgs = list(msgs)
    if flaw == 1:  # a result whose call is gone
        callers = [i for i, m in enumerate(msgs) if m.tool_calls()]
        if callers:
            del msgs[rng.choice(callers)]
    elif flaw == 2:  # a call without its result
        answers = [i for i, m in enumerate(msgs) if m.role == "tool"]
        if answers:
            del msgs[rng.choice(answers[:-1] or answers)]
    elif flaw == 3:  # more images than go on the wire
        for i in range(4):
            image = ImageRef(f"{i:064x}", "image/png", 10, 10, alt=f"plot {i}")
            msgs += step(500 + i)
            msgs[-1] = Message("tool", [replace(msgs[-1].parts[0], images=[image])])
    elif flaw == 4:  # a result over the wire cap
        msgs += step(600, output=WIRE_RESULT_CHARS + 1)
    elif flaw == 5:  # reasoning that lost its id beside a text that kept one
        msgs.append(Message("assistant", [ReasoningPart(["r"]), TextPart("t", item_id="msg_x")]))
    elif flaw == 6:  # a result before its own call in one message
        msgs.append(Message("assistant", [ToolResultPart("c_in", "python", "o"), ToolCallPart("c_in", "python", "{}")]))
    return msgs


@pytest.mark.parametrize("seed", range(56))
def test_the_checks_are_skipped_only_when_they_would_change_nothing(seed):
    """``wire_ready`` lets a step skip the repair, image and size passes: never when one of them would act,
    and (for a clean history) always, with a warm meter as the history grows or changes in place."""
    rng = random.Random(seed)
    flaw = seed % 7
    msgs = _flawed(rng, [m for m in random_history(rng) if "call_pending" not in str(m.parts)], flaw)
    for store in (True, False):
        meter = TokenMeter()
        ready = wire_ready(meter.records(msgs), store=store, meter=meter)
        unchanged = (
            check_and_repair(msgs, store=store)[0] is msgs
            and limit_images(msgs)[0] is msgs
            and limit_sizes(msgs)[0] is msgs
        )
        # not ready although nothing would change: only a call waiting for approval (the full checks decide)
        assert ready == unchanged or (unchanged and pending_calls(msgs)), (flaw, store)
        if flaw == 0 and store:
            assert ready
    # the same answer from a meter that saw the history before it grew, or before an earlier message changed
    meter = TokenMeter()
    wire_ready(meter.records(msgs), store=True, meter=meter)
    grown = msgs + step(700) + _flawed(rng, [], 0)
    assert wire_ready(meter.records(grown), store=True, meter=meter) == wire_ready(
        TokenMeter().records(grown), store=True
    )
    if flaw == 0:
        edited = list(grown)
        callers = [i for i, m in enumerate(edited) if m.tool_calls()]
        edited[callers[0]] = Message("assistant", [TextPart("the call is gone")])  # its result is an orphan now
        assert not wire_ready(meter.records(edited), store=True, meter=meter)


def test_the_meter_answers_the_view_while_a_turn_prunes():
    """The live view asks the session's meter for the context size from the kernel's thread while the turn
    prunes with it on another: every answer is the estimate of the history the view passed."""
    import sys
    import threading

    msgs = history(200, reasoning=20)
    meter = TokenMeter()
    stop = threading.Event()
    wrong: list[tuple[int, int]] = []

    def view() -> None:
        while not stop.is_set():
            snapshot = list(msgs)
            got, want = meter.estimate(snapshot), estimate_tokens(snapshot)
            if got != want:
                wrong.append((got, want))

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # interleave the two threads as finely as the interpreter allows
    watcher = threading.Thread(target=view)
    watcher.start()
    try:
        for i in range(200):
            msgs += step(1000 + i, output=50)
            prune_to_fit(msgs, 3_000, meter=meter)
            if i % 7 == 0:
                del msgs[-2:]  # a step taken back
    finally:
        stop.set()
        watcher.join()
        sys.setswitchinterval(switch)
    assert wrong == []
