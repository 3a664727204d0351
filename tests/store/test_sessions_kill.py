"""A process killed with SIGKILL while saving a session leaves the previous record intact.

A child process loads the record through ``SessionStore``, then saves it over and over, each save
replacing the last message with a bigger one stamped with a version number, and reports every
finished save on stdout. The parent kills it (SIGKILL) at a random moment, then checks that the record
on disk parses and is exactly the last reported version or the one that was in flight — never a
partial file — that leftover temporary files are not records, and that listing still works."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from shiro_kernel.session import Session
from shiro_kernel.store.sessions import SessionStore
from shiro_kernel.transcript import Message, TextPart

TRIALS = 30
BUDGET_S = 40.0  # stop early (after at least a few trials) rather than run long on a slow machine
CHUNK = 150_000  # characters; a version's message is CHUNK * (1 + version % 8) long (up to ~1.2 MB)

CHILD = textwrap.dedent("""
    import sys
    from shiro_kernel.store.sessions import SessionStore
    from shiro_kernel.transcript import Message, TextPart

    sid, chunk = sys.argv[1], int(sys.argv[2])
    store = SessionStore()
    session = store.load(sid)
    version = int(session.messages[-1].text.split()[1])
    print("ready", version, flush=True)
    while True:
        version += 1
        body = f"version {version} " + "x" * (chunk * (1 + version % 8))
        session.messages[-1] = Message("assistant", [TextPart(body)])
        store.save(session, model="gpt-test")
        print(f"saved {version}", flush=True)
""")


def body(version: int) -> str:
    return f"version {version} " + "x" * (CHUNK * (1 + version % 8))


def on_disk_version(store: SessionStore, sid: str) -> int:
    path = store.path_for(sid)
    record = json.loads(path.read_text(encoding="utf-8"))  # raises on a partial file
    assert record["id"] == sid and record["model"] == "gpt-test"
    assert len(record["messages"]) == 2
    assert record["messages"][0] == Message.user("keep saving this session").to_json()
    text = record["messages"][1]["parts"][0]["text"]
    version = int(text.split()[1])
    assert text == body(version), "the record holds a different (partial?) message"
    loaded = store.load(sid)  # and the store itself loads it
    assert loaded is not None and loaded.messages[-1].text == text
    return version


def test_sigkill_during_save_leaves_a_whole_record(tmp_path):
    store = SessionStore()
    assert str(store.root).startswith(os.environ["SHIRO_HOME"])  # the test's own temp home
    session = Session()
    session.messages += [Message.user("keep saving this session"), Message("assistant", [TextPart(body(0))])]
    assert store.save(session, model="gpt-test")
    sid = session.id
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]),
    }
    rng = random.Random(20240611)
    previous = 0
    mid_save_kills = 0
    started = time.monotonic()
    trials = 0
    for trial in range(TRIALS):
        if trial >= 5 and time.monotonic() - started > BUDGET_S:
            break
        trials += 1
        proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, sid, str(CHUNK)],
            env=env,
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            ready = proc.stdout.readline().split()  # the child has loaded the record
            assert ready == ["ready", str(previous)], proc.stderr.read() if proc.poll() is not None else ready
            time.sleep(rng.uniform(0.0, 0.25))  # a random moment, usually in the middle of a save
            proc.send_signal(signal.SIGKILL)
            out, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == -signal.SIGKILL, err
        # whole lines only: the kill may cut the last one (its save had finished: the record may be one ahead)
        saved = [int(line.split()[1]) for line in out.split("\n")[:-1] if line.startswith("saved ")]
        last_done = saved[-1] if saved else previous
        assert saved == list(range(previous + 1, last_done + 1))

        # the record is whole: the last finished version, or the one that was being written
        version = on_disk_version(store, sid)
        assert version in (last_done, last_done + 1), (trial, version, last_done)
        mid_save_kills += version == last_done  # killed before the in-flight save's rename landed

        # leftovers of the interrupted write are not records; listing (index repaired or not) works
        names = os.listdir(store.root)
        records = [n for n in names if n.endswith(".json") and not n.startswith(".") and n != "index.json"]
        assert records == [f"{sid}.json"], names
        for fresh in (SessionStore(), store):
            infos = fresh.list()
            assert [i.id for i in infos] == [sid]
            assert fresh.resolve(sid[:12]) == sid
        previous = version

    assert trials >= 5
    assert mid_save_kills > 0  # at least one kill really landed during a save
    # a full rebuild from the files on disk finds exactly the one record, whatever junk is left
    assert SessionStore().rebuild_index() == 1
    assert [i.id for i in SessionStore().list()] == [sid]
