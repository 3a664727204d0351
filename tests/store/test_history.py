"""Prompt history (seed test/history.test.ts, checklist §6)."""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from shiro_kernel.store.history import LIMIT, PromptHistory, format_history, history_path
from shiro_kernel.store.paths import home, project_slug
from shiro_kernel.turn import Frontend


def test_path_is_per_project(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    assert history_path(a) == home() / "history" / f"{project_slug(a)}.json"
    PromptHistory.for_project(a).append("in a")
    assert PromptHistory.for_project(b).entries() == []
    assert PromptHistory.for_project(a).entries() == ["in a"]


def test_trims_ignores_blanks_and_slash_commands(tmp_path: Path) -> None:
    h = PromptHistory(tmp_path / "h.json")
    assert h.append("  hello  \n") is True
    assert h.append("   ") is False
    assert h.append("/sessions") is False
    assert h.append("  /todos") is False
    assert h.entries() == ["hello"]
    assert json.loads((tmp_path / "h.json").read_text()) == ["hello"]


def test_only_an_immediate_repeat_is_dropped(tmp_path: Path) -> None:
    h = PromptHistory(tmp_path / "h.json")
    for p in ["a", "a", " a ", "b", "a"]:
        h.append(p)
    assert h.entries() == ["a", "b", "a"]


def test_capped_at_200_newest(tmp_path: Path) -> None:
    h = PromptHistory(tmp_path / "h.json")
    for i in range(210):
        h.append(f"p{i}")
    entries = h.entries()
    assert len(entries) == LIMIT == 200
    assert entries[0] == "p10" and entries[-1] == "p209"


def test_corrupt_reads_empty_and_is_quarantined_before_the_next_write(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    path.write_text("[not json")
    h = PromptHistory(path)
    assert h.entries() == []
    assert path.read_text() == "[not json"  # reading never touches it
    h.append("fresh")
    assert h.entries() == ["fresh"]
    aside = list(tmp_path.glob("h.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text() == "[not json"


def test_non_strings_are_filtered(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    path.write_text(json.dumps(["a", 3, None, {"x": 1}, "b"]))
    assert PromptHistory(path).entries() == ["a", "b"]


def _append_many(path: str, who: int) -> None:
    h = PromptHistory(Path(path))
    for i in range(25):
        h.append(f"k{who}-{i}")


def test_concurrent_kernels_lose_nothing(tmp_path: Path) -> None:
    path = tmp_path / "h.json"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(path), k)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    entries = PromptHistory(path).entries()
    assert sorted(entries) == sorted(f"k{k}-{i}" for k in range(4) for i in range(25))
    for k in range(4):  # each kernel's own order is kept
        mine = [e for e in entries if e.startswith(f"k{k}-")]
        assert mine == [f"k{k}-{i}" for i in range(25)]


def test_format_history() -> None:
    assert format_history([]) == "no prompt history for this project yet"
    entries = [f"p{i}" for i in range(1, 11)] + ["two\nlines"]
    text = format_history(entries)
    lines = text.splitlines()
    assert lines[0] == " 1  p1"
    assert lines[-2:] == ["11  two", "    lines"]
    assert format_history(entries, limit=2).splitlines() == ["10  p10", "11  two", "    lines"]


def test_a_turn_records_its_prompt_off_its_path_and_warns_once_when_it_cannot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fake_openai: Any
) -> None:
    from fakeopenai import Reply

    from shiro_kernel.agent import Agent
    from shiro_kernel.config import Shiro
    from shiro_kernel.events import Event, Notice

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-history")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.chdir(tmp_path)
    agent = Agent(None, Shiro(model="gpt-4o-mini"))
    fake_openai.enqueue(Reply(text="one"), Reply(text="two"), Reply(text="three"))
    assert agent.ask("first question").reason == "answered"
    assert agent.location.history().entries() == ["first question"]  # written by the time the turn ended
    (home() / "history").rename(home() / "history-moved")
    (home() / "history").write_text("not a folder")  # the history cannot be written any more
    events: list[Event] = []
    assert agent.ask("second question", Frontend(on_event=events.append)).reason == "answered"
    warnings = [e.text for e in events if isinstance(e, Notice) and "prompt history" in e.text]
    assert len(warnings) == 1 and warnings[0].startswith("the prompt history was not updated")
    events.clear()
    assert agent.ask("third question", Frontend(on_event=events.append)).reason == "answered"
    assert not [e for e in events if isinstance(e, Notice) and "prompt history" in e.text]  # once, not per turn
    agent.close()
