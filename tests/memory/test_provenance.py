"""Memory with provenance: notes show where they came from in /notes, named-memory writes keep a
``.provenance.json`` sidecar (the index format is unchanged), and ``shiro notes --stale`` lists notes
not confirmed in 90 days."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

from fakeopenai import Call, Reply

from shiro_kernel.agent import Agent
from shiro_kernel.cli import main
from shiro_kernel.commands import run as command
from shiro_kernel.config import Shiro
from shiro_kernel.memory.named import PROVENANCE, MemoryStore
from shiro_kernel.memory.notes import NoteStore, source_line
from shiro_kernel.store import files as storage

SOURCE = {
    "sessionId": "0193ab2c-7f00-7000-8000-000000000000",
    "notebook": "/work/proj/analysis.ipynb",
    "cell": 4,
    "gitCommit": "a1b2c3d4e5f60718293a4b5c6d7e8f9012345678",
}


def test_notes_list_shows_provenance(tmp_path):
    store = NoteStore(tmp_path / "notes.json")
    store.add("fact", "sales.csv uses ;", source=SOURCE)
    store.add("gotcha", "no source here")
    store.recall("sales")
    assert store.format_list() == "\n".join(
        [
            "(gotcha) no source here",
            "(fact) sales.csv uses ;  [recalled 1x]",
            "  — from 0193ab2c · analysis.ipynb cell 4 · a1b2c3d",
        ]
    )
    assert source_line({"sessionId": "s1", "notebook": None, "cell": None, "gitCommit": None}) == "  — from s1"
    assert source_line({}) == "" and source_line("junk") == ""


def test_memory_write_records_a_sidecar_and_keeps_the_index(tmp_path):
    store = MemoryStore(tmp_path / "sys", tmp_path / "proj", "gpt-4o-mini")
    store.write("project", "plain", "no provenance")
    assert not (tmp_path / "proj" / PROVENANCE).exists()  # the CLI and bundles write none
    store.provenance = SOURCE
    store.write("project", "etl", "run etl.py first", description="how to load")
    index = (tmp_path / "proj" / "index.md").read_text()
    assert "- **etl** · project · " in index and "0193ab2c" not in index and "a1b2c3d" not in index
    side = json.loads((tmp_path / "proj" / PROVENANCE).read_text())
    assert set(side) == {"etl"}
    assert {k: side["etl"][k] for k in ("sessionId", "notebook", "cell", "gitCommit")} == SOURCE
    assert side["etl"]["writtenAt"][:4].isdigit()
    (tmp_path / "proj" / PROVENANCE).write_text("{broken")
    store.write("project", "etl", "v2")  # an unreadable sidecar is replaced, the write still succeeds
    assert set(json.loads((tmp_path / "proj" / PROVENANCE).read_text())) == {"etl"}


def test_a_turn_records_provenance_for_notes_and_memories(monkeypatch, fake_openai, tmp_path):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-prov")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.chdir(tmp_path)
    fake_openai.enqueue(
        Reply(
            tool_calls=[
                Call("remember", {"kind": "fact", "text": "the id column is unique"}),
                Call("memory_write", {"scope": "project", "name": "ids", "content": "id is unique"}),
            ]
        ),
        Reply(text="done"),
    )
    agent = Agent(None, Shiro(model="gpt-4o-mini", approval="auto"))
    assert agent.ask("remember it").reason == "answered"
    listing = command(agent, "/notes")
    assert listing.splitlines()[0] == "(fact) the id column is unique"
    assert (
        listing.splitlines()[1] == f"  — from {agent.current.session.id[:13]}"
    )  # as %shiro -r takes it (made this minute)
    side = json.loads((agent.memory.memories().dir_for("project") / PROVENANCE).read_text())
    assert side["ids"]["sessionId"] == agent.current.session.id


def test_stale_lists_notes_not_confirmed_in_90_days(tmp_path, capsys):
    proj = tmp_path / "proj"
    proj.mkdir()
    store = NoteStore.for_project(proj)
    store.add("fact", "old but recalled long ago", source=SOURCE)
    store.add("fact", "recalled yesterday")
    store.add("fact", "fresh")
    old = (datetime.now(timezone.utc) - timedelta(days=200)).isoformat()
    recent = (datetime.now(timezone.utc) - timedelta(days=1)).isoformat()
    entries = store.entries()
    for e in entries:
        e["createdAt"] = old if e["text"] != "fresh" else e["createdAt"]
    entries[0]["lastHitAt"], entries[0]["hits"] = old, 1
    entries[1]["lastHitAt"], entries[1]["hits"] = recent, 1
    storage.write_json(store.path, entries)
    assert [e["text"] for e in store.stale()] == ["old but recalled long ago"]
    assert main(["notes", "--project", str(proj), "--stale"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out == [f"(fact) old but recalled long ago  [recalled 1x]  (last confirmed {old[:10]})"]
