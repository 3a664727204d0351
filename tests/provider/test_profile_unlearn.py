"""What a server taught can be unlearned (issue 39 §6): a Responses server that stops keeping items is resent inline
once and unlearned for good; a Responses answer unlearns one 404's "no Responses API"; two kernels learning at once
keep both lessons (each saves only the fields it changed); a servers.json of another shape, or a FIFO in its place,
is set aside and the turn answers (real kernels)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import Fault, Reply
from faultlog import record
from IPython.utils.capture import capture_output
from kernelutil import Kernel

from shiro_kernel.provider.profile import Profiles
from shiro_kernel.store.paths import home


def run(shell: Any, source: str) -> str:
    with capture_output() as cap:
        shell.run_cell(source)
    return cap.stdout + "".join(o.data.get("text/markdown", o.data.get("text/plain", "")) for o in cap.outputs)


def new_kernel(shell: Any) -> None:
    run(shell, "%unload_ext shiro_kernel")
    run(shell, "%load_ext shiro_kernel")


def profile(fake: Any) -> Any:
    return Profiles(home() / "servers.json").load(fake.base_url, "gpt-4o-mini")


def test_a_server_that_stops_keeping_items_is_resent_inline_once_and_unlearned(shiro_shell, fake_openai):
    fake_openai.enqueue(Reply(text="one"), Reply(text="two"))
    run(shiro_shell, "%shiro first")
    run(shiro_shell, "%shiro second")
    assert profile(fake_openai).keeps_state  # its answers said "store": true, and it kept them

    fake_openai.imitate = "ollama"  # the same URL now serves a Responses API that keeps nothing
    fake_openai.enqueue(Reply(text="three"), Reply(text="four"))
    third = run(shiro_shell, "%shiro third")
    assert "three" in third and "Traceback" not in third
    statuses = [r.status for r in fake_openai.requests[2:]]
    assert statuses == [400, 200]  # the reference refused once, then the history inline
    learned = profile(fake_openai)
    assert not learned.keeps_state and learned.keeps_nothing

    new_kernel(shiro_shell)  # a later kernel: no reference at all, and "store": true does not teach it again
    fake_openai.imitate = None
    fake_openai.enqueue(Reply(text="five"), Reply(text="six"))
    run(shiro_shell, "%shiro --new fifth")
    run(shiro_shell, "%shiro sixth")
    assert "item_reference" not in json.dumps([r.body for r in fake_openai.requests[4:]])
    record(
        "a server that kept Responses items, then (same URL) one that keeps nothing (Ollama's 400 item_reference)",
        4,
        0,
        "the refused reference resent inline once and answered; unlearned in servers.json: later kernels send "
        "no reference (0 further 400s)",
    )


def test_a_responses_answer_unlearns_one_404s_lesson(shiro_shell, fake_openai):
    fake_openai.enqueue(Fault.error(404, "Not Found"), Reply(text="over chat"))
    assert "over chat" in run(shiro_shell, "%shiro hello")  # a proxy's blip: switched to Chat Completions
    assert profile(fake_openai).responses_missing

    run(shiro_shell, '%config Shiro.api = "responses"')
    fake_openai.enqueue(Reply(text="over responses"))
    assert "over responses" in run(shiro_shell, "%shiro again")
    assert not profile(fake_openai).responses_missing  # the success unlearned it

    assert profile(fake_openai).api("responses", explicit=False) == "responses"  # a later kernel, nothing chosen


def test_two_kernels_learning_at_once_keep_both_lessons(tmp_path: Path):
    path = tmp_path / "servers.json"
    first = Profiles(path).load("http://127.0.0.1:9/v1", "m")
    second = Profiles(path).load("http://127.0.0.1:9/v1", "m")  # loaded before the first learned anything
    first.responses_missing = True
    first._save("responses_missing")
    second.text_tool_calls = True
    second._save("text_tool_calls")
    again = Profiles(path).load("http://127.0.0.1:9/v1", "m")
    assert again.responses_missing and again.text_tool_calls
    second.max_tokens_field = "max_completion_tokens"
    second._save("max_tokens_field")  # a model-level field: the server's fields stay as the file has them
    again = Profiles(path).load("http://127.0.0.1:9/v1", "m")
    assert again.responses_missing and again.max_tokens_field == "max_completion_tokens"


@pytest.mark.parametrize(
    "content",
    [
        {"servers": {"URL": {"models": ["x"]}}},
        {"servers": {"URL": {"responsesMissing": "yes"}}},
        {"servers": {"URL": {"models": {"gpt-4o-mini": {"statePlace": 3}}}}},
        {"servers": ["URL"]},
        ["servers"],
    ],
)
def test_a_servers_file_of_another_shape_is_set_aside(shiro_shell, fake_openai, content):
    path = home() / "servers.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(content).replace("URL", fake_openai.base_url))
    fake_openai.enqueue(Reply(text="answered"))
    out = run(shiro_shell, "%shiro hello")
    assert "answered" in out and "Traceback" not in out and "AttributeError" not in out
    aside = list(path.parent.glob("servers.json.corrupt-*"))
    assert len(aside) == 1 and json.loads(aside[0].read_text()) == json.loads(
        json.dumps(content).replace("URL", fake_openai.base_url)
    )


@pytest.fixture
def kernel(fake_openai, tmp_path: Path):
    env = {
        "OPENAI_API_KEY": "sk-test-profile",
        "OPENAI_BASE_URL": fake_openai.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
        "SHIRO_NO_WARMUP": "1",
        "JPY_SESSION_NAME": str(tmp_path / "p.ipynb"),
    }
    k = Kernel(env, cwd=str(tmp_path))
    yield k
    k.close()


def test_in_a_real_kernel_a_bad_servers_file_and_a_fifo_are_set_aside(kernel, fake_openai):
    path = home() / "servers.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"servers": {fake_openai.base_url: {"models": ["x"]}}}))
    kernel.run("%load_ext shiro_kernel")
    fake_openai.enqueue(Reply(text="first answer"), Reply(text="second answer"))
    out = kernel.run("%shiro hello", timeout=60)
    assert "first answer" in out and "AttributeError" not in out
    assert len(list(path.parent.glob("servers.json.corrupt-*"))) == 1

    path.unlink()
    os.mkfifo(path)  # a FIFO in its place: never opened, so never blocking the turn
    out = kernel.run("%shiro --new again", timeout=60)
    assert "second answer" in out
    assert path.is_file() or not path.exists()
    assert len(list(path.parent.glob("servers.json.corrupt-*"))) == 2
    record(
        "servers.json of another shape (models as a list), then a FIFO in its place (real kernel)",
        2,
        0,
        "both set aside as servers.json.corrupt-<time>; both turns answered, no traceback, nothing blocked",
    )
