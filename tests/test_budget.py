"""The per-session cost budget: the footer meter, the clean stop before the next model call, and the
one notice for an unpriced model."""

from __future__ import annotations

from fakeopenai import Call, Reply
from kernelutil import outputs_text, run_notebook

from shiro_kernel.agent import Agent
from shiro_kernel.config import Shiro
from shiro_kernel.events import BudgetReached, BudgetUnchecked, Notice, TurnEnd, Usage
from shiro_kernel.provider.client import Provider, ProviderSettings
from shiro_kernel.session import Session
from shiro_kernel.tools import Effect, Tool, ToolContext
from shiro_kernel.tools.base import schema
from shiro_kernel.turn import Frontend, Turn, TurnOptions
from shiro_kernel.ui.money import budget_message
from shiro_kernel.ui.render import TurnLog
from shiro_kernel.ui.text_view import turn_details

KEY = "sk-test-budget-0000"
TOOLS = {
    "add": Tool(
        "add",
        "Add.",
        schema({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        lambda a, c: str(a["a"] + a["b"]),
        effects=Effect.READS,
    )
}
BIG = (100_000, 10_000)  # gpt-4o: 0.25 + 0.10 = $0.35 per step


def make_turn(fake, tmp_path, budget, session=None, model="gpt-4o"):
    provider = Provider(ProviderSettings(model=model, base_url=fake.base_url, max_retries=0, timeout_s=10.0))
    events: list = []
    turn = Turn(
        session or Session(),
        provider,
        TOOLS,
        ToolContext(root=tmp_path),
        "test",
        TurnOptions(approval="auto", budget_usd=budget),
        observers=[events.append],
    )
    return turn, events


def test_budget_message_wording():
    assert budget_message(0.35, 0.5) == (
        "budget reached: $0.3500 of $0.50 spent — raise it with %config Shiro.budget_usd = 1"
    )
    assert budget_message(0.0123, 0.002).endswith("of $0.002 spent — raise it with %config Shiro.budget_usd = 0.004")


def test_a_step_that_would_pass_the_budget_is_not_sent(monkeypatch, fake_openai, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fake_openai.enqueue(
        Reply(tool_calls=[Call("add", {"a": 1, "b": 2})], usage=BIG),
        Reply(tool_calls=[Call("add", {"a": 3, "b": 4})], usage=BIG),
        Reply(text="never sent"),
    )
    # 0.35 spent after step 1; step 2 would bring it to ~0.70 > 0.60
    turn, events = make_turn(fake_openai, tmp_path, 0.60)
    end = turn.run("add")
    assert end.reason == "budget"
    assert len(fake_openai.requests) == 1
    # the turn says it in numbers; the views say it in money
    assert [e for e in events if isinstance(e, (Notice, BudgetReached))] == [BudgetReached(0.35, 0.60)]
    reached = next(e for e in events if isinstance(e, BudgetReached))
    assert budget_message(reached.spent_usd, reached.budget_usd) == (
        "budget reached: $0.3500 of $0.60 spent — raise it with %config Shiro.budget_usd = 1.2"
    )
    # the call of step 1 got its result: the transcript is consistent for the next turn
    assert [m.role for m in turn.session.messages] == ["user", "assistant", "tool"]


def test_spend_already_at_the_budget_stops_before_the_first_call(monkeypatch, fake_openai, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    session = Session(usage=Usage(1, 1, 0.5))
    turn, events = make_turn(fake_openai, tmp_path, 0.5, session=session)
    assert turn.run("hi").reason == "budget"
    assert fake_openai.requests == []
    assert isinstance(events[-1], TurnEnd) and events[-1].reason == "budget"


def test_under_budget_runs_normally(monkeypatch, fake_openai, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    fake_openai.enqueue(Reply(text="ok", usage=(1000, 100)))
    turn, _ = make_turn(fake_openai, tmp_path, 5.0)
    assert turn.run("hi").reason == "answered"


def test_footer_meter_and_unpriced_notice_once(monkeypatch, fake_openai, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.chdir(tmp_path)
    config = Shiro(model="gpt-4o", budget_usd=0.5)
    agent = Agent(None, config)
    assert turn_details(agent)["footer"] == "Nothing to save from this session. · $0.0000 of $0.50 budget"
    agent.current.session.usage = Usage(10, 10, 0.0123)
    assert "$0.0123 of $0.50 budget" in turn_details(agent)["footer"]
    from shiro_kernel.commands import run as command

    assert command(agent, "/cost").endswith("cost $0.0123 ($0.0123 of $0.50 budget)")

    config.model = "my-local-model"
    agent2 = Agent(None, config)
    fake_openai.enqueue(Reply(text="one", usage=BIG), Reply(text="two", usage=BIG))
    seen: list = []
    assert agent2.ask("hi", Frontend(on_event=seen.append)).reason == "answered"
    assert agent2.ask("again", Frontend(on_event=seen.append)).reason == "answered"  # not blocked
    assert [e for e in seen if isinstance(e, BudgetUnchecked)] == [BudgetUnchecked(0.5, "my-local-model")]  # once
    log = TurnLog()
    for event in seen:
        log.feed(event)
    unpriced = [e.text for e in log.entries if isinstance(e, Notice)]  # the view words it
    assert unpriced == [
        "Shiro.budget_usd is $0.50, but my-local-model has no known price, so the budget "
        "cannot be checked; turns are not stopped by it"
    ]
    assert "$0.50 budget not checked (no price for my-local-model)" in turn_details(agent2)["footer"]


def test_notebook_budget_stops_the_turn(fake_openai, tmp_path):
    fake_openai.enqueue(
        Reply(text="Looking.", tool_calls=[Call("python", {"code": "1 + 1"})], usage=BIG),
        Reply(text="never sent", usage=BIG),
    )
    path = tmp_path / "b.ipynb"
    nb = run_notebook(
        path,
        [
            "%load_ext shiro_kernel\n%config Shiro.budget_usd = 0.1\n%config Shiro.approval = 'auto'",
            "%shiro --wait compute something",
        ],
        {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake_openai.base_url, "SHIRO_MODEL": "gpt-4o"},
    )
    shown = outputs_text(nb.cells[1])
    assert len(fake_openai.requests) == 1
    assert "budget reached: $0.3500 of $0.10 spent — raise it with %config Shiro.budget_usd = 0.2" in shown
    assert "$0.3500 of $0.10 budget" in shown  # the footer's meter
