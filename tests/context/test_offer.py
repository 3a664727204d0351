"""A request sized to the server (:mod:`shiro_kernel.context.offer`): a lean request offers ``python`` and
``more_tools`` with short schemas, the rest on demand; a full one every tool, as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shiro_kernel.context.offer import NAME, Offer, brief, lean_for, with_loader
from shiro_kernel.tools import ToolContext, ToolError, all_tools


def test_when_a_request_is_lean():
    assert lean_for("auto", local=True, priced=False)  # a local engine's model
    assert not lean_for("auto", local=True, priced=True)  # a hosted model behind a local gateway
    assert not lean_for("auto", local=False, priced=False)  # a hosted server
    assert lean_for("lean", local=False, priced=True)
    assert not lean_for("full", local=True, priced=False)


def test_a_full_offer_is_every_tool_as_before():
    tools = all_tools()
    offer = Offer(tools)
    assert offer.specs() == [t.spec() for t in tools.values()]
    assert NAME not in with_loader(tools, offer)


def test_a_lean_offer_is_python_and_more_tools_in_short():
    tools = all_tools()
    offer = Offer(tools, lean=True)
    specs = offer.specs()
    assert [s["name"] for s in specs] == ["python", NAME]
    full = len(json.dumps([t.spec() for t in tools.values()]))
    lean = len(json.dumps(specs))
    assert lean * 5 < full  # a few hundred characters instead of ~13,000
    python = specs[0]
    assert python["description"][-1] == "." and "description" not in python["parameters"]["properties"]["code"]
    assert set(with_loader(tools, offer)) == {*tools, NAME}


def test_more_tools_lists_and_loads_and_a_loaded_tool_stays_offered():
    tools = all_tools()
    loaded: list[str] = []
    offer = Offer(tools, lean=True, loaded=loaded)
    run = with_loader(tools, offer)[NAME].run
    listing = run({}, ToolContext(root="."))
    assert "- read_file:" in listing and "- python:" not in listing
    before = offer.specs()
    ctx = ToolContext(root=Path("/proj"), notebook_path=Path("/proj/a.ipynb"))
    assert run({"names": ["read_file"]}, ctx) == (
        "Loaded: read_file. You can call it now. Paths are relative to the project root, /proj; the notebook is "
        "/proj/a.ipynb."  # what a lean request's instructions leave out, told when the tools that need it load
    )
    after = offer.specs()
    assert after[: len(before)] == before  # the tools offered before keep their place: the prefix holds
    assert after[-1] == tools["read_file"].spec()  # a loaded tool in full
    assert loaded == ["read_file"]  # the session's (WireState.loaded), for the later turns
    assert Offer(tools, lean=True, loaded=loaded).specs() == after
    with pytest.raises(ToolError, match="no tool named nope"):
        run({"names": ["nope"]}, ToolContext(root="."))


def test_a_short_schema_keeps_the_types_and_drops_the_prose():
    spec = {
        "name": "t",
        "description": "Does a thing. Then much more prose about it.",
        "parameters": {
            "type": "object",
            "properties": {"a": {"type": "array", "items": {"type": "string", "description": "x"}, "description": "y"}},
        },
    }
    short = brief(spec)
    assert short["description"] == "Does a thing."
    assert short["parameters"]["properties"]["a"] == {"type": "array", "items": {"type": "string"}}
    assert spec["parameters"]["properties"]["a"]["description"] == "y"  # the tool's own schema is not changed


def _agent(monkeypatch, fake, tmp_path, model, shell=None, **settings):
    from shiro_kernel.agent import Agent
    from shiro_kernel.config import Shiro

    monkeypatch.setenv("OPENAI_BASE_URL", fake.base_url)  # 127.0.0.1: a server on this machine
    monkeypatch.chdir(tmp_path)
    return Agent(shell, Shiro(model=model, **settings))


def _tool_names(request) -> list[str]:
    return [t.get("name") or t["function"]["name"] for t in request.body.get("tools", [])]


def test_a_local_engines_model_gets_a_lean_request_and_loads_a_tool(monkeypatch, fake_openai, tmp_path):
    from fakeopenai import Call, Reply

    from shiro_kernel.context.prompt import LEAN

    (tmp_path / "notes.txt").write_text("hello")
    agent = _agent(monkeypatch, fake_openai, tmp_path, "qwen", approval="auto")
    fake_openai.enqueue(
        Reply(tool_calls=[Call(NAME, {"names": ["read_file"]})]),
        Reply(tool_calls=[Call("read_file", {"path": "notes.txt"})]),
        Reply(text="It says hello."),
    )
    assert agent.ask("what does notes.txt say?").reason == "answered"
    first, second, third = fake_openai.requests
    assert _tool_names(first) == ["python", NAME]
    assert first.body["instructions"].startswith(LEAN)
    # nothing of this project in the instructions (the tool schemas follow them in a local engine's template, and
    # its cache serves both to another notebook), and no empty memory index: only prefill
    assert str(tmp_path) not in first.body["instructions"] and "memories" not in first.body["instructions"]
    assert str(tmp_path) in json.dumps(third.body["input"])  # told by more_tools, with the tools that use it
    assert _tool_names(third) == ["python", NAME, "read_file"]
    assert "hello" in json.dumps(third.body["input"])
    # the next turn of the session offers what was loaded, in the same order: the prefix holds
    fake_openai.enqueue(Reply(text="ok"))
    agent.ask("thanks")
    assert _tool_names(fake_openai.requests[-1]) == ["python", NAME, "read_file"]


def test_a_priced_model_gets_the_full_request(monkeypatch, fake_openai, tmp_path):
    from fakeopenai import Reply

    agent = _agent(monkeypatch, fake_openai, tmp_path, "gpt-4o-mini")
    fake_openai.enqueue(Reply(text="ok"))
    agent.ask("hi")
    assert _tool_names(fake_openai.requests[0]) == [t.name for t in all_tools().values()]


def test_shiro_request_full_and_lean_override_auto(monkeypatch, fake_openai, tmp_path):
    from fakeopenai import Reply

    fake_openai.enqueue(Reply(text="ok"), Reply(text="ok"))
    _agent(monkeypatch, fake_openai, tmp_path, "qwen", request="full").ask("hi")
    _agent(monkeypatch, fake_openai, tmp_path, "gpt-4o-mini", request="lean").ask("hi")
    assert len(_tool_names(fake_openai.requests[0])) == len(all_tools())
    assert _tool_names(fake_openai.requests[1]) == ["python", NAME]


def test_a_lean_turn_on_data_is_told_to_compute_first_until_it_calls(monkeypatch, fake_openai, tmp_path, plain_shell):
    from fakeopenai import Call, Reply

    (tmp_path / "titanic.csv").write_text("PassengerId,Fare\n1,7.25\n2,71.28\n")
    fake_openai.small_local_model = True  # calls come as fenced JSON in the text, as Qwen2.5-Coder writes them
    agent = _agent(monkeypatch, fake_openai, tmp_path, "qwen", plain_shell, approval="auto")
    fake_openai.enqueue(
        Reply(
            tool_calls=[Call("python", {"code": "import pandas as pd; print(pd.read_csv('titanic.csv').Fare.mean())"})]
        ),
        Reply(text="It is the mean the code printed."),
    )
    assert agent.ask("What is the mean Fare in titanic.csv?").reason == "answered"
    first, second = (json.dumps(r.body["input"]) for r in fake_openai.requests)
    # a server on this machine: its text calls are read, so the step asks for a ```python block
    step = "Your next reply is only a ```python block that loads titanic.csv and prints what the prompt asks"
    assert step in first
    assert step not in second and "39.265" in second  # the call ran; the step is not said again
    # the step after the output: answer now, in the prompt's form (not before the call)
    answer = "Answer the prompt now, in the form it asks for, from what the code printed."
    assert answer in second and answer not in first


def test_a_lean_turn_whose_block_raised_is_asked_to_fix_it_not_to_answer(
    monkeypatch, fake_openai, tmp_path, plain_shell
):
    from fakeopenai import Call, Reply

    from shiro_kernel.context.workspace import FAILED, RETRY

    (tmp_path / "titanic.csv").write_text("PassengerId,Fare\n1,7.25\n2,71.28\n")
    fake_openai.small_local_model = True  # its calls come as text, read from the reply
    agent = _agent(monkeypatch, fake_openai, tmp_path, "qwen", plain_shell, approval="auto")
    wrong = "import pandas as pd; print(pd.read_csv('titanic.csv')['fare'].mean())"  # KeyError: the column is Fare
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": wrong})]),
        Reply(tool_calls=[Call("python", {"code": wrong})]),  # the same block again, as the 1.5B sends it
        Reply(text="It failed: there is no column fare."),
    )
    assert agent.ask("What is the mean Fare in titanic.csv?").reason == "answered"
    _, second, third = (json.dumps(r.body["input"]) for r in fake_openai.requests)
    assert "KeyError" in second and json.dumps(RETRY)[1:-1] in second and "Answer the prompt now" not in second
    assert json.dumps(FAILED)[1:-1] in third and json.dumps(RETRY)[1:-1] not in third


def test_a_full_turn_or_a_prompt_without_data_is_not_told_a_first_step(monkeypatch, fake_openai, tmp_path):
    from fakeopenai import Reply

    (tmp_path / "titanic.csv").write_text("PassengerId,Fare\n1,7.25\n")
    fake_openai.enqueue(Reply(text="ok"), Reply(text="ok"))
    _agent(monkeypatch, fake_openai, tmp_path, "gpt-4o-mini").ask("What is the mean Fare in titanic.csv?")
    _agent(monkeypatch, fake_openai, tmp_path, "qwen").ask("hi")
    sent = [json.dumps(r.body["input"]) for r in fake_openai.requests]
    assert all("Your next reply is only" not in x and "Answer the prompt now" not in x for x in sent)
