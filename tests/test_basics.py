import re
import uuid

import pytest
from IPython.core.error import UsageError

from shiro_kernel.ids import now_iso, uuid7
from shiro_kernel.magics import claim_question_lines, parse_line
from shiro_kernel.provider.failures import redact
from shiro_kernel.provider.pricing import cost_usd


def test_uuid7_is_v7_and_sorts_by_creation():
    ids = [uuid7() for _ in range(2000)]
    assert all(uuid.UUID(i).version == 7 for i in ids)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_now_iso_format():
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", now_iso())


def test_cost_priced_and_unpriced():
    assert cost_usd("gpt-4o-mini", 1_000_000, 1_000_000) == pytest.approx(0.75)
    assert cost_usd("gpt-4o-mini-2024-07-18", 1_000_000, 0) == pytest.approx(0.15)
    assert cost_usd("llama3.1:8b", 1000, 1000) is None


def test_parse_line_options_then_prompt():
    from shiro_kernel.line import Line

    p = parse_line("--wait --model gpt-4o what's -1 + 1?")
    assert p == Line("what's -1 + 1?", wait=True, model="gpt-4o")
    assert p.action == "turn"
    assert parse_line("-- -x is a flag?").prompt == "-x is a flag?"
    assert parse_line("--agent=deep  plan it").agent == "deep"
    assert parse_line("--no-memory --mute a,b").action == "flags"
    assert parse_line("--no-memory --mute a,b") == Line(memory=False, mute=("a", "b"))
    assert parse_line("--new").action == "switch" and parse_line("/todos").action == "command"
    assert parse_line("").action == "empty"
    with pytest.raises(UsageError):
        parse_line("--bogus hi")
    with pytest.raises(UsageError):
        parse_line("--model")


def test_question_lines_are_claimed_but_help_is_not():
    out = claim_question_lines(["%shiro why is it slow?\n", "%shiro?\n", "x = 1?\n"])
    assert out[0] == "get_ipython().run_line_magic('shiro', 'why is it slow?')\n"
    assert out[1:] == ["%shiro?\n", "x = 1?\n"]


def test_redact_never_leaks_the_key():
    key = "sk-proj-abcdefghijklmnop1234"
    assert key not in redact(f"Incorrect API key provided: {key}", key)
    assert "abcdefgh" not in redact("Incorrect API key provided: sk-proj-abcdefghij****1234")
