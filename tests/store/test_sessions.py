"""Session records, the SQLite index, autosave and the resume texts (seed test/store.test.ts,
farewell.test.ts, checklist §4)."""

from __future__ import annotations

import builtins
import io
import json
import multiprocessing
import os
import re
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from fsutil import read_only

from shiro_kernel.cli.sessions import transcript_text
from shiro_kernel.errors import Ambiguous, CorruptFile, RequestError, StoreError
from shiro_kernel.events import Usage
from shiro_kernel.session import Session
from shiro_kernel.store import files as storage
from shiro_kernel.store.autosave import Autosaver
from shiro_kernel.store.index import INDEX_NAME, SessionInfo
from shiro_kernel.store.paths import home
from shiro_kernel.store.records import session_from_record, session_to_record, title_of
from shiro_kernel.store.sessions import SessionStore
from shiro_kernel.transcript import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from shiro_kernel.ui.session_text import format_row, format_rows, resume_hint, resumed_line


def make_session(
    prompt: str = "why does the pagination test fail?",
    *,
    sid: str | None = None,
    notebook: str | None = "/work/nb/analysis.ipynb",
    cwd: str = "/work/nb",
) -> Session:
    kwargs = {"id": sid} if sid else {}
    s = Session(notebook_path=notebook, cwd=cwd, **kwargs)
    s.messages.append(Message.user(prompt))
    s.messages.append(
        Message(
            "assistant",
            [
                ReasoningPart(["thinking"], "enc", item_id="rs_1"),
                TextPart("Let me run it.", item_id="msg_1", meta={"phase": "commentary"}),
                ToolCallPart("call_1", "python", '{"code": "1+1"}', item_id="fc_1"),
            ],
        )
    )
    s.messages.append(Message("tool", [ToolResultPart("call_1", "python", "2")]))
    return s


@pytest.fixture
def store() -> SessionStore:
    return SessionStore()


# -- record --------------------------------------------------------------------------------------------
def test_store_lives_under_home_and_record_has_the_seed_fields(store: SessionStore) -> None:
    assert store.root == home() / "sessions"
    s = make_session()
    s.usage = Usage(48210, 3105, 0.0913)
    s.tasks.replace([{"content": "fix", "status": "in_progress"}])
    assert store.save(s, model="gpt-5") is True
    path = store.root / f"{s.id}.json"
    text = path.read_text()
    assert text.startswith('{\n  "id": ')  # 2-space JSON
    record = json.loads(text)
    assert list(record) == [
        "id",
        "createdAt",
        "updatedAt",
        "cwd",
        "provider",
        "model",
        "title",
        "inputTokens",
        "outputTokens",
        "costUsd",
        "notebook",
        "notebookPath",
        "messages",
    ]
    assert record["provider"] == "openai" and record["model"] == "gpt-5"
    assert record["title"] == "why does the pagination test fail?"
    assert (record["inputTokens"], record["outputTokens"], record["costUsd"]) == (48210, 3105, 0.0913)
    assert record["notebook"] == {"todos": [{"content": "fix", "status": "in_progress"}]}
    assert record["notebookPath"] == "/work/nb/analysis.ipynb" and record["cwd"] == "/work/nb"
    assert record["messages"][1]["parts"][1] == {
        "type": "text",
        "text": "Let me run it.",
        "itemId": "msg_1",
        "meta": {"phase": "commentary"},
    }


def test_cost_omitted_when_unpriced(store: SessionStore) -> None:
    s = make_session()
    s.usage = Usage(10, 2, None)
    store.save(s, model="local-llm")
    assert "costUsd" not in json.loads((store.root / f"{s.id}.json").read_text())


def test_round_trip_restores_messages_totals_and_tasks(store: SessionStore) -> None:
    s = make_session()
    s.usage = Usage(5, 6, 0.5)
    s.tasks.replace([{"content": "a", "status": "done"}, {"content": "b", "status": "blocked", "note": "n"}])
    store.save(s, model="gpt-5")
    back = store.load(s.id)
    assert back is not None
    assert back.id == s.id and back.created_at == s.created_at and back.cwd == s.cwd
    assert back.notebook_path == s.notebook_path
    assert [m.to_json() for m in back.messages] == [m.to_json() for m in s.messages]
    assert back.usage == Usage(5, 6, 0.5)
    assert back.tasks.state() == s.tasks.state()
    # record -> session -> record keeps everything but the fresh updatedAt
    r1 = session_to_record(s, "m", updated_at="X")
    assert session_to_record(session_from_record(r1), "m", updated_at="X") == r1


def test_a_session_with_no_messages_is_never_written(store: SessionStore) -> None:
    assert store.save(Session(), model="gpt-5") is False
    assert not store.root.exists()  # not even the folder


def test_save_stamps_a_fresh_updated_at(store: SessionStore) -> None:
    s = make_session()
    store.save(s, model="m")
    first = json.loads((store.root / f"{s.id}.json").read_text())["updatedAt"]
    time.sleep(0.01)
    store.save(s, model="m")
    second = json.loads((store.root / f"{s.id}.json").read_text())["updatedAt"]
    assert second > first
    assert store.list()[0].updated_at == second


def test_load_unknown_corrupt_or_bad_id_raises(store: SessionStore) -> None:
    with pytest.raises(RequestError, match='no session matching "0193ab2c-0000'):
        store.load("0193ab2c-0000-7000-8000-000000000000")
    store.root.mkdir(parents=True)
    (store.root / "bad.json").write_text("{ not json")
    with pytest.raises(CorruptFile):
        store.load("bad")
    with pytest.raises(RequestError, match="not a session id"):
        store.load("../etc/passwd")


def test_title_rule() -> None:
    assert title_of([Message.user("x" * 100)]) == "x" * 60 + "..."
    assert len(title_of([Message.user("x" * 100)])) == 63
    assert title_of([Message.user("y" * 60)]) == "y" * 60
    assert title_of([]) == "untitled"
    assert title_of([Message("assistant", [TextPart("hi")])]) == "untitled"
    assert title_of([Message("user", [ToolResultPart("c", "x", "o")]), Message.user("second")]) == "second"
    assert title_of([Message.user("a cell\nbody  with   spaces")]) == "a cell body with spaces"


# -- list / latest / resolve ------------------------------------------------------------------------------
def test_list_newest_first_limit_and_missing_dir(store: SessionStore) -> None:
    assert store.list() == []
    assert not store.root.exists()  # listing creates nothing
    ids = []
    for i in range(20):
        s = make_session(f"prompt {i}")
        store.save(s, model="m")
        ids.append(s.id)
    rows = store.list()
    assert len(rows) == 15
    assert [r.id for r in rows] == ids[::-1][:15]
    assert [r.updated_at for r in rows] == sorted((r.updated_at for r in rows), reverse=True)
    assert len(store.list(100)) == 20 and rows[0].messages == 3 and rows[0].title == "prompt 19"


def test_corrupt_record_is_skipped_and_never_overwritten(store: SessionStore) -> None:
    good = make_session()
    store.save(good, model="m")
    bad_id = "0193ab2c-dead-7000-8000-000000000000"
    (store.root / f"{bad_id}.json").write_text("{ truncated")
    assert [r.id for r in SessionStore().list()] == [good.id]
    assert [r.id for r in store.list()] == [good.id]
    with pytest.raises(RequestError):
        store.resolve("0193ab2c")
    # a session that happens to have that id: the corrupt file is moved aside, not overwritten
    s = make_session("new content", sid=bad_id)
    store.save(s, model="m")
    aside = list(store.root.glob(f"{bad_id}.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_text() == "{ truncated"
    assert store.load(bad_id) is not None
    assert {r.id for r in store.list()} == {good.id, bad_id}


def test_corrupt_record_discovered_at_save_without_index(store: SessionStore) -> None:
    s = make_session()
    store.save(s, model="m")
    (store.root / f"{s.id}.json").write_text("garbage")  # in place, behind the index's back
    store.save(s, model="m")
    assert len(list(store.root.glob(f"{s.id}.json.corrupt-*"))) == 1
    assert store.load(s.id) is not None


def test_resolve_exact_unique_prefix_ambiguous_unknown(store: SessionStore) -> None:
    a = make_session(sid="0193a000-0000-7000-8000-000000000001")
    b = make_session(sid="0193b000-0000-7000-8000-000000000002")
    store.save(a, model="m"), store.save(b, model="m")
    assert store.resolve(a.id) == a.id
    assert store.resolve("0193a") == a.id
    assert store.resolve("0193B") == b.id
    with pytest.raises(Ambiguous) as info:
        store.resolve("0193")
    assert info.value.matches == [a.id, b.id]
    for unknown in ("ffff", "", "../x"):
        with pytest.raises(RequestError, match=f'no session matching "{re.escape(unknown)}"'):
            store.resolve(unknown)
    assert str(info.value) == ('no session matching "0193" (ambiguous: 2 sessions start with it: 0193a000, 0193b000)')


def test_shown_ids_are_whole_groups_unique_here_and_never_under_8(store: SessionStore) -> None:
    from shiro_kernel.ids import uuid7
    from shiro_kernel.store.short_ids import shown_length, still_open

    old = [f"0193ab2c-{n:04x}-7000-8000-00000000000{n}" for n in (1, 2)]  # same 65 s window, long ago
    alone = "0193ff00-0000-7000-8000-000000000009"
    for sid in [*old, alone]:
        store.save(make_session(sid=sid), model="m")
    assert store.short_id(alone) == "0193ff00"  # the seed's 8
    assert [store.short_id(s) for s in old] == ["0193ab2c-0001", "0193ab2c-0002"]  # never "0193ab2c-000"
    assert all(store.resolve(store.short_id(s)) == s for s in [*old, alone])
    # a session started this minute shows its millisecond: one started later in the minute cannot share it
    now = uuid7()
    assert still_open(now) and not still_open(alone)
    store.save(make_session(sid=now), model="m")
    shown = store.short_id(now)
    later = make_session(sid=uuid7())
    store.save(later, model="m")
    assert len(shown) == 13 and store.resolve(shown) == now and store.resolve(store.short_id(later.id)) == later.id
    # the window closes 65.5 s after it opened (its first 8 digits are the top of the millisecond clock)
    ms = int(now.replace("-", "")[:12], 16)
    assert not still_open(now, now_ms=ms + 65_536) and shown_length(now, 8, now_ms=ms + 65_536) == 8
    assert shown_length(alone, 20) == 23 and shown_length(alone, 36) == 36


def test_a_broken_home_still_shows_ids(tmp_path: Path) -> None:
    from shiro_kernel.store.short_ids import shown_id

    (tmp_path / "sessions").write_text("not a folder")  # SHIRO_HOME/sessions is a file: no error from showing
    assert shown_id(tmp_path / "sessions", "0193ab2c-0001-7000-8000-000000000001") == "0193ab2c"
    assert shown_id(tmp_path / "missing", "0193ab2c-0001-7000-8000-000000000001") == "0193ab2c"


def test_latest_for_notebook_and_cwd_fallback(store: SessionStore) -> None:
    one = make_session("one", notebook="/p/a.ipynb", cwd="/p")
    two = make_session("two", notebook="/p/b.ipynb", cwd="/p")
    three = make_session("three", notebook=None, cwd="/q")
    for s in (one, two, three):
        store.save(s, model="m")
        time.sleep(0.002)
    assert store.latest_for_notebook("/p/a.ipynb").id == one.id
    assert store.latest_for_notebook(Path("/p/sub/../b.ipynb")).id == two.id
    assert store.latest_for_notebook("/p/c.ipynb") is None
    assert store.latest_for_notebook(None, cwd="/q").id == three.id
    assert store.latest_for_notebook(None, cwd="/p").id == two.id  # newest for this directory
    assert store.latest_for_notebook(None, cwd="/elsewhere") is None
    store.save(one, model="m")  # saving again makes it the newest
    assert store.latest_for_notebook(None, cwd="/p").id == one.id


# -- the index ----------------------------------------------------------------------------------------------
def _rows(store: SessionStore) -> dict[str, tuple]:
    db = sqlite3.connect(store.root / INDEX_NAME)
    try:
        return {
            r[0]: r[1:]
            for r in db.execute(
                "SELECT id, title, messages, notebook_path, cwd, updated_at, mtime_ns, size FROM sessions"
            )
        }
    finally:
        db.close()


def test_index_is_kept_and_repaired(store: SessionStore) -> None:
    s = make_session()
    store.save(s, model="m")
    assert _rows(store)[s.id][:4] == (s.messages[0].text, 3, s.notebook_path, s.cwd)
    # missing -> rebuilt
    store.index.close()
    for name in (INDEX_NAME, INDEX_NAME + "-wal", INDEX_NAME + "-shm"):
        (store.root / name).unlink(missing_ok=True)
    assert [r.id for r in SessionStore().list()] == [s.id]
    assert (store.root / INDEX_NAME).exists()
    # unreadable -> set aside and rebuilt
    (store.root / INDEX_NAME).write_bytes(b"this is not a database, not even close" * 100)
    for name in (INDEX_NAME + "-wal", INDEX_NAME + "-shm"):
        (store.root / name).unlink(missing_ok=True)
    assert [r.id for r in SessionStore().list()] == [s.id]
    assert list(store.root.glob(INDEX_NAME + ".corrupt-*"))
    store = SessionStore()
    # a record written behind the index's back (new file) -> seen
    other = make_session("written elsewhere")
    storage.write_json(store.root / f"{other.id}.json", session_to_record(other, "m"))
    assert {r.id for r in store.list()} == {s.id, other.id}
    # an existing record replaced behind its back -> new title seen
    record = session_to_record(s, "m")
    record["title"] = "retitled"
    time.sleep(0.01)
    storage.write_json(store.root / f"{s.id}.json", record)
    assert {r.id: r.title for r in store.list()}[s.id] == "retitled"
    # a deleted record -> gone
    (store.root / f"{other.id}.json").unlink()
    assert [r.id for r in store.list()] == [s.id]


def test_a_legacy_json_index_is_not_a_record(store: SessionStore) -> None:
    store.root.mkdir(parents=True)
    (store.root / "index.json").write_text('{"version": 2, "sessions": []}')
    s = make_session()
    store.save(s, model="m")
    assert [r.id for r in store.list()] == [s.id] and not (store.root / "index.json").exists()


def _fast_records(root: Path, n: int) -> list[str]:
    """n minimal records written directly (no store), ids in creation order."""
    root.mkdir(parents=True, exist_ok=True)
    ids = []
    for i in range(n):
        sid = f"{i:08x}-0000-7000-8000-{i:012x}"
        ids.append(sid)
        (root / f"{sid}.json").write_text(
            json.dumps(
                {
                    "id": sid,
                    "createdAt": "2025-01-01T00:00:00.000Z",
                    "updatedAt": f"2025-01-01T00:00:{i // 1000:02d}.{i % 1000:03d}Z",
                    "cwd": "/p",
                    "notebookPath": f"/p/nb{i % 7}.ipynb",
                    "title": f"t{i}",
                    "messages": [{"role": "user", "parts": [{"type": "text", "text": f"t{i}"}]}],
                }
            )
        )
    return ids


class _ReadCounter:
    """Counts every file opened for reading (builtins.open, io.open, Path.read_text/read_bytes)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.paths: list[str] = []
        real_open = builtins.open

        def counting_open(file, mode="r", *args, **kwargs):  # type: ignore[no-untyped-def]
            if "r" in mode and "+" not in mode:
                self.paths.append(os.fspath(file) if not isinstance(file, int) else f"fd{file}")
            return real_open(file, mode, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", counting_open)
        monkeypatch.setattr(io, "open", counting_open)


def test_ten_thousand_records_list_and_resolve_read_no_record(
    store: SessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    ids = _fast_records(store.root, 10_000)
    assert len(store.list(15)) == 15  # the first listing builds the index, reading every record once
    counter = _ReadCounter(monkeypatch)
    fresh = SessionStore()  # a new kernel: a new connection
    rows = fresh.list(15)
    assert [r.id for r in rows] == ids[::-1][:15]
    assert fresh.resolve(ids[1234][:13]) == ids[1234]
    assert fresh.latest_for_notebook("/p/nb3.ipynb").id == next(i for i in reversed(ids) if int(i[:8], 16) % 7 == 3)
    assert counter.paths == []  # no record was read: SQLite only
    # a save by another kernel: seen at once, still no record read
    s = make_session("the newest")
    SessionStore().save(s, model="m")
    counter.paths.clear()
    assert fresh.list(1)[0].id == s.id
    assert counter.paths == []


def _save_many(root: str, who: int, shared: str) -> None:
    store = SessionStore(Path(root))
    for i in range(10):
        store.save(make_session(f"kernel {who} prompt {i}"), model="m")
        shared_session = make_session(f"shared by {who} #{i}", sid=shared)
        store.save(shared_session, model="m")


def test_concurrent_saves_from_four_processes_keep_the_index_consistent(store: SessionStore) -> None:
    shared = "0193ffff-0000-7000-8000-000000000000"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_save_many, args=(str(store.root), k, shared)) for k in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    rows = _rows(store)
    on_disk = {p.name[:-5] for p in store.root.glob("*.json")}
    # 40 own sessions and the shared one; a save of the shared id over another process's newer write
    # goes to a copy under a new id instead (the conflict guard), so there may be a few more
    assert len(on_disk) >= 41 and shared in on_disk and set(rows) == on_disk
    titles = {json.loads((store.root / f"{sid}.json").read_text())["title"] for sid in on_disk}
    assert {f"kernel {k} prompt {i}" for k in range(4) for i in range(10)} <= titles
    for sid, row in rows.items():  # every row describes the record as it is on disk
        record = json.loads((store.root / f"{sid}.json").read_text())
        st = (store.root / f"{sid}.json").stat()
        assert (row[4], row[0], row[5], row[6]) == (record["updatedAt"], record["title"], st.st_mtime_ns, st.st_size)
    assert not list(store.root.glob("*.tmp")) and not list(store.root.glob(".*.tmp"))
    assert len(store.list(None)) == len(on_disk)


def test_a_read_only_home_still_lists(store: SessionStore) -> None:
    s = make_session()
    store.save(s, model="m")
    store.index.close()
    for name in (INDEX_NAME, INDEX_NAME + "-wal", INDEX_NAME + "-shm"):
        (store.root / name).unlink(missing_ok=True)
    with read_only(store.root):
        reader = SessionStore()
        assert [r.id for r in reader.list()] == [s.id]  # an index in memory, built from the records
        with pytest.raises(StoreError, match="could not"):
            reader.save(make_session("more"), model="m")


# -- autosave ----------------------------------------------------------------------------------------------
class _ThreadRecordingStore(SessionStore):
    def __init__(self) -> None:
        super().__init__()
        self.threads: list[int] = []

    def save(self, session: Session, *, model: str | None = None, tail: Sequence[Message] = ()) -> bool:
        self.threads.append(threading.get_ident())
        return super().save(session, model=model, tail=tail)


def test_autosave_burst_writes_a_handful_of_times_off_thread() -> None:
    store = _ThreadRecordingStore()
    s = Session(notebook_path="/p/a.ipynb")
    saver = Autosaver(store, s, lambda: "gpt-5", at_exit=False)
    s.append(Message.user("start"))
    for i in range(200):  # a long tool loop: a change every millisecond or so
        s.append(Message("assistant", [TextPart(f"step {i}")]))
        time.sleep(0.001)
    assert saver.writes == 0  # the debounce keeps restarting
    deadline = time.monotonic() + 3
    while saver.writes == 0 and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.5)
    assert saver.writes in (1, 2, 3)  # a handful of writes for 201 changes, not 201
    assert threading.get_ident() not in store.threads
    loaded = store.load(s.id)
    assert loaded is not None and len(loaded.messages) == 201
    assert json.loads((store.root / f"{s.id}.json").read_text())["model"] == "gpt-5"
    saver.close()


def test_autosave_flush_close_and_todo_changes() -> None:
    store = SessionStore()
    s = Session()
    saver = Autosaver(store, s, lambda: "m", delay=10, at_exit=False)
    assert saver.flush() is False  # nothing to write
    saver.close()
    assert saver.writes == 0 and not store.root.exists()  # empty session: never written

    s = Session()
    saver = Autosaver(store, s, lambda: "m", delay=10, at_exit=False)
    s.append(Message.user("hi"))
    assert saver.pending
    assert saver.flush() is True and saver.writes == 1 and not saver.pending
    s.tasks.replace([{"content": "a", "status": "in_progress"}])  # a todo_write schedules a save
    assert saver.pending
    saver.close()
    assert saver.writes == 2 and not saver.pending
    assert store.load(s.id) is not None and store.load(s.id).tasks.state()[0]["content"] == "a"
    s.append(Message.user("after close"))
    assert not saver.pending and saver._on_change not in s.listeners


def test_autosave_errors_raise_on_flush_and_reach_on_error_from_the_timer() -> None:
    class Broken(SessionStore):
        def save(self, session: Session, *, model: str | None = None, tail: Sequence[Message] = ()) -> bool:
            raise StoreError("could not write x (No space left on device)")

    s = make_session()
    seen: list[StoreError] = []
    saver = Autosaver(Broken(), s, lambda: "m", delay=0.05, at_exit=False, on_error=seen.append)
    with pytest.raises(StoreError, match="No space left"):
        saver.flush()
    s.append(Message.user("more"))
    deadline = time.monotonic() + 3
    while not seen and time.monotonic() < deadline:
        time.sleep(0.02)
    assert seen and saver.writes == 0 and saver.saved_messages == 0
    saver.close()


# -- texts ------------------------------------------------------------------------------------------------
def test_row_and_list_format() -> None:
    info = SessionInfo(
        "0193ab2c-1111-7000-8000-000000000000",
        "2025-01-01T00:00:00.000Z",
        "2025-06-02T13:45:12.345Z",
        "why does the pagination test fail?",
        8,
        None,
        "/p",
    )
    assert format_row(info) == "0193ab2c  2025-06-02 13:45  8msg  why does the pagination test fail?"
    assert format_rows([]) == "no saved sessions"
    assert format_rows([info, info]).count("\n") == 1
    assert resumed_line(info) == 'resumed 0193ab2c — 8 messages: "why does the pagination test fail?"'


def test_resumed_line_from_a_session() -> None:
    s = make_session(sid="0193ab2c-1111-7000-8000-000000000000")
    assert resumed_line(s) == 'resumed 0193ab2c — 3 messages: "why does the pagination test fail?"'
    one = Session(id="0193ab2c-1111-7000-8000-000000000000", messages=[Message("assistant", [TextPart("x")])])
    assert resumed_line(one) == "resumed 0193ab2c — 1 message"


def test_resume_hint_follows_the_farewell_rules() -> None:
    s = make_session(sid="0193ab2c-1111-7000-8000-000000000000")
    hint = resume_hint(s)
    assert hint == ('Saved 3 messages: "why does the pagination test fail?" · resume: %shiro -c or %shiro -r 0193ab2c')
    assert s.id not in hint and "\n" not in hint
    long = make_session("z" * 70)
    assert resume_hint(long).startswith(f'Saved 3 messages: "{"z" * 49}..." · resume:')
    one = Session(messages=[Message("assistant", [TextPart("x")])])
    assert resume_hint(one).startswith("Saved 1 message · resume:")  # untitled: no title, no ""
    assert '""' not in resume_hint(one)
    empty = resume_hint(Session())
    assert empty == "Nothing to save from this session." and "-c" not in empty and "-r " not in empty


def test_transcript_text(store: SessionStore) -> None:
    s = make_session()
    s.tasks.replace([{"content": "a", "status": "done"}])
    store.save(s, model="gpt-5")
    text = transcript_text(store.load_record(s.id))
    assert text.splitlines()[0] == f'session {s.id}  "why does the pagination test fail?"'
    assert "you: why does the pagination test fail?" in text
    assert "shiro: Let me run it." in text
    assert '→ python(code="1+1")' in text and "  ← 2" in text
    assert "[x] a" in text


def test_every_sessions_countdown_runs_on_one_thread(tmp_path):
    """A change starts no thread (a turn would pay for starting one): six sessions changing at once are
    counted down on one clock thread, and each is written once its countdown ends."""
    store = SessionStore(tmp_path / "sessions")
    sessions = [Session() for _ in range(6)]
    savers = [Autosaver(store, s, lambda: "m", delay=0.05, at_exit=False) for s in sessions]
    for round_ in range(3):
        for s in sessions:
            s.append(Message.user(f"change {round_}"))
    clocks = [t for t in threading.enumerate() if t.name == "shiro-autosave"]
    assert len(clocks) == 1
    deadline = time.monotonic() + 5
    while any(v.writes == 0 for v in savers) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert [v.writes for v in savers] == [1] * 6 and not any(v.pending for v in savers)
    assert all(len(store.load(s.id).messages) == 3 for s in sessions)
    assert [t for t in threading.enumerate() if t.name == "shiro-autosave"] == clocks  # still the one
    for v in savers:
        v.close()


def test_a_long_burst_of_changes_still_writes_every_max_wait(tmp_path):
    """The debounce restarts on every change, but a turn that changes the history for longer than
    ``max_wait`` is written meanwhile: a kernel dying mid-turn loses at most that much."""
    store = SessionStore(tmp_path / "sessions")
    s = Session()
    saver = Autosaver(store, s, lambda: "gpt-5", delay=0.2, at_exit=False)
    saver.max_wait = 0.5
    s.append(Message.user("start"))
    deadline = time.monotonic() + 1.6
    while time.monotonic() < deadline:  # a change every 50 ms: the 200 ms debounce alone never fires
        s.append(Message("assistant", [TextPart("step")]))
        time.sleep(0.05)
    written_during = saver.writes
    saver.close()
    assert written_during >= 2  # about one write per 0.5 s of continuous changes
    assert store.load(s.id) is not None and len(store.load(s.id).messages) == len(s.messages)


def test_a_preopened_index_is_taken_by_the_first_store_and_is_up_to_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from shiro_kernel.store import index as index_module
    from shiro_kernel.transcript import Message

    folder = tmp_path / "sessions"
    first = SessionStore(folder)
    s = Session()
    s.messages.append(Message.user("written by an earlier kernel"))
    first.save(s)
    first.index.close()
    later = Session()
    later.messages.append(Message.user("written behind the index's back"))
    SessionStore(tmp_path / "elsewhere").save(later)
    os.replace(tmp_path / "elsewhere" / f"{later.id}.json", folder / f"{later.id}.json")
    index_module.preopen(folder)  # the warm-up, right after %load_ext
    assert str(folder / INDEX_NAME) in index_module._PREOPENED
    index_module.preopen(folder)  # twice: still one connection
    opened: list[object] = []
    real_open = index_module.SessionIndex._open
    monkeypatch.setattr(index_module.SessionIndex, "_open", staticmethod(lambda p: opened.append(p) or real_open(p)))
    store = SessionStore(folder)
    ids = [i.id for i in store.list(15)]
    assert opened == [] and str(folder / INDEX_NAME) not in index_module._PREOPENED  # taken, not reopened
    assert set(ids) == {s.id, later.id}  # brought up to date with the record it had not seen
    index_module.preopen(tmp_path / "missing")  # no folder: nothing is created
    assert not (tmp_path / "missing").exists()
