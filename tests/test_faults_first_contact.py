"""Fault cases of issue 29 ("first contact and nothing lost"): a prompt UTF-8 cannot carry, a kernel that dies
right after a call ran, an approval nobody answers, a session index another process keeps locked, a record the
user made read-only, a kernel restarted during a turn. Each records its figure (:mod:`faultlog`) for
docs/reliability.md (``./scripts/reliability.sh``)."""

from __future__ import annotations

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
    out, result = _run(shiro_shell, "%shiro --wait summarize {fname}")
    assert result.error_in_exec is None, result.error_in_exec
    assert "Traceback" not in out and "UnicodeEncodeError" not in out, out
    assert out.count("not valid text") == 1  # one notice, with the prompt as it was sent
    assert "the prompt sent is: summarize caf\\xe9.csv" in out
    sent = fake_openai.requests[0].body["input"]
    assert sent[-1]["content"] == "summarize caf\\xe9.csv"  # to the model: the escaped name
    told = [i["output"] for i in fake_openai.requests[1].body["input"] if i.get("type") == "function_call_output"]
    assert told == ["caf\\xe9.csv"]  # the tool's output, escaped the same way
    (saved,) = _records(home).values()  # to disk: strict UTF-8, the same text
    texts = [p.get("text") or p.get("output") for m in saved["messages"] for p in m["parts"]]
    assert "summarize caf\\xe9.csv" in texts and "caf\\xe9.csv" in texts
    # the session keeps working: another turn, /clear, --new, each with the name again
    later = ["%shiro --wait and again {fname}", "%shiro /clear", "%shiro --wait --new once more {fname}"]
    fake_openai.enqueue(Reply(text="again"), Reply(text="more"))
    failed = 0
    for source in later:
        out, result = _run(shiro_shell, source)
        failed += result.error_in_exec is not None or "Traceback" in out or "could not save" in out
    assert failed == 0
    assert [r.body["input"][-1]["content"] for r in fake_openai.requests[2:]] == [
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
