"""A kernel interrupt while an answer streams keeps what the user saw (issue 39 §7): the partial answer goes into
the record, so the next request never has two user messages in a row, in a real kernel (SIGINT, as the Interrupt
button sends it)."""

from __future__ import annotations

import itertools
import json
import time
from pathlib import Path

import pytest
from fakeopenai import Fault, Reply
from faultlog import record
from kernelutil import Kernel


@pytest.fixture
def kernel(fake_openai, tmp_path: Path):
    env = {
        "OPENAI_API_KEY": "sk-test-interrupt",
        "OPENAI_BASE_URL": fake_openai.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
        "SHIRO_NO_WARMUP": "1",
        "JPY_SESSION_NAME": str(tmp_path / "i.ipynb"),
    }
    k = Kernel(env, cwd=str(tmp_path))
    k.run("%load_ext shiro_kernel")
    yield k
    k.close()


def roles(body: dict) -> list[str]:
    items = body.get("input") or body.get("messages") or []
    return [i.get("role", i.get("type", "")) for i in items if isinstance(i, dict)]


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_an_interrupt_mid_stream_keeps_the_partial_answer(kernel, fake_openai, api):
    kernel.run(f'%config Shiro.api = "{api}"')
    fake_openai.default_reply = Reply(text="The mean of the first column is about forty two, and the rest")
    fake_openai.enqueue(Fault.stall(after_events=7, seconds=30))
    msg_id = kernel.kc.execute("%shiro what is the mean?")
    deadline = time.time() + 20
    while time.time() < deadline and not fake_openai.requests:
        time.sleep(0.1)
    time.sleep(1.5)  # the first words are shown; the server holds the rest
    kernel.km.interrupt_kernel()
    kernel.kc.get_shell_msg(timeout=30)  # the cell ended
    assert msg_id
    fake_openai.default_reply = Reply(text="forty two")
    kernel.run("%shiro go on", timeout=60)
    body = fake_openai.requests[-1].body
    assert "The mean" in json.dumps(body)  # what the user saw is in the history, as the model's
    users = [r for r in roles(body) if r in ("user", "assistant")]
    assert all(not (a == b == "user") for a, b in itertools.pairwise(users)), users
    record(
        f"a kernel interrupt while the answer streams ({api}; real kernel, SIGINT)",
        1,
        0,
        "the words shown kept in the record as the assistant's; the next request alternates user and assistant",
    )
