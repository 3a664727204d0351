"""The egress ledger (issue 42 §3): each request's size, server and what it carried, exact against what the fake
server received; the footer's words, ``%shiro /egress``, the session record and ``shiro sessions egress``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from fakeopenai import Call, Reply
from faultlog import SECURITY, record
from kernelutil import agent_of
from kernelutil import run_line as run

from shiro_kernel.egress import Ledger, Request, brief, size


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_the_ledger_is_exact_against_what_the_server_received(shiro_shell, fake_openai, tmp_path, monkeypatch, api):
    monkeypatch.setenv("DB_PASSWORD", "hunter2-Zq9-hunter2")
    Path(tmp_path, "sales.csv").write_text("region,email,amount\neast,ana@example.com,10\nwest,bo@example.com,20\n")
    run(shiro_shell, f'%config Shiro.api = "{api}"')
    run(shiro_shell, '%config Shiro.approval = "auto"')
    run(shiro_shell, "%config Shiro.private = ['email']")
    run(shiro_shell, "import pandas as pd\nsales = pd.read_csv('sales.csv')")
    fake_openai.enqueue(
        Reply(
            tool_calls=[
                Call("read_file", {"path": "sales.csv"}),
                Call("inspect", {"names": ["sales"]}),
                Call("python", {"code": "import os; print(os.environ['DB_PASSWORD'], sales.amount.sum())"}),
            ]
        ),
        Reply(text="30 in all"),
    )
    shown = run(shiro_shell, "%shiro total amount in sales.csv?")
    requests = fake_openai.requests
    ledger = agent_of(shiro_shell).current.session.egress
    sent = ledger.requests()
    assert [r.bytes for r in sent] == [len(r.raw) for r in requests]  # byte for byte
    assert {r.host for r in sent} == {"127.0.0.1:" + fake_openai.base_url.split(":")[2].split("/")[0]}
    assert [r.api for r in sent] == [api, api]
    first, second = sent
    assert first.results == [] and [tool for tool, _ in second.results] == ["read_file", "inspect", "python"]
    outputs = [
        r.output for m in agent_of(shiro_shell).current.session.messages if m.role == "tool" for r in m.tool_results()
    ]
    assert [chars for _, chars in second.results] == [len(o) for o in outputs]
    csv_bytes = len(Path(tmp_path, "sales.csv").read_bytes())
    assert second.files == [["sales.csv", csv_bytes]]
    assert second.variables == [["sales", 2, 3, ["region", "email", "amount"]]]
    # two emails in the first request's workspace block and the prompt's file; in the results again
    assert first.masked >= 1 and second.masked >= 4 and second.redacted == 1
    raw = b"".join(r.raw for r in requests)
    assert raw.count(b"[private:email:") == first.masked + second.masked
    total = size(sum(len(r.raw) for r in requests))
    assert f"sent {total} to 127.0.0.1" in shown and "3 results, 1 file" in shown and "values masked" in shown
    table = run(shiro_shell, "%shiro /egress")
    assert (
        "turn 1: sent" in table
        and "files sales.csv" in table
        and "values of sales (2 × 3: region, email, amount)" in table
    )
    record(
        SECURITY
        + f"the egress ledger against the bytes the server received ({api}): sizes, results, files, variables, "
        "values masked, secrets redacted",
        len(requests),
        sum(r.bytes != len(q.raw) for r, q in zip(sent, requests, strict=True)),
        f"{len(requests)} requests: every size byte for byte, the 3 results with their sizes, the file, the frame's "
        "shown values, the stand-ins counted as sent; the footer and /egress say it",
    )


def test_the_record_keeps_the_ledger_and_the_cli_prints_it(shiro_shell, fake_openai, tmp_path):
    fake_openai.enqueue(Reply(text="one"), Reply(text="two"))
    run(shiro_shell, "%shiro first")
    run(shiro_shell, "%shiro second")
    session = agent_of(shiro_shell).current.session
    run(shiro_shell, "%shiro /save")
    from shiro_kernel.store.sessions import SessionStore

    saved = SessionStore().load_record(session.id)
    assert [len(t["requests"]) for t in saved["egress"]] == [1, 1]
    assert [r["bytes"] for t in saved["egress"] for r in t["requests"]] == [len(r.raw) for r in fake_openai.requests]
    printed = subprocess.run(
        [sys.executable, "-m", "shiro_kernel.cli", "sessions", "egress", session.id[:13]],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert printed.startswith("turn 1: sent ") and "turn 2: sent " in printed and "in 2 requests" in printed


def test_a_commands_own_model_call_is_in_the_ledger(shiro_shell, fake_openai, tmp_path):
    """``/compact`` sends the whole history to the server: its request is kept like a turn's, shown by its name
    (``/memory``'s merge call goes through the same ``observe``)."""
    fake_openai.enqueue(Reply(text="one"), Reply(text="the user said one thing"), Reply(text="two"))
    run(shiro_shell, "%shiro first")
    assert "compacted" in run(shiro_shell, "%shiro /compact")
    run(shiro_shell, "%shiro second")
    ledger = agent_of(shiro_shell).current.session.egress
    assert [r.bytes for r in ledger.requests()] == [len(r.raw) for r in fake_openai.requests]  # all three
    table = run(shiro_shell, "%shiro /egress")
    assert [line.split(":")[0] for line in table.splitlines() if not line.startswith(" ")][:3] == [
        "turn 1",
        "/compact",
        "turn 2",
    ]


def test_the_footers_words() -> None:
    one = Request("api.openai.com", "responses", 3100, 775, results=[["python", 10], ["read_file", 20]], images=1)
    two = Request("api.openai.com", "responses", 900, 225, files=[["a.csv", 12]], masked=14, redacted=1)
    assert (
        brief([one, two])
        == "sent 4.0 kB to api.openai.com: 2 results, 1 file, 1 image · 14 values masked · 1 secret redacted"
    )
    assert brief([]) == "" and size(812) == "812 B" and size(2_400_000) == "2.4 MB"
    ledger = Ledger()
    ledger.add("t1", one)
    ledger.add("t1", two)
    assert Ledger.from_json(json.loads(json.dumps(ledger.turns))).requests("t1") == [one, two]
