"""Two kernels, one session: leases, the fork on resume, the conflict guard of ``save``."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from fsutil import cut_short

from shiro_kernel.agent import Agent
from shiro_kernel.config import Shiro
from shiro_kernel.session import Session
from shiro_kernel.store import lease as leases
from shiro_kernel.store.autosave import Autosaver
from shiro_kernel.store.sessions import SessionStore
from shiro_kernel.store.short_ids import short_id
from shiro_kernel.transcript import Message, TextPart
from shiro_kernel.ui.session_text import started
from shiro_kernel.ui.text_view import turn_details


def chat(prompt: str, sid: str | None = None, notebook: str | None = "/w/nb.ipynb") -> Session:
    s = Session(notebook_path=notebook, **({"id": sid} if sid else {}))
    s.messages += [Message.user(prompt), Message("assistant", [TextPart(f"answer to {prompt}")])]
    return s


def test_a_lease_is_exclusive_counted_and_gone_when_released(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    first = leases.claim(root, "s1")
    assert isinstance(first, leases.Lease) and first.held
    other = leases.claim(root, "s1")  # another open file: another kernel, as far as flock is concerned
    assert isinstance(other, leases.Busy) and f"pid {os.getpid()}" in other.holder
    first.retain()
    first.release()
    assert first.held and isinstance(leases.claim(root, "s1"), leases.Busy)
    first.release()
    assert not first.held and not leases.lease_path(root, "s1").exists()
    again = leases.claim(root, "s1")
    assert isinstance(again, leases.Lease)
    again.release()


def test_a_released_lease_closes_its_descriptor_off_the_callers_thread(tmp_path: Path) -> None:
    from shiro_kernel.store import files

    lease = leases.claim(tmp_path, "s4")
    assert isinstance(lease, leases.Lease)
    fd = lease._fd
    assert fd is not None
    gate = threading.Event()
    files.background(gate.wait, 30)  # the stores' thread is busy: the descriptor waits for it
    try:
        lease.release()
        assert not lease.held and not leases.lease_path(tmp_path, "s4").exists()
        os.fstat(fd)  # still open: the caller did not pay for the close
        again = leases.claim(tmp_path, "s4")  # the old inode is unreachable: a new claim is never told "busy"
        assert isinstance(again, leases.Lease)
    finally:
        gate.set()
    files.background(lambda: None).result(timeout=30)
    with pytest.raises(OSError):
        os.fstat(fd)  # closed (nothing opened a file since, so its number is not taken again)
    again.release()


def test_a_lease_released_at_exit_is_closed_there(tmp_path: Path) -> None:
    """At interpreter exit the background thread takes no new work: the release closes on its own thread."""
    code = (
        "import atexit, sys; from pathlib import Path; from shiro_kernel.store import files, lease as leases; "
        "files.background(lambda: None).result(); "
        "lease = leases.claim(Path(sys.argv[1]), 's5'); assert isinstance(lease, leases.Lease); "
        "atexit.register(lease.release)"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr == ""
    assert not leases.lease_path(tmp_path, "s5").exists()


def _hold_forever(root: str, ready: multiprocessing.synchronize.Event) -> None:  # type: ignore[name-defined]
    assert isinstance(leases.claim(Path(root), "s2"), leases.Lease)
    ready.set()
    signal.pause()


def test_a_killed_kernel_holds_nothing(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Event()
    proc = ctx.Process(target=_hold_forever, args=(str(tmp_path), ready))
    proc.start()
    assert ready.wait(30)
    busy = leases.claim(tmp_path, "s2")
    assert isinstance(busy, leases.Busy) and f"pid {proc.pid}" in busy.holder
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    got = leases.claim(tmp_path, "s2")  # the OS dropped the dead process's lock
    assert isinstance(got, leases.Lease)
    got.release()


def test_a_read_only_home_has_no_leases_but_still_works(tmp_path: Path) -> None:
    from fsutil import read_only

    (tmp_path / "sessions").mkdir()
    with read_only(tmp_path / "sessions"):
        assert leases.claim(tmp_path / "sessions", "s3") is None


def test_take_forks_a_session_open_in_another_kernel(tmp_path: Path) -> None:
    a, b = SessionStore(tmp_path / "s"), SessionStore(tmp_path / "s")
    original = chat("first question")
    a.save(original)
    taken_a = a.take(original.id)
    assert taken_a.forked_from is None and taken_a.lease is not None and taken_a.note() == ""
    taken_b = b.take(original.id)  # "kernel" a has it open
    copy = taken_b.session
    assert taken_b.forked_from == original.id and copy.id != original.id
    assert [m.text for m in copy.messages] == [m.text for m in original.messages]
    assert copy.notebook_path == original.notebook_path
    assert b.path_for(copy.id).exists()  # saved at once: its short id resolves
    assert b.resolve(b.short_id(copy.id)) == copy.id
    note = taken_b.note()
    assert b.short_id(original.id) in note and b.short_id(copy.id) in note and "another kernel" in note
    # a's kernel goes away: the original can be taken again without a copy
    assert taken_a.lease is not None
    taken_a.lease.release()
    assert b.take(original.id).forked_from is None


def test_save_never_overwrites_a_record_changed_elsewhere(tmp_path: Path) -> None:
    a, b = SessionStore(tmp_path / "s"), SessionStore(tmp_path / "s")
    a.save(chat("seed", sid="0193aaaa-0000-7000-8000-000000000001"))
    mine, theirs = a.load("0193aaaa-0000-7000-8000-000000000001"), b.load("0193aaaa-0000-7000-8000-000000000001")
    theirs.messages.append(Message.user("theirs"))
    b.save(theirs)
    mine.messages.append(Message.user("mine"))
    old = mine.id
    assert a.save(mine)
    assert mine.id != old and a.moved == {old: mine.id}
    kept = json.loads(a.path_for(old).read_text())
    assert kept["messages"][-1]["parts"][0]["text"] == "theirs"
    assert json.loads(a.path_for(mine.id).read_text())["messages"][-1]["parts"][0]["text"] == "mine"
    mine.messages.append(Message.user("more"))
    assert a.save(mine) and a.moved == {old: mine.id}  # its own record now: written in place


def test_the_autosaver_follows_a_moved_session_and_the_agent_says_so(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SHIRO_HOME", str(tmp_path))
    agent = Agent(None, Shiro())
    other = SessionStore(tmp_path / "sessions")
    agent.current.session.messages += chat("hello").messages
    assert agent.current.save_now() is None
    sid = agent.current.session.id
    stolen = other.load(sid)  # an older version of shiro in another kernel, without leases
    stolen.messages.append(Message.user("from the other kernel"))
    other.save(stolen)
    agent.current.session.append(Message.user("from this kernel"))
    warning = agent.current.save_now()
    assert warning is not None and "changed by another kernel" in warning and short_id(sid) in warning
    assert agent.current.session.id != sid and agent.current.autosaver.lease is not None
    assert agent.current.autosaver.lease.session_id == agent.current.session.id
    assert turn_details(agent)["footer"].startswith("Saved 3 messages")
    assert len(json.loads(other.path_for(agent.current.session.id).read_text())["messages"]) == 3
    assert agent.current.save_now() is None  # said once
    agent.close()


def test_two_agents_resume_one_session_one_forks_and_both_footers_are_true(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SHIRO_HOME", str(tmp_path))
    monkeypatch.setenv("JPY_SESSION_NAME", str(tmp_path / "nb.ipynb"))
    SessionStore(tmp_path / "sessions").save(chat("seed", notebook=str(tmp_path / "nb.ipynb")))
    first, second = Agent(None, Shiro()), Agent(None, Shiro())
    line_a, line_b = started(first.current.start()), started(second.current.start())
    assert line_a is not None and "resumed" in line_a and "another kernel" not in line_a
    assert line_b is not None and "is open in another kernel" in line_b
    assert first.current.session.id != second.current.session.id
    for agent, text in ((first, "a"), (second, "b")):
        agent.current.session.append(Message.user(text))
        assert agent.current.save_now() is None
        n = int(turn_details(agent)["footer"].split()[1])
        assert n == 3 and len(agent.current.store.load(agent.current.session.id).messages) == 3
    # resuming the session this kernel already has open keeps it (no copy, nothing reloaded)
    assert "another kernel" not in (started(first.current.resume(short_id(first.current.session.id))) or "")
    first.close()
    second.close()


def test_an_autosaver_gives_its_lease_back_on_close(tmp_path: Path) -> None:
    store = SessionStore(tmp_path / "s")
    session = chat("x")
    saver = Autosaver(store, session, lambda: "m", at_exit=False)
    saver.flush()
    assert isinstance(leases.claim(tmp_path / "s", session.id), leases.Busy)
    saver.close()
    got = leases.claim(tmp_path / "s", session.id)
    assert isinstance(got, leases.Lease)
    got.release()


@pytest.mark.parametrize("style", ["in place", "renamed over"])
def test_unreadable_records_of_the_notebook_are_found(tmp_path: Path, style: str) -> None:
    store = SessionStore(tmp_path / "s")
    good, bad, elsewhere = chat("good"), chat("bad"), chat("elsewhere", notebook="/w/other.ipynb")
    for s in (good, bad, elsewhere):
        s.messages.append(Message("assistant", [TextPart("long " * 200)]))  # cut in the messages: the path survives
        store.save(s)
    time.sleep(0.05)  # past the folder's mtime granularity, so the index can tell the folder changed
    for s in (bad, elsewhere):
        cut_short(store.path_for(s.id), style)
    fresh = SessionStore(tmp_path / "s")
    found = fresh.unreadable_for_notebook("/w/nb.ipynb")
    if style == "renamed over":  # the index saw the folder change: both are known unreadable, one is ours
        assert [p.path.name for p in found] == [f"{bad.id}.json"]
    else:  # changed behind the index's back: found when it is loaded (Agent.start sets it aside then)
        assert found == []
    assert fresh.set_aside(bad.id) is not None
    assert bad.id not in [i.id for i in fresh.list()]
