"""What a server teaches, as a table: :meth:`ServerProfile.adapt` (failure → adaptation) and
:meth:`ServerProfile.observe` (answer → what is unlearned or said), on the profile alone — no provider, no server.
The texts are the servers' own (see :mod:`shiro_kernel.provider.failures`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shiro_kernel.provider.profile import NO_VISION_NOTICE, Answer, Failure, Profiles, ServerProfile

LOCAL = "http://127.0.0.1:8080/v1"

#: (the failure, the profile fields it sets, whether the next attempt streams, a phrase of the notice or None;
#: None for ``stream`` and ``notice`` together: nothing here helps, ``adapt`` returns None)
TABLE = [
    pytest.param(
        Failure(404, "Not Found", "responses"),
        {"responses_missing": True},
        True,
        "has no Responses API",
        id="a 404 page on /v1/responses: Chat Completions from then on",
    ),
    pytest.param(
        Failure(400, "This model is only supported in v1/responses and not in v1/chat/completions.", "chat"),
        {"responses_only": True},
        True,
        "switched to the Responses API",
        id="a model only on the Responses API",
    ),
    pytest.param(
        Failure(400, "System message must be at the beginning.", "chat", state=True),
        {"state_place": "user"},
        True,
        "as a user message marked as its note",
        id="a template that takes no system message later: the state as a user note",
    ),
    pytest.param(
        Failure(400, "Conversation roles must alternate user/assistant/user/assistant/...", "chat", state=True),
        {"state_place": "alternate"},
        True,
        "user messages in a row as one",
        id="a template whose roles alternate",
    ),
    pytest.param(
        Failure(
            400,
            "image input is not supported - hint: if this is unexpected, you may need --mmproj",
            "chat",
            images=True,
        ),
        {"images": False},
        True,
        NO_VISION_NOTICE[:30],
        id="a model that refuses images: figures as text",
    ),
    pytest.param(
        Failure(
            400,
            "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.",
            "chat",
        ),
        {"max_tokens_field": "max_completion_tokens"},
        True,
        None,
        id="a reasoning model's length field, said nothing",
    ),
    pytest.param(
        Failure(None, "the stream ended before any event", "chat", empty_stream=True),
        {},
        False,
        None,
        id="a stream that ended empty: asked once without streaming",
    ),
    pytest.param(
        Failure(
            400,
            "the request exceeds the available context size, try increasing it",
            "chat",
            body='{"n_ctx": 4096, "n_prompt_tokens": 5000}',
        ),
        {"context_window": 4096, "requested": 5000},
        None,
        None,
        id="an overflow: the window learned, the turn prunes (adapt returns None)",
    ),
    pytest.param(
        Failure(500, "internal error", "chat"),
        {},
        None,
        None,
        id="a failure nothing here helps: the backoff's or the error's",
    ),
]


@pytest.mark.parametrize(("failure", "learned", "stream", "notice"), TABLE)
def test_a_failure_teaches_one_adaptation(failure: Failure, learned: dict, stream: bool | None, notice: str | None):
    profile = ServerProfile(LOCAL, "qwen")
    before = dict(vars(profile))
    adapted = profile.adapt(failure, explicit_api=False)
    assert {k: v for k, v in vars(profile).items() if before[k] != v} == learned  # what it learned, and only that
    if stream is None:
        assert adapted is None
        return
    assert adapted is not None and adapted.stream is stream
    if notice is None:
        assert adapted.notice is None
    else:
        assert adapted.notice is not None and notice in adapted.notice


def test_an_api_the_user_chose_is_kept_and_the_error_is_theirs():
    profile = ServerProfile(LOCAL, "qwen")
    assert profile.adapt(Failure(404, "Not Found", "responses"), explicit_api=True) is None
    assert not profile.responses_missing and profile.api("responses", explicit=True) == "responses"


def test_a_success_unlearns_what_a_failure_taught():
    profile = ServerProfile(LOCAL, "qwen")
    profile.adapt(Failure(404, "Not Found", "responses"), explicit_api=False)
    profile.adapt(Failure(400, "image input is not supported", "chat", images=True), explicit_api=False)
    assert profile.api("responses", explicit=False) == "chat" and not profile.sends_images("auto")
    assert profile.observe(Answer("responses", images=True)) == []  # nothing said: the lesson goes quietly
    assert not profile.responses_missing and profile.images is None
    assert profile.api("responses", explicit=False) == "responses" and profile.sends_images("auto")


def test_what_an_answer_shows_is_learned_and_said_once():
    profile = ServerProfile(LOCAL, "qwen")
    assert profile.observe(Answer("chat", text_calls=True, usage=False)) == ["text_calls"]
    assert profile.observe(Answer("chat", text_calls=True)) == []  # once per server
    assert profile.text_tool_calls and profile.usage is False
    assert profile.observe(Answer("chat", plain_after_empty=True)) == ["streams_empty"]
    assert profile.observe(Answer("chat", plain_after_empty=True)) == [] and profile.streams_empty
    assert profile.observe(Answer("responses", store=True)) == [] and profile.keeps_state


def test_a_server_that_refused_a_reference_keeps_nothing_whatever_its_answers_say():
    profile = ServerProfile(LOCAL, "qwen", keeps_state=True)
    refused = Failure(400, 'unknown input item type: "item_reference"', "responses")
    assert profile.adapt(refused, explicit_api=False) is None  # the turn resends inline
    assert (profile.keeps_state, profile.keeps_nothing) == (False, True)
    profile.observe(Answer("responses", store=True))
    assert not profile.keeps_state


def test_what_holds_across_kernels_is_saved_and_what_may_change_is_not(tmp_path: Path):
    store = Profiles(tmp_path / "servers.json")
    profile = store.load(LOCAL, "qwen")
    profile.adapt(Failure(404, "Not Found", "responses"), explicit_api=False)
    profile.adapt(
        Failure(400, "exceeds the available context size", "chat", body='{"n_ctx": 4096}'), explicit_api=False
    )
    again = store.load(LOCAL, "qwen")
    assert again.responses_missing and again.context_window is None  # a restart may change the window
    assert json.loads((tmp_path / "servers.json").read_text()) == {
        "servers": {LOCAL: {"responsesMissing": True, "models": {"qwen": {}}}}
    }
