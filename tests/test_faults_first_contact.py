"""Fault cases of issue 29 ("first contact and nothing lost"): a prompt UTF-8 cannot carry, a kernel that dies
right after a call ran, an approval nobody answers, a session index another process keeps locked, a record the
user made read-only, a kernel restarted during a turn. Each records its figure (:mod:`faultlog`) for
docs/reliability.md (``./scripts/reliability.sh``)."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

from fakeopenai import Call, Reply
from faultlog import record
from IPython.utils.capture import capture_output

from shiro_kernel.store.sessions import SessionStore

SURROGATE_NAME = "caf\udce9.csv"  # what os.listdir returns for b"caf\xe9.csv" (not UTF-8)


def _run(shell: Any, source: str) -> tuple[str, Any]:
    with capture_output() as cap:
        result = shell.run_cell(source)
    shown = cap.stdout + cap.stderr + "".join(o.data.get("text/plain", "") for o in cap.outputs)
    return shown, result


def _records(home: Path) -> dict[str, dict[str, Any]]:
    """Every session record in ``home``, read as strict UTF-8 JSON (what a reader of the file sees)."""
    return {
        p.name: json.loads(p.read_bytes().decode("utf-8"))
        for p in (home / "sessions").glob("*.json")
        if p.name != "index.json"
    }


# -- 1. a lone surrogate in a prompt -----------------------------------------------------------------------
def test_a_prompt_with_a_lone_surrogate_is_escaped_once_and_the_session_keeps_working(shiro_shell, fake_openai):
    home = Path(os.environ["SHIRO_HOME"])
    shiro_shell.user_ns["fname"] = SURROGATE_NAME
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": "print(fname)"})]),  # the name reaches a tool's output too
        Reply(text="it has 3 columns"),
    )
    _run(shiro_shell, '%config Shiro.approval = "auto"')
    # the name reaches the prompt from code (a %shiro line is sent as typed: IPython does not expand {fname})
    out, result = _run(shiro_shell, 'get_ipython().run_line_magic("shiro", "--wait summarize " + fname)')
    assert result.error_in_exec is None, result.error_in_exec
    assert "Traceback" not in out and "UnicodeEncodeError" not in out, out
    assert out.count("not valid text") == 1  # one notice, with the prompt as it was sent
    assert "the prompt sent is: summarize caf\\xe9.csv" in out
    sent = fake_openai.requests[0].body["input"]
    prompts = [i["content"] for i in sent if i.get("role") == "user"]
    assert prompts == ["summarize caf\\xe9.csv"]  # to the model: the escaped name (the workspace note after it)
    told = [i["output"] for i in fake_openai.requests[1].body["input"] if i.get("type") == "function_call_output"]
    assert told == ["caf\\xe9.csv"]  # the tool's output, escaped the same way
    (saved,) = _records(home).values()  # to disk: strict UTF-8, the same text
    texts = [p.get("text") or p.get("output") for m in saved["messages"] for p in m["parts"]]
    assert "summarize caf\\xe9.csv" in texts and "caf\\xe9.csv" in texts
    # the session keeps working: another turn, /clear, --new, each with the name again
    later = [
        'get_ipython().run_line_magic("shiro", "--wait and again " + fname)',
        "%shiro /clear",
        'get_ipython().run_line_magic("shiro", "--wait --new once more " + fname)',
    ]
    fake_openai.enqueue(Reply(text="again"), Reply(text="more"))
    failed = 0
    for source in later:
        out, result = _run(shiro_shell, source)
        failed += result.error_in_exec is not None or "Traceback" in out or "could not save" in out
    assert failed == 0
    assert [
        [i for i in r.body["input"] if i.get("role") == "user"][-1]["content"] for r in fake_openai.requests[2:]
    ] == [
        "and again caf\\xe9.csv",
        "once more caf\\xe9.csv",
    ]
    assert len(_records(home)) == 2  # the first session and the --new one, both readable
    record(
        "a prompt holding a lone surrogate (`'caf\\udce9.csv'` from os.listdir), real shell and SDK",
        1 + len(later),
        failed,
        "escaped at the boundary as the name's bytes are shown (`caf\\xe9.csv`), 1 notice; the model, the tool "
        f"output and the record get the escaped text; the {len(later)} later cells (a turn, /clear, --new) all "
        "worked, 0 tracebacks",
    )


def test_a_record_write_never_fails_on_a_lone_surrogate(tmp_path: Path) -> None:
    from shiro_kernel.session import Session
    from shiro_kernel.transcript import Message, TextPart

    store = SessionStore(tmp_path / "sessions")
    s = Session(messages=[Message.user("hi"), Message("assistant", [TextPart(f"read {SURROGATE_NAME}")])])
    assert store.save(s, model="m")  # a model's "\udce9" escape arrives as a lone surrogate: kept, as its escape
    loaded = store.load(s.id)
    assert loaded is not None and loaded.messages[1].parts[0].text == f"read {SURROGATE_NAME}"  # lossless


# -- 2. a kernel killed while, or right after, a state-changing call ran -----------------------------------
def _kernel_env(fake: Any, notebook: Path) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": "sk-test-first-contact",
        "OPENAI_BASE_URL": fake.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
        "SHIRO_NO_WARMUP": "1",
        "JPY_SESSION_NAME": str(notebook),  # the notebook the kernel serves: its newest session is continued
    }


def _sequence(request: Any, fake: Any) -> list[str]:
    """What a request sent, in order: ``user``, ``assistant``, ``call:<id>``, ``result:<id>=<output>`` (an item
    sent by reference is the item the server stored)."""
    seen = []
    for sent in request.body.get("input", []):
        item = fake.stored_item(sent["id"]) if sent.get("type") == "item_reference" else sent
        if item is None:
            seen.append(f"unknown reference {sent['id']}")
            continue
        if item.get("type") == "function_call":
            seen.append(f"call:{item['call_id']}")
        elif item.get("type") == "function_call_output":
            seen.append(f"result:{item['call_id']}={item['output']}")
        elif item.get("role") in ("user", "assistant"):
            seen.append(str(item["role"]))
    return seen


def _two_users_in_a_row(seen: list[str]) -> bool:
    return any(a == b == "user" for a, b in itertools.pairwise(seen))


def _wait(predicate: Any, seconds: float) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_a_kernel_killed_while_or_right_after_a_call_ran_resumes_with_the_call(fake_openai, tmp_path):
    import signal

    from kernelutil import Kernel

    from shiro_kernel.store.writeahead import STOPPED_WHILE_RUNNING

    mark = tmp_path / "ran.txt"
    pid: dict[str, int] = {}
    codes = {
        # the code kills its own kernel: the call ran (its effect is on disk), its result never came back
        "during": f"open({str(mark)!r}, 'a').write('during\\n'); import os, signal; os.kill(os.getpid(), signal.SIGKILL)",
        # the result came back; the kernel is killed as the next model request goes out (within the 400 ms)
        "after": f"open({str(mark)!r}, 'a').write('after\\n'); 6 * 7",
    }

    def model(request: Any) -> Any:
        seen = _sequence(request, fake_openai)
        last = request.body["input"][-1]
        prompt = last.get("content") if last.get("role") == "user" else None
        if prompt in codes:
            return Reply(tool_calls=[Call("python", {"code": codes[prompt]}, call_id=f"call_{prompt}")])
        if seen[-1].startswith("result:call_after") and "what happened?" not in seen:
            os.kill(pid["kernel"], signal.SIGKILL)
            from fakeopenai import Fault

            return Fault.delay(1.0, Reply(text="never arrives"))
        return Reply(text="noted")

    fake_openai.default_reply = model
    resumed, lost, sent = 0, 0, {}
    for case in codes:
        notebook = tmp_path / f"{case}.ipynb"
        k = Kernel(_kernel_env(fake_openai, notebook), cwd=str(tmp_path))
        try:
            pid["kernel"] = int(k.run("import os; print(os.getpid())").strip())
            k.run("%load_ext shiro_kernel\n%config Shiro.approval = 'auto'")
            k.run("%shiro --wait hello")  # a first turn: the record exists before the fatal one
            k.kc.execute(f"%shiro --wait {case}")
            assert _wait(lambda k=k: not k.km.is_alive(), 60), f"{case}: the kernel did not die"
        finally:
            k.kill()
        assert mark.read_text().splitlines()[-1] == case  # the call did run
        k = Kernel(_kernel_env(fake_openai, notebook), cwd=str(tmp_path))
        try:
            k.run("%load_ext shiro_kernel\n%config Shiro.approval = 'auto'")
            k.run("%shiro --wait what happened?")
        finally:
            k.close()
        request = fake_openai.requests[-1]
        seen = sent[case] = _sequence(request, fake_openai)
        assert seen[-1] == "user" and request.body["input"][-1]["content"] == "what happened?"
        result = "42" if case == "after" else STOPPED_WHILE_RUNNING
        ok = f"call:call_{case}" in seen and f"result:call_{case}={result}" in seen and not _two_users_in_a_row(seen)
        resumed += 1
        lost += not ok
    assert sent["after"][-4:] == ["user", "call:call_after", "result:call_after=42", "user"], sent
    assert sent["during"][-4:] == ["user", "call:call_during", f"result:call_during={STOPPED_WHILE_RUNNING}", "user"]
    assert lost == 0
    record(
        "a kernel SIGKILLed while a `python` call ran, and right after it returned (within the 400 ms autosave "
        "delay), then resumed; real kernels",
        resumed,
        lost,
        "write-ahead: the call is in the record (fsync'd) before it runs, its result right after; on resume the "
        "model was sent the call with its result (`42`), or with the note that the kernel stopped while it ran; "
        "never two user messages in a row",
    )


# -- 5. a kernel restarted during a turn -------------------------------------------------------------------
def test_a_kernel_restart_during_a_call_is_recorded_as_the_restart(fake_openai, tmp_path):
    from kernelutil import Kernel

    mark = tmp_path / "running.txt"
    code = f"open({str(mark)!r}, 'w').write('running'); import time; time.sleep(60)"
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": code}, call_id="call_long")]))
    fake_openai.default_reply = Reply(text="noted")
    notebook = tmp_path / "restart.ipynb"
    k = Kernel(_kernel_env(fake_openai, notebook), cwd=str(tmp_path))
    try:
        k.run("%load_ext shiro_kernel\n%config Shiro.approval = 'auto'")
        k.kc.execute("%shiro --wait run the long job")
        assert _wait(mark.exists, 60)
        k.km.restart_kernel(now=False)  # as JupyterLab's Restart does: an interrupt, then shutdown_request
        k.kc.wait_for_ready(timeout=60)
        k.run("%load_ext shiro_kernel\n%config Shiro.approval = 'auto'")
        k.run("%shiro --wait what happened?")
    finally:
        k.close()
    told = [s for s in _sequence(fake_openai.requests[-1], fake_openai) if s.startswith("result:call_long=")]
    assert len(told) == 1 and told[0].startswith("result:call_long=Error: interrupted after ")
    assert told[0].endswith(" s — the kernel restarted while this call ran"), told
    record(
        "a kernel restarted (interrupt, then shutdown_request with restart, as JupyterLab does) while a `python` "
        "call ran; real kernel",
        1,
        0,
        "the call's result says `the kernel restarted while this call ran`, not `the user stopped the turn`; the "
        "restarted kernel's next turn sends it to the model",
    )


# -- 3. an approval nobody answers -------------------------------------------------------------------------
def test_unanswered_approvals_never_hold_the_turn_or_the_queue(monkeypatch, fake_openai, tmp_path):
    from IPython.core.interactiveshell import InteractiveShell

    from shiro_kernel.approval import UNANSWERED_DENIAL

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-first-contact")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("SHIRO_MODEL", "gpt-4o-mini")
    monkeypatch.chdir(tmp_path)

    def model(request: Any) -> Reply:
        last = request.body["input"][-1]
        if last.get("type") == "function_call_output":
            return Reply(text="not run: nobody answered")
        return Reply(tool_calls=[Call("python", {"code": "touched = True"})])

    fake_openai.default_reply = model
    InteractiveShell.clear_instance()
    shell = InteractiveShell.instance()
    try:
        shell.run_cell("%load_ext shiro_kernel")
        shell.run_cell('%config Shiro.frontend = "widgets"')
        shell.run_cell("%config Shiro.approval_timeout_s = 0.2")
        prompts = [f"turn {i}" for i in range(4)]
        with capture_output():
            for prompt in prompts:  # the first runs, the others queue behind it (a closed tab: nobody clicks)
                shell.run_cell(f"%shiro {prompt}")
        controller = shell.magics_manager.registry["ShiroMagics"].controller
        ended = controller.wait_idle(30)
        finished = [i for i in controller.finished if i.line.prompt in prompts]
        refused = UNANSWERED_DENIAL.format(name="python", seconds=0.2)
        told = sum(
            1 for r in fake_openai.requests if r.body["input"][-1].get("output") == refused
        )  # each turn's model was told
    finally:
        shell.run_cell("%unload_ext shiro_kernel")
        InteractiveShell.clear_instance()
    hung = len(prompts) - len([i for i in finished if i.end is not None and i.end.reason == "answered"])
    assert ended and hung == 0 and told == len(prompts) and "touched" not in shell.user_ns
    record(
        "approvals nobody answers (a closed tab): 4 prompts, one running and 3 queued, Shiro.approval_timeout_s "
        "= 0.2 s; live view, real SDK",
        len(prompts),
        hung,
        f"every question became a refusal the model was told about ({told} of {len(prompts)}), said in one line in "
        "its cell; each turn ended and the next queued one started; the call never ran (default 600 s)",
    )


# -- 4. a session index another process keeps locked --------------------------------------------------------
HOLDER = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=30)
db.execute("BEGIN IMMEDIATE")  # the write lock, held (a long transaction, a sqlite3 shell left in BEGIN)
print("locked", flush=True)
sys.stdin.readline()
db.execute("COMMIT")
"""


def _python_then_done(request: Any) -> Reply:
    last = request.body["input"][-1]
    if last.get("type") == "function_call_output":
        return Reply(text="done")
    return Reply(tool_calls=[Call("python", {"code": "1 + 1"})])


def test_a_locked_session_index_never_holds_up_a_turn_and_is_said_once(shiro_shell, fake_openai, capsys):
    import sqlite3
    import subprocess
    import sys
    import time

    from shiro_kernel.store.indexqueue import NOTICE_AFTER, queue_for

    home = Path(os.environ["SHIRO_HOME"])
    fake_openai.default_reply = _python_then_done
    shiro_shell.run_cell('%config Shiro.approval = "auto"')
    shiro_shell.run_cell("%shiro --wait before the lock")
    index = home / "sessions" / "index.sqlite"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(index)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        capsys.readouterr()
        turns, seconds, outs = 4, [], []
        for i in range(turns):
            if i == 1:
                time.sleep(NOTICE_AFTER + 0.2)  # the index has been unwritable for longer than the notice waits
            started = time.perf_counter()
            result = shiro_shell.run_cell(f"%shiro --wait turn {i}" if i % 2 == 0 else f"%shiro --wait --new turn {i}")
            seconds.append(time.perf_counter() - started)
            assert result.error_in_exec is None, result.error_in_exec
            out = capsys.readouterr()
            outs.append(out.out + out.err)
        shiro_shell.run_cell("%shiro /sessions")
        listed = capsys.readouterr().out
        still_held = holder.poll() is None  # the turns never needed the lock: it is still held
    finally:
        if holder.stdin is not None:
            holder.stdin.write("\n")
            holder.stdin.flush()
        holder.wait(30)
    told = sum(o.count("has not been updated for") for o in outs)
    answered = sum("done" in o for o in outs)
    assert still_held and answered == turns and told == 1, outs
    assert "(it is locked by another process); the session records are saved" in "".join(outs)
    tails = [line.split("  ", 2)[2] for line in listed.splitlines()]
    assert tails == ["4msg  turn 3", "8msg  turn 1", "8msg  before the lock"], listed  # rows still queued, seen
    assert queue_for(index, index.parent).flush(10)  # the lock released: the rows catch up
    db = sqlite3.connect(index)
    rows = dict(db.execute("SELECT id, messages FROM sessions").fetchall())
    on_disk = {p.stem: len(json.loads(p.read_text())["messages"]) for p in (home / "sessions").glob("*.json")}
    db.close()
    assert rows == on_disk
    record(
        "the session index locked by another process (`BEGIN IMMEDIATE` held) during 4 turns, 2 of them "
        "starting a new session",
        turns,
        0,
        f"every turn answered and saved while the lock was still held (longest turn {max(seconds):.2f} s; before, "
        "a turn's end waited up to 30 s for the lock); the cell said so once, after 2 s of failing; `/sessions` "
        "listed the queued rows; after the release the index caught up with every record",
    )


# -- 5. a record the user made read-only -------------------------------------------------------------------
def test_a_read_only_record_is_left_as_it_is_and_the_session_saved_under_a_new_id(shiro_shell, fake_openai, capsys):
    import re
    import stat

    home = Path(os.environ["SHIRO_HOME"])
    footer = re.compile(r"Saved (\d+) messages?(?::[^\n·]*)? · resume: %shiro -c or %shiro -r ([0-9a-f-]+)")
    fake_openai.default_reply = _python_then_done
    shiro_shell.run_cell('%config Shiro.approval = "auto"')
    shiro_shell.run_cell("%shiro --wait keep this one")
    agent = shiro_shell.magics_manager.registry["ShiroMagics"].agent
    original = agent.current.store.path_for(agent.current.session.id)
    original.chmod(stat.S_IRUSR | stat.S_IRGRP)  # what `chmod a-w` leaves: 0440
    kept = original.read_bytes()
    old_shown = agent.current.store.short_id(agent.current.session.id)
    capsys.readouterr()
    outs = []
    for prompt in ("and more", "and more again"):
        shiro_shell.run_cell(f"%shiro --wait {prompt}")
        out = capsys.readouterr()
        outs.append(out.out + out.err)
    new_id = agent.current.session.id
    assert original.read_bytes() == kept and not original.stat().st_mode & stat.S_IWUSR  # left as it is
    said = [o.count("is read-only") for o in outs]
    assert said == [1, 0], outs
    assert (
        f"session {old_shown}'s record is read-only (its file's write permission is off), so it is left as it is; "
        f"this kernel's conversation is saved as {agent.current.store.short_id(new_id)} instead"
    ) in outs[0]
    ((n, shown),) = footer.findall(outs[1])
    assert agent.current.store.resolve(shown) == new_id and int(n) == 12
    assert len(json.loads((home / "sessions" / f"{new_id}.json").read_text())["messages"]) == 12
