"""Project notes (seed shiro-neko test/memory.test.ts ported, plus locking and corruption)."""

from __future__ import annotations

import json
import multiprocessing
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from shiro_kernel.errors import CorruptFile, MemoryRefused
from shiro_kernel.memory import notes
from shiro_kernel.memory.notes import BOOT_HEADER, SUMMARIZE_SYSTEM, NoteStore
from shiro_kernel.store import paths
from shiro_kernel.tools import run_tool
from shiro_kernel.tools.base import ToolContext
from shiro_kernel.tools.memory_tools import TOOLS
from shiro_kernel.transcript import ToolCallPart


@pytest.fixture
def store(tmp_path: Path) -> NoteStore:
    return NoteStore.for_project(tmp_path / "proj")


def test_path_is_per_project_under_shiro_home(tmp_path: Path) -> None:
    a = NoteStore.for_project(tmp_path / "a")
    b = NoteStore.for_project(tmp_path / "b")
    assert a.path.parent == paths.home() / "memory"
    assert a.path.name == f"{paths.project_slug(tmp_path / 'a')}.json"
    a.add("fact", "only in a")
    assert b.entries() == []  # scoped per directory


def test_add_fields_and_pretty_json(store: NoteStore) -> None:
    added = store.add("decision", "  snake_case for DB columns, the ORM expects it  ")
    entry, stored = added.entry, added.stored
    assert stored == 1 and entry is not None
    assert entry["text"] == "snake_case for DB columns, the ORM expects it"
    assert set(entry) == {"id", "kind", "text", "createdAt", "hits"}
    assert entry["hits"] == 0 and entry["createdAt"].endswith("Z")
    raw = store.path.read_text()
    assert raw.startswith("[\n  {") and json.loads(raw)[0]["id"] == entry["id"]


def test_provenance_kept_verbatim(store: NoteStore) -> None:
    source = {"sessionId": "0193", "notebook": "a.ipynb", "cell": 3, "gitCommit": "abc123"}
    entry = store.add("fact", "with source", source=source).entry
    assert entry["source"] == source
    assert store.entries()[0]["source"] == source


def test_text_cut_to_400_and_empty_refused(store: NoteStore) -> None:
    entry = store.add("fact", "x" * 2000).entry
    assert len(entry["text"]) == 400
    with pytest.raises(MemoryRefused, match="^memory text is empty$"):
        store.add("fact", "   ")


def test_duplicate_refused_exact_trimmed_case_sensitive(store: NoteStore) -> None:
    store.add("fact", "tests run with bun test")
    before = store.path.read_bytes()
    added = store.add("fact", " tests run with bun test ")
    assert (added.entry, added.stored) == (None, 1)
    assert store.path.read_bytes() == before
    assert store.add("fact", "Tests run with bun test").entry is not None


def test_cap_keeps_newest_300(store: NoteStore) -> None:
    entries = [
        {"id": f"id{i}", "kind": "fact", "text": f"n{i}", "createdAt": "2024-01-01T00:00:00.000Z", "hits": 0}
        for i in range(300)
    ]
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text(json.dumps(entries))
    stored = store.add("fact", "newest").stored
    texts = [e["text"] for e in store.entries()]
    assert stored == 300 and len(texts) == 300
    assert texts[0] == "n1" and texts[-1] == "newest"


def test_junk_filtered_and_missing_file_is_empty(store: NoteStore) -> None:
    assert store.entries() == []
    ok = {"id": "1", "kind": "fact", "text": "ok", "createdAt": "2024-01-01T00:00:00.000Z", "hits": 0}
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text(json.dumps([ok, {"junk": True}, 42, {**ok, "kind": "nope"}]))
    assert [e["text"] for e in store.entries()] == ["ok"]


def test_corrupt_file_quarantined_not_overwritten(store: NoteStore) -> None:
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text("{not json")
    with pytest.raises(CorruptFile, match="not json|Expecting"):
        store.entries()
    with pytest.raises(CorruptFile):
        store.render_boot()
    # reading and a refused write leave it alone
    with pytest.raises(MemoryRefused):
        store.add("fact", "")
    assert store.path.read_text() == "{not json"
    added = store.add("fact", "after corruption")
    kept = list(store.path.parent.glob(store.path.name + ".corrupt-*"))
    assert len(kept) == 1 and kept[0].read_text() == "{not json" and added.set_aside == kept[0]
    assert [e["text"] for e in store.entries()] == ["after corruption"]


def test_recall_and_search(store: NoteStore) -> None:
    store.add("decision", "snake_case for DB columns, the ORM expects it")
    store.add("gotcha", "the migration must run before the seed")
    found = store.recall("snake_case columns")
    assert [e["text"] for e in found] == ["snake_case for DB columns, the ORM expects it"]
    assert store.recall("snake_case missing") == []
    with pytest.raises(MemoryRefused, match="^query is empty$"):
        store.recall("   ")


def test_recall_bumps_hits_persists_only_on_match(store: NoteStore) -> None:
    store.add("fact", "alpha one")
    store.add("fact", "alpha two")
    mtime = store.path.stat().st_mtime_ns
    assert store.recall("nothing-here") == []
    assert store.path.stat().st_mtime_ns == mtime
    store.recall("alpha")
    reloaded = NoteStore(store.path).entries()
    assert [e["hits"] for e in reloaded] == [1, 1]  # hits survive a reload
    assert all("lastHitAt" in e for e in reloaded)


def test_recall_returns_15_newest_but_bumps_all(store: NoteStore) -> None:
    for i in range(20):
        store.add("fact", f"term note {i}")
    found = store.recall("term")
    assert [e["text"] for e in found] == [f"term note {i}" for i in range(19, 4, -1)]
    assert all(e["hits"] == 1 for e in store.entries())


def test_forget_all_matches_case_insensitive(store: NoteStore) -> None:
    store.add("fact", "Uses Postgres 15")
    store.add("fact", "postgres runs on 5433")
    store.add("fact", "redis on 6379")
    assert store.forget("  POSTGRES ") == 2
    assert [e["text"] for e in store.entries()] == ["redis on 6379"]
    assert store.forget("mysql") == 0


def test_render_boot(store: NoteStore) -> None:
    assert store.render_boot() == ""
    store.add("command", "tests run with bun test, not npm test")
    store.add("gotcha", "the migration must run before the seed")
    store.add("decision", "snake_case for DB columns, the ORM expects it")
    store.recall("bun test")
    assert store.render_boot() == "\n".join(
        [
            "",
            "What you learned about this project in earlier sessions. Trust it, but verify anything",
            "that contradicts what you can see in the code now:",
            "- (command) tests run with bun test, not npm test",
            "- (decision) snake_case for DB columns, the ORM expects it",
            "- (gotcha) the migration must run before the seed",
        ]
    )
    assert BOOT_HEADER[0].startswith("What you learned")
    for i in range(30):
        store.add("fact", f"filler {i}")
    assert len(store.render_boot().splitlines()) == 3 + 20


def test_render_boot_notes_of_one_millisecond_newest_first(store: NoteStore) -> None:
    # Notes added within one millisecond share a createdAt (CI once saw it): the one later in the
    # file is the newer, so it comes first among equal hits.
    same = "2024-01-01T00:00:00.000Z"
    entries = [{"id": f"id{i}", "kind": "fact", "text": f"n{i}", "createdAt": same, "hits": 0} for i in range(3)]
    entries.append({"id": "old", "kind": "fact", "text": "older", "createdAt": "2023-01-01T00:00:00.000Z", "hits": 0})
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text(json.dumps(entries))
    assert store.render_boot().splitlines()[3:] == ["- (fact) n2", "- (fact) n1", "- (fact) n0", "- (fact) older"]


def test_format_list(store: NoteStore) -> None:
    assert store.format_list() == "nothing remembered about this project yet"
    store.add("fact", "first")
    store.add("gotcha", "second")
    store.recall("first")
    store.recall("first")
    assert store.format_list() == "(gotcha) second\n(fact) first  [recalled 2x]"


def test_stale(store: NoteStore) -> None:
    old = (datetime.now(timezone.utc) - timedelta(days=120)).isoformat().replace("+00:00", "Z")
    recent = (datetime.now(timezone.utc) - timedelta(days=5)).isoformat().replace("+00:00", "Z")
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text(
        json.dumps(
            [
                {"id": "1", "kind": "fact", "text": "old unconfirmed", "createdAt": old, "hits": 0},
                {
                    "id": "2",
                    "kind": "fact",
                    "text": "old but recalled",
                    "createdAt": old,
                    "hits": 1,
                    "lastHitAt": recent,
                },
                {"id": "3", "kind": "fact", "text": "new", "createdAt": recent, "hits": 0},
            ]
        )
    )
    assert [e["text"] for e in store.stale()] == ["old unconfirmed"]


# -- /memory ------------------------------------------------------------------------------------
def _fill(store: NoteStore, n: int, used: int = 0) -> None:
    entries = [
        {
            "id": f"{i:04d}",
            "kind": "fact",
            "text": f"note {i}",
            "createdAt": "2024-01-01T00:00:00.000Z",
            "hits": 1 if i < used else 0,
        }
        for i in range(n)
    ]
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text(json.dumps(entries))


def test_summarize_thresholds_say_which_rule(store: NoteStore) -> None:
    calls: list[tuple[str, str]] = []

    def ask(system: str, prompt: str) -> str:
        calls.append((system, prompt))
        return "[fact] merged"

    assert notes.NoteStore(store.path).summarize(None) == "no model available to summarize memory"
    _fill(store, 60)
    msg = store.summarize(ask)
    assert msg.startswith("memory left as is: 60 entries, not past 60") and not calls
    _fill(store, 70, used=69)  # lonely: one unused entry
    assert store.summarize(ask) == "memory left as is: 70 entries, too few unused ones to merge"
    assert not calls


def test_summarize_merges_unused_keeps_used_verbatim(store: NoteStore) -> None:
    _fill(store, 70, used=10)
    seen: dict[str, str] = {}

    def ask(system: str, prompt: str) -> str:
        seen["system"], seen["prompt"] = system, prompt
        return "Here you go:\n[fact] merged one\n  [GOTCHA]  merged two  \n1. [fact] numbered is skipped\n"

    assert store.summarize(ask) == "memory compacted: 70 entries into 12"
    assert seen["system"] == SUMMARIZE_SYSTEM
    assert seen["prompt"].splitlines()[0] == "[fact] note 10" and len(seen["prompt"].splitlines()) == 60
    after = NoteStore(store.path).entries()  # survives a reload
    assert [e["text"] for e in after[:10]] == [f"note {i}" for i in range(10)]
    assert [(e["kind"], e["text"], e["hits"]) for e in after[10:]] == [
        ("fact", "merged one", 0),
        ("gotcha", "merged two", 0),
    ]


def test_summarize_unparseable_reply_leaves_store(store: NoteStore) -> None:
    _fill(store, 70)
    before = store.path.read_bytes()
    msg = store.summarize(lambda s, p: "I could not do that, sorry.")
    assert msg == "memory left as is: the model's reply had no parseable notes"
    assert store.path.read_bytes() == before


def test_summarize_model_failure_leaves_store(store: NoteStore) -> None:
    _fill(store, 70)
    before = store.path.read_bytes()

    def boom(system: str, prompt: str) -> str:
        raise RuntimeError("timeout")

    assert store.summarize(boom).startswith("memory left as is: the model call failed")
    assert store.path.read_bytes() == before


# -- concurrency --------------------------------------------------------------------------------
def _remember_many(args: tuple[str, int]) -> None:
    path, worker = args
    s = NoteStore(Path(path))
    for i in range(50):
        s.add("fact", f"worker {worker} note {i}")


def test_eight_processes_fifty_notes_each_all_kept(store: NoteStore, monkeypatch: pytest.MonkeyPatch) -> None:
    # 8 x 50 = 400 is past the 300-entry cap, so lift the cap (forked children inherit it) to see
    # that no kernel loses another's notes; the capped run is checked below.
    monkeypatch.setattr(notes, "MAX_ENTRIES", 1000)
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(8) as pool:
        pool.map(_remember_many, [(str(store.path), w) for w in range(8)])
    texts = {e["text"] for e in store.entries()}
    assert texts == {f"worker {w} note {i}" for w in range(8) for i in range(50)}
    assert not list(store.path.parent.glob("*.tmp"))


def test_eight_processes_with_the_real_cap_keep_the_newest_300(store: NoteStore) -> None:
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(8) as pool:
        pool.map(_remember_many, [(str(store.path), w) for w in range(8)])
    entries = store.entries()
    assert len(entries) == 300 == len({e["text"] for e in entries})
    # file order is write order, so the ids (uuid7, per-process monotonic) of each worker still ascend
    for w in range(8):
        mine = [int(e["text"].rsplit(" ", 1)[1]) for e in entries if e["text"].startswith(f"worker {w} ")]
        assert mine == sorted(mine) and (not mine or mine[-1] == 49)


# -- the tools ----------------------------------------------------------------------------------
def _call(name: str, args: dict, extras: dict, tmp_path: Path) -> tuple[str, bool]:
    tools = {t.name: t for t in TOOLS}
    ctx = ToolContext(root=tmp_path, **extras)
    part = run_tool(tools, ToolCallPart("c1", name, json.dumps(args)), ctx)
    return part.output, part.is_error


def test_tools_texts(store: NoteStore, tmp_path: Path) -> None:
    extras = {"notes": store, "provenance": {"sessionId": "s1", "notebook": "n.ipynb", "cell": 2, "gitCommit": None}}
    out, err = _call("remember", {"kind": "gotcha", "text": " the seed runs after the migration "}, extras, tmp_path)
    assert (out, err) == ("Remembered as gotcha (1 stored): the seed runs after the migration", False)
    assert store.entries()[0]["source"]["sessionId"] == "s1"
    out, _ = _call("remember", {"kind": "gotcha", "text": "the seed runs after the migration "}, extras, tmp_path)
    assert out == "Already recorded: the seed runs after the migration"
    out, _ = _call("recall", {"query": "seed migration"}, extras, tmp_path)
    assert out == "(gotcha) the seed runs after the migration"
    out, _ = _call("recall", {"query": "kafka"}, extras, tmp_path)
    assert out == 'Nothing recorded about "kafka".'
    out, err = _call("recall", {"query": " "}, extras, tmp_path)
    assert (out, err) == ("Error: query is empty", True)
    out, err = _call("remember", {"kind": "fact", "text": ""}, extras, tmp_path)
    assert (out, err) == ("Error: memory text is empty", True)
    _call("remember", {"kind": "fact", "text": "seed data lives in fixtures/"}, extras, tmp_path)
    out, _ = _call("forget", {"text": "kafka"}, extras, tmp_path)
    assert out == 'No memory matches "kafka".'
    out, _ = _call("forget", {"text": "the seed runs"}, extras, tmp_path)
    assert out == "Forgot 1 memory."
    _call("remember", {"kind": "fact", "text": "seed two"}, extras, tmp_path)
    out, _ = _call("forget", {"text": "SEED"}, extras, tmp_path)
    assert out == "Forgot 2 memories."


def test_tools_disabled(tmp_path: Path) -> None:
    for name, args in (
        ("remember", {"kind": "fact", "text": "x"}),
        ("recall", {"query": "x"}),
        ("forget", {"text": "x"}),
        ("memory_read", {"name": None, "scope": None}),
    ):
        out, err = _call(name, args, {"notes": None, "memories": None}, tmp_path)
        assert err and out == "Error: memory is disabled (--no-memory)"


def test_tool_specs() -> None:
    by = {t.name: t for t in TOOLS}
    assert list(by) == ["remember", "recall", "forget", "memory_read", "memory_write"]
    # what changes what later sessions are told asks first; reading does not
    assert {t.name for t in TOOLS if t.needs_approval} == {"remember", "forget", "memory_write"}
    assert by["remember"].parameters["properties"]["kind"]["enum"] == ["fact", "decision", "gotcha", "command"]
    assert by["recall"].parameters["properties"]["query"]["description"] == "Words that would appear in the note"
    assert by["memory_read"].parameters["properties"]["name"]["type"] == ["string", "null"]
    assert by["memory_write"].parameters["properties"]["scope"]["enum"] == ["project", "system"]
