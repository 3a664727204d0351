"""Requests a prefix cache can serve (issue 27): the instructions byte-identical across steps and turns, what
changes (the task list, cell changes) in one state message after the conversation, pruning that holds
still, ``prompt_cache_key`` where the API documents it, and cached input read from the usage and priced at
the cached rate. Real turns: the in-process shell, the real SDK, the fake server (which serves prefixes as
OpenAI's cache does and reports ``cached_tokens``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cassettes import all_interactions
from fakeopenai import Call, Reply
from IPython.utils.capture import capture_output
from kernelutil import state_of, write_cells

from shiro_kernel.provider import wire
from shiro_kernel.provider.client import Provider, ProviderSettings
from shiro_kernel.provider.pricing import cost_usd


def run(shell: Any, source: str) -> str:
    with capture_output() as cap:
        shell.run_cell(source)
    return cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs)


def items(request: Any) -> list[Any]:
    return request.body.get("input") or request.body.get("messages") or []


def conversation(request: Any) -> list[Any]:
    """The request's items without its trailing state message."""
    got = items(request)
    return got[:-1] if state_of(request) else got


def begins_with(later: Any, earlier: Any) -> bool:
    """Does ``later``'s prompt begin with ``earlier``'s conversation (its instructions and tools the same)?"""
    same = later.body.get("instructions") == earlier.body.get("instructions") and later.body.get(
        "tools"
    ) == earlier.body.get("tools")
    head = conversation(earlier)
    return same and items(later)[: len(head)] == head


@pytest.fixture(params=["responses", "chat"])
def api(request, shiro_shell) -> str:
    run(shiro_shell, f'%config Shiro.api = "{request.param}"')
    run(shiro_shell, '%config Shiro.approval = "auto"')
    return request.param


def test_the_prefix_holds_across_the_steps_of_a_turn_with_a_todo_write(shiro_shell, fake_openai, api):
    todos = [{"content": "load", "status": "done"}, {"content": "plot", "status": "in_progress"}]
    fake_openai.enqueue(
        Reply(tool_calls=[Call("todo_write", {"todos": todos})]),
        Reply(tool_calls=[Call("python", {"code": "1 + 1"})]),
        Reply(text="done"),
    )
    run(shiro_shell, "%shiro plan and compute")
    first, second, third = fake_openai.requests
    assert state_of(first) == ""  # no task list yet: no state message
    assert "[~] plot" in state_of(second) and "[~] plot" in state_of(third)
    assert "task list" not in second.body.get("instructions", "") + json.dumps(conversation(second))
    assert begins_with(second, first) and begins_with(third, second)


def test_the_prefix_holds_across_turns_with_a_cell_run_between_them(
    shiro_shell, fake_openai, tmp_path, monkeypatch, api
):
    path = tmp_path / "nb.ipynb"
    monkeypatch.setenv("JPY_SESSION_NAME", str(path))

    write_cells(path, ["x = 1"])
    fake_openai.enqueue(Reply(text="one"), Reply(text="two"))
    run(shiro_shell, "%shiro first")
    write_cells(path, ["x = 2", "print(x)"])  # the user edits and runs cells between the turns
    run(shiro_shell, "%shiro second")
    first, second = fake_openai.requests
    assert "Since your last turn the user changed the notebook:" in state_of(second)
    assert begins_with(second, first)


def test_a_prune_point_holds_for_the_turns_after_it(shiro_shell, fake_openai, api):
    run(shiro_shell, "%config Shiro.compact_threshold = 3000")
    big = "print('row ' * 400)"
    for n in range(12):
        fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": big})]), Reply(text=f"turn {n}"))
        run(shiro_shell, f"%shiro turn {n}")
    posts = fake_openai.requests
    pruned = [i for i, r in enumerate(posts) if "[context pruned: " in json.dumps(items(r))]
    assert pruned, "the session passed its threshold: some requests carry the digest of a pruned span"
    breaks = [i for i in range(1, len(posts)) if not begins_with(posts[i], posts[i - 1])]
    # the prefix changes only at a prune point (the first request over the threshold, and the next ones
    # that pass it again), never at every step: far fewer breaks than steps after the first prune
    assert len(breaks) <= 3 and len(posts) - pruned[0] >= 6, (breaks, pruned, len(posts))
    assert all(
        posts[i].cached_chars >= posts[i - 1].prompt_chars * 0.5 for i in range(1, len(posts)) if i not in breaks
    )


def test_cache_key_only_where_the_api_documents_it(fake_openai, api):
    key = "0193ab2c-1f2a-7c3d-8000-000000000001"
    here = Provider(ProviderSettings(model="gpt-4o-mini", api=api, base_url=fake_openai.base_url, cache_key=key))
    body: dict[str, Any] = {}
    here._cache_key(body)
    assert body == {}  # another server (Ollama, vLLM, this fake) may refuse a field it does not know
    openai_api = Provider(
        ProviderSettings(model="gpt-4o-mini", api=api, base_url="https://api.openai.com/v1", cache_key=key)
    )
    openai_api._cache_key(body)
    assert body == {"prompt_cache_key": key}


def test_cached_tokens_read_from_every_recorded_usage_shape():
    """The cassettes' real usage objects: what they say is read (0 cached), and the same shapes with cached
    tokens in them are read and priced at the cached rate."""
    seen = 0
    for x in all_interactions():
        bodies = x.response if isinstance(x.response, list) else [x.response]
        for body in bodies:
            if not isinstance(body, dict):
                continue
            usage = body.get("usage") or (body.get("response") or {}).get("usage")
            if not isinstance(usage, dict):
                continue
            parse = wire.responses_usage if "input_tokens" in usage else wire.chat_usage
            details = "input_tokens_details" if "input_tokens" in usage else "prompt_tokens_details"
            assert parse("gpt-5-mini", usage).cached_input_tokens == int(
                (usage.get(details) or {}).get("cached_tokens") or 0
            )
            total = int(usage.get("input_tokens") or usage.get("prompt_tokens") or 0)
            warm = {**usage, details: {**(usage.get(details) or {}), "cached_tokens": total // 2}}
            got = parse("gpt-5-mini", warm)
            assert got.cached_input_tokens == total // 2
            out = int(usage.get("output_tokens") or usage.get("completion_tokens") or 0)
            assert got.cost_usd == pytest.approx(((total - total // 2) * 0.25 + total // 2 * 0.025 + out * 2.0) / 1e6)
            seen += 1
    assert seen >= 20


def test_a_session_with_cached_input_costs_what_cached_pricing_says(shiro_shell, fake_openai, api):
    """The fake reports cached tokens once a prompt's prefix repeats (from 1,024 tokens); footer, /cost, the
    record and the budget use the cached rate."""
    run(shiro_shell, '%config Shiro.model = "gpt-5-mini"')
    run(shiro_shell, "%config Shiro.budget_usd = 10.0")
    for n in range(3):
        fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": f"print({n})"})]), Reply(text=f"answer {n}"))
        shown = run(shiro_shell, f"%shiro step {n}")
    agent = shiro_shell.magics_manager.registry["ShiroMagics"].agent
    usage = agent.current.session.usage
    cached = sum(r.cached_tokens for r in fake_openai.requests)
    assert cached > 0 and usage.cached_input_tokens == cached
    assert usage.cost_usd == pytest.approx(cost_usd("gpt-5-mini", usage.input_tokens, usage.output_tokens, cached))
    assert usage.cost_usd < cost_usd("gpt-5-mini", usage.input_tokens, usage.output_tokens)
    last = fake_openai.requests[-2:]
    footer_in = sum(r.cached_tokens for r in last)
    assert f"({footer_in:,} cached)" in shown
    assert f"({cached:,} of them cached)" in run(shiro_shell, "%shiro /cost")
    agent.current.save_now()
    record = json.loads(Path(agent.current.store.path_for(agent.current.session.id)).read_text())
    assert record["cachedInputTokens"] == cached and record["costUsd"] == pytest.approx(usage.cost_usd)
