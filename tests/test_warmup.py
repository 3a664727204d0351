"""The warm-up opens the model server's connection after ``%load_ext`` (without the API key), and the
first turn's model call goes over it; a server slow to answer that request delays nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from fakeopenai import NO_KEY_MESSAGE, FakeOpenAI, Reply

from shiro_kernel import warmup
from shiro_kernel.provider.client import shared_client

# A fresh process: load the extension (with an optional %config in the same cell), wait for the
# warm-up and its preconnect, then run one turn; prints what the threads were doing.
CHILD = r"""
import json, sys, threading, time
from IPython.core.interactiveshell import InteractiveShell
sh = InteractiveShell.instance()
sh.run_cell("%load_ext shiro_kernel\n" + sys.argv[1])
from shiro_kernel import warmup
if warmup.thread is not None:
    warmup.thread.join(60)
pre = [t for t in threading.enumerate() if t.name == "shiro-preconnect"]
if sys.argv[2] == "join":
    for t in pre:
        t.join(30)
r = sh.run_cell("%shiro --wait hi")
print("@@" + json.dumps({"ok": r.success, "preconnect_running": any(t.is_alive() for t in pre),
                         "legacy_httpx": "httpx" in sys.modules}))
"""


def _child(fake: FakeOpenAI, tmp_path: Path, cell: str = "", join: bool = True, **env: str) -> dict:
    environ = {
        **{k: v for k, v in os.environ.items() if k != "SHIRO_NO_WARMUP"},
        "OPENAI_API_KEY": "sk-test-warmup-secret",
        "OPENAI_BASE_URL": fake.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
        "SHIRO_HOME": str(tmp_path / "home"),
        "IPYTHONDIR": str(tmp_path / "ipython"),
        **env,
    }
    out = subprocess.run(
        [sys.executable, "-c", CHILD, cell, "join" if join else "nojoin"],
        env=environ,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    lines = [line for line in out.stdout.splitlines() if line.startswith("@@")]
    assert lines, out.stdout[-2000:] + out.stderr[-2000:]
    return dict(json.loads(lines[-1][2:]))


def test_the_first_turn_goes_over_the_connection_the_warm_up_opened_without_the_key(fake_openai, tmp_path):
    fake_openai.default_reply = Reply(text="hello")
    got = _child(fake_openai, tmp_path)
    # the SDK runs on httpx2; importing the old httpx on the warm-up's thread raced the turn's check of
    # sys.modules (a half-imported module: AttributeError in the SDK)
    assert got == {"ok": True, "preconnect_running": False, "legacy_httpx": False}
    got_calls = [(r.method, r.path, r.status) for r in fake_openai.listings + fake_openai.requests]
    assert got_calls == [("GET", "/v1/models", 401), ("POST", "/v1/responses", 200)]
    (opened,), (turn,) = fake_openai.listings, fake_openai.requests
    assert "authorization" not in opened.headers  # the key went only with the turn, to the server it asked
    assert turn.headers["authorization"] == "Bearer sk-test-warmup-secret"
    assert opened.port == turn.port  # one TCP connection: the turn paid no connect


def test_the_preconnect_goes_to_the_configured_base_url_not_the_environments(fake_openai, tmp_path):
    """``%config Shiro.base_url`` in the loading cell wins over OPENAI_BASE_URL, as it does for the turn."""
    other = FakeOpenAI(default_reply=Reply(text="from the configured server")).start()
    try:
        got = _child(fake_openai, tmp_path, cell=f'%config Shiro.base_url = "{other.base_url}"')
        assert got["ok"]
        assert fake_openai.requests == fake_openai.listings == []
        assert [(r.method, r.path) for r in other.listings + other.requests] == [
            ("GET", "/v1/models"),
            ("POST", "/v1/responses"),
        ]
        assert other.listings[0].port == other.requests[0].port
    finally:
        other.stop()


def test_no_warmup_means_no_request_before_the_first_turn(fake_openai, tmp_path):
    assert _child(fake_openai, tmp_path, SHIRO_NO_WARMUP="1")["ok"]
    assert fake_openai.listings == []
    assert [(r.method, r.path) for r in fake_openai.requests] == [("POST", "/v1/responses")]


def test_a_server_slow_to_answer_the_preconnect_delays_no_turn(fake_openai, tmp_path):
    """The preconnect runs on a thread of its own: the first turn answers while its GET is unanswered."""
    fake_openai.models_delay = 60
    got = _child(fake_openai, tmp_path, join=False)
    assert got == {"ok": True, "preconnect_running": True, "legacy_httpx": False}
    statuses = {(r.method, r.path): r.status for r in fake_openai.listings + fake_openai.requests}
    assert statuses == {("GET", "/v1/models"): 0, ("POST", "/v1/responses"): 200}


def test_preconnect_never_raises(fake_openai):
    """An unreachable server, and the real 401, are dropped quietly (the first turn reports a real problem)."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # bound, not listening: refused
        warmup.preconnect(shared_client("sk-x", dead))
    warmup.preconnect(shared_client("sk-x", fake_openai.base_url))
    assert [(r.method, r.status) for r in fake_openai.listings] == [("GET", 401)]
    assert fake_openai.requests == []


def test_the_fake_lists_models_for_a_key(fake_openai):
    """``GET /v1/models`` as the API answers it: the list for a key (read by the SDK's typed
    ``models.list()``), the real 401 without one."""
    import openai

    client = openai.OpenAI(api_key="sk-x", base_url=fake_openai.base_url, max_retries=0)
    ids = [m.id for m in client.models.list()]
    assert "gpt-4o-mini" in ids
    try:
        client.get("/models", cast_to=object, options={"headers": {"Authorization": openai.Omit()}})
    except openai.AuthenticationError as exc:
        assert exc.status_code == 401 and NO_KEY_MESSAGE in str(exc)
    else:
        raise AssertionError("a request without a key was answered")
