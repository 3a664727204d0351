"""The administrator's ``values: schema-only`` (issue 42 §4): no value of the data leaves the kernel, masked or not.
A scripted session in a real kernel where the model tries every route a value can take — a printed frame, a list,
an f-string, an exception's message, a displayed value, ``inspect``, ``read_file`` and ``grep`` of the CSV, a figure
— sends none of the data's values in either API; the model still gets the names, kinds and shapes, the exception's
name, and the results of its own bookkeeping (the task list); the user sees every output; the ledger says what
went."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import Call, Reply
from faultlog import SECURITY, record
from kernelutil import agent_of
from kernelutil import run_line as run
from test_private_routes import reading_the_csv

from shiro_kernel import policy
from shiro_kernel.context import cell_changes, workspace
from shiro_kernel.private.schema_only import NOT_SENT, notice, withheld
from shiro_kernel.tools import ToolContext
from shiro_kernel.transcript import Message, ToolResultPart

CSV = "id,email,spend\n1,ana.lima@example.com,120.5\n2,bo.silva@example.org,80.75\n3,cy.ng@example.net,42.25\n"
#: every value of the data long enough to be found only where it was sent (and the sum the model computes)
VALUES = ["ana.lima@example.com", "bo.silva@example.org", "cy.ng@example.net", "120.5", "80.75", "42.25", "243.5"]


def sent_values(requests: list[Any]) -> list[str]:
    raw = b"".join(r.raw for r in requests)
    return [v for v in VALUES if v.encode() in raw]


@pytest.fixture
def schema_only(monkeypatch, tmp_path):
    path = Path(tmp_path, "policy.yaml")
    path.write_text("values: schema-only\n")
    monkeypatch.setenv("SHIRO_POLICY", str(path))
    return path


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_schema_only_sends_no_value_of_the_data_on_any_route(shiro_shell, fake_openai, tmp_path, schema_only, api):
    Path(tmp_path, "customers.csv").write_text(CSV, encoding="utf-8")
    run(shiro_shell, "import matplotlib; matplotlib.use('Agg')")
    run(shiro_shell, "import pandas as pd\ndf = pd.read_csv('customers.csv')\nlimit = 120.5")
    run(shiro_shell, f'%config Shiro.api = "{api}"')
    run(shiro_shell, '%config Shiro.approval = "auto"')
    routes = [
        "print(df)",
        "print(df.email.tolist(), df.spend.sum())",
        "print(f'first: {df.email[0]}')",
        "raise KeyError(df.email[1])",
        "df.spend.max()",  # displayed as the cell's value
        "import matplotlib.pyplot as plt\nplt.bar(df.email, df.spend); plt.show()",
    ]
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": code}) for code in routes]),
        Reply(
            tool_calls=[
                *reading_the_csv(),
                Call("todo_write", {"todos": [{"content": "sum the spend", "status": "in_progress"}]}),
            ]
        ),
        Reply(text="The code sums the spend; its result is in the output."),
    )
    shown = run(shiro_shell, "%shiro what is the total spend in customers.csv?")
    requests = fake_openai.requests
    assert len(requests) == 3
    assert sent_values(requests) == []
    body = json.dumps([r.body for r in requests], ensure_ascii=False)
    # what describes the data still goes: the columns and their kinds, the variables' kinds, the exception's name
    assert "email (text)" in body and "spend (float)" in body and "3 rows × 3 columns" in body
    assert "- limit: float\\n" in body or "- limit: float\n" in body
    assert "Error: KeyError (its message not sent)" in body
    assert body.count("values: schema-only") >= len(routes) + 3  # each data result said to be withheld
    assert "data:image/png" not in body
    assert "sum the spend" in body  # the task list is the agent's own: it passes
    # the user's view of the turn keeps every output as it was (the session's record, the call rows)
    session = agent_of(shiro_shell).current.session
    outputs = "\n".join(r.output for m in session.messages if m.role == "tool" for r in m.tool_results())
    assert "243.5" in outputs and "ana.lima@example.com" in outputs and "KeyError" in shown

    # a result is withheld the same way every time it is sent: the prefix stays byte-stable
    def results(request: Any) -> list[Any]:
        items = request.body["input" if api == "responses" else "messages"]
        return [i for i in items if i.get("type") == "function_call_output" or i.get("role") == "tool"]

    assert len(results(requests[1])) == len(routes) and results(requests[2])[: len(routes)] == results(requests[1])
    # the ledger counts what left: the notices, not the outputs
    ledger = agent_of(shiro_shell).current.session.egress.requests()
    sizes = [size for r in ledger for _, size in r.results]
    assert sizes and max(sizes) < 400 and sum(r.images for r in ledger) == 0
    record(
        SECURITY + f"values: schema-only ({api}): a printed frame, a list, an f-string, an exception's message, a "
        "displayed value, a figure, inspect, read_file and grep of the CSV, the workspace block",
        len(routes) + 4,
        len(sent_values(requests)),
        "0 values of the data in the bytes the server received (3 requests); the columns, kinds and shape, the "
        "exception's name and the task list arrived; the user saw every output",
    )


def test_schema_only_after_a_turn_that_sent_values_withholds_them_from_then_on(
    shiro_shell, fake_openai, tmp_path, monkeypatch
):
    """A policy that appears mid-session applies to the history too: the older results are withheld as well."""
    run(shiro_shell, "import pandas as pd\ndf = pd.DataFrame({'email': ['ana.lima@example.com']})")
    run(shiro_shell, '%config Shiro.approval = "auto"')
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "print(df.email[0])"})]), Reply(text="done"))
    run(shiro_shell, "%shiro the first email?")
    assert b"ana.lima@example.com" in fake_openai.requests[-1].raw  # no policy yet: it went
    path = Path(tmp_path, "policy.yaml")
    path.write_text("values: schema-only\n")
    monkeypatch.setenv("SHIRO_POLICY", str(path))
    fake_openai.enqueue(Reply(text="ok"))
    run(shiro_shell, "%shiro thanks")
    assert b"ana.lima@example.com" not in fake_openai.requests[-1].raw


def test_policy_says_what_schema_only_does(schema_only):
    found = policy.policies()
    assert policy.values_of(found) == "schema-only" and policy.values_of(()) == "masked"
    assert f"values: schema-only ({policy.SCHEMA_ONLY_SAID})" in policy.describe()
    assert "cannot be enforced" not in policy.describe()


def test_a_withheld_result_keeps_its_call_and_the_exceptions_name_only():
    failed = ToolResultPart("c1", "python", "Traceback …\nKeyError: 'ana.lima@example.com'", is_error=True)
    refused = ToolResultPart("c2", "python", "Error: not run — the user declined", is_error=True, refused=True)
    tasks = ToolResultPart("c3", "todo_write", "1 task: sum the spend")
    out = withheld(Message("tool", [failed, refused, tasks]), frozenset({"todo_write"}))
    texts = [p.output for p in out.tool_results()]
    assert texts[0] == "Error: KeyError (its message not sent). " + NOT_SENT.format(size="2 lines")
    assert texts[1:] == [refused.output, tasks.output]  # a refusal and the task list are not the data's
    assert [p.call_id for p in out.tool_results()] == ["c1", "c2", "c3"]
    assert notice(ToolResultPart("c4", "python", "")) == NOT_SENT.format(size="empty")
    plain = Message.user("what is in df?")
    assert withheld(plain, frozenset()) is plain


def test_the_workspace_and_the_cell_changes_without_values(tmp_path):
    Path(tmp_path, "customers.csv").write_text(CSV)
    ctx = ToolContext(root=tmp_path)
    ns = {"limit": 120.5, "name": "ana.lima@example.com"}
    told = workspace.block("sum customers.csv", ns, ctx, values=False)
    assert "email (text)" in told and "- limit: float" in told and "- name: str, 20 characters" in told
    assert sent_values([type("R", (), {"raw": told.encode()})()]) == []
    assert 'e.g. "ana.lima@example.com"' in workspace.block("sum customers.csv", ns, ctx)  # masked mode: an example
    old = [{"key": "a", "sha1": "1", "count": 1, "head": "df.loc['x']"}]
    new = [{"key": "a", "sha1": "1", "count": 2, "head": "df.loc['x']", "error": "KeyError: 'ana.lima@example.com'"}]
    assert cell_changes.changes(old, new, values=False) == [
        "- ran cell 1 (execution count 2): df.loc['x'] — it raised KeyError"
    ]
    assert "ana.lima" in cell_changes.changes(old, new)[0]
