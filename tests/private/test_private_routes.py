"""Private values never reach the wire (issue 42 §1): a scripted session in a real kernel where the model tries every
route — a printed frame, ``to_string``, ``tolist``, an f-string, an exception's message, ``inspect``, ``read_file``
of the CSV the frame came from, the workspace block of the first request, the prompt — sends none of them, in any
encoding, in both APIs; aggregates and the other columns still arrive; a stand-in the model writes in code runs as
the real value, and the view and the record show the real values."""

from __future__ import annotations

import itertools
import json
import re
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import Call, Reply
from faultlog import SECURITY, record
from kernelutil import agent_of
from kernelutil import run_line as run

from shiro_kernel.redact import escaped

EMAILS = ["ana.lima@example.com", "o'brien@example.org", "zoë.ünal@example.net"]
SECRET = 'pa\\ss"wörd-9Zq!x'  # a backslash, a quote and a non-ASCII letter: every escape it can take
CSV = "id,email,spend\n1,ana.lima@example.com,120.5\n2,o'brien@example.org,80\n3,zoë.ünal@example.net,42.25\n"


def reading_the_csv() -> list[Call]:
    """The calls that read ``df`` and the CSV it came from: ``inspect``, ``read_file`` and ``grep``."""
    return [
        Call("inspect", {"names": ["df"]}),
        Call("read_file", {"path": "customers.csv"}),
        Call("grep", {"pattern": "example", "path": "."}),
    ]


def leaks(requests: list[Any]) -> list[str]:
    """The private values, in any form, found in what the server received."""
    raw = b"".join(r.raw for r in requests)
    sent = "\n".join(json.dumps(r.body, ensure_ascii=False) for r in requests)
    values = [*EMAILS, SECRET]
    forms = {f for value in values for f in escaped(value)} | {json.dumps(v)[1:-1] for v in values}
    forms |= {json.dumps(f)[1:-1] for f in list(forms)}  # escaped once more: JSON inside a JSON body
    return sorted(f for f in forms if f in sent or f.encode() in raw or f.encode("unicode_escape") in raw)


def stand_in(request: Any) -> str:
    found = re.findall(r"\[private:email:[0-9a-f]{8,16}\]", json.dumps(request.body))
    assert found, "no stand-in reached the model"
    return found[0]


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_no_route_sends_a_private_value_and_aggregates_still_arrive(
    shiro_shell, fake_openai, tmp_path, monkeypatch, api
):
    monkeypatch.setenv("WAREHOUSE_PASSWORD", SECRET)  # and a secret on the same routes
    Path(tmp_path, "customers.csv").write_text(CSV, encoding="utf-8")
    run(shiro_shell, "import pandas as pd\ndf = pd.read_csv('customers.csv')")
    run(shiro_shell, f'%config Shiro.api = "{api}"')
    run(shiro_shell, '%config Shiro.approval = "auto"')
    run(shiro_shell, "%config Shiro.private = ['email']")
    routes = [
        "print(df)",
        "print(df.head().to_string())",
        "print(df.email.tolist())",
        "print(f'first: {df.email[0]} and {df.email[1]!r}')",
        "import json; print(json.dumps(df.to_dict('records')))",
        "raise KeyError(df.email[1])",
        "df.email.str.upper().str.lower()",  # displayed as the cell's value
        "print(df.spend.sum(), df.email.nunique(), list(df.columns))",
        "import os; s = os.environ['WAREHOUSE_PASSWORD']; print(s, repr(s), json.dumps({'p': s}))",
        "import os; raise KeyError(os.environ['WAREHOUSE_PASSWORD'])",
    ]
    ran: dict[str, Any] = {}

    def by_stand_in(request: Any) -> Reply:  # the model copies a stand-in it saw into its code
        ran["token"] = token = stand_in(request)
        return Reply(tool_calls=[Call("python", {"code": f"print(df[df.email == '{token}'].spend.sum())"})])

    def answer(request: Any) -> Reply:
        return Reply(text=f"The customer {ran['token']} spent 120.5 in all.")

    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": code}) for code in routes]),
        Reply(tool_calls=reading_the_csv()),
        by_stand_in,
        answer,
    )
    shown = run(shiro_shell, "%shiro who spent most in customers.csv? ana.lima@example.com is one of them")
    requests = fake_openai.requests
    assert len(requests) == 4
    assert leaks(requests) == []
    decoded = json.dumps([r.body for r in requests], ensure_ascii=False)
    assert "242.75" in decoded and "120.5" in decoded and '"email"' in decoded.replace("\\", "")  # aggregates, columns
    assert "spend" in decoded and "KeyError" in decoded and "[redacted:WAREHOUSE_PASSWORD]" in decoded
    # the stand-in the model wrote ran as the real value: its output is the real customer's spend
    session = agent_of(shiro_shell).current.session
    outputs = [r.output for m in session.messages if m.role == "tool" for r in m.tool_results()]
    assert outputs[-1].strip() == "120.5"
    # the view and the record show the real value; what went back to the model is the stand-in
    assert "ana.lima@example.com spent 120.5" in shown
    assert session.messages[-1].parts[0].text == "The customer ana.lima@example.com spent 120.5 in all."
    fake_openai.enqueue(Reply(text="ok"))
    run(shiro_shell, "%shiro thanks")
    again = fake_openai.requests[-1]
    assert leaks([again]) == [] and ran["token"] in json.dumps(again.body)
    record(
        SECURITY + f"private values through every route ({api}): a printed frame, to_string, tolist, an f-string, "
        "JSON, an exception, a displayed value, inspect, read_file and grep of the CSV, the workspace and the prompt; "
        "a secret with a backslash, a quote and a non-ASCII letter printed raw, as a repr, in JSON and in a KeyError",
        len(routes) + 5,
        len(leaks(fake_openai.requests)),
        "0 private values and 0 secrets in any form in the bytes the server received (5 requests); the sum, the count and the "
        "column names arrived; a stand-in in the model's code ran as the real value; the view showed it",
    )


def test_a_figure_drawn_from_a_private_column_is_not_sent_unless_allowed(shiro_shell, fake_openai, tmp_path):
    run(shiro_shell, "import matplotlib; matplotlib.use('Agg')")
    run(
        shiro_shell,
        "import pandas as pd\ndf = pd.DataFrame({'email': ['ana@example.com', 'bo@example.com'], 'spend': [3, 4]})",
    )
    run(shiro_shell, '%config Shiro.approval = "auto"')
    run(shiro_shell, "%config Shiro.private = ['email']")
    private = "import matplotlib.pyplot as plt\nplt.bar(df.email, df.spend); plt.show()"
    other = "import matplotlib.pyplot as plt\nplt.plot(df.spend); plt.show()"
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": private}), Call("python", {"code": other})]), Reply(text="done")
    )
    run(shiro_shell, "%shiro plot spend")
    body = json.dumps(fake_openai.requests[1].body)
    assert body.count("data:image/png;base64") == 1  # the spend line went; the bar chart by email did not
    assert "not sent to the model: drawn from private data (df.email)" in body
    assert "ana@example.com" not in body
    ledger = agent_of(shiro_shell).current.session.egress.requests()
    assert [r.images for r in ledger] == [0, 1] and ledger[1].image_bytes > 1000  # the ledger counts what went
    session = agent_of(shiro_shell).current.session
    results = [r for m in session.messages if m.role == "tool" for r in m.tool_results()]
    assert results[0].displays and not results[0].images and results[1].images  # the user still sees both
    run(shiro_shell, "%config Shiro.private_figures = True")
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": private})]), Reply(text="done"))
    run(shiro_shell, "%shiro again")
    assert json.dumps(fake_openai.requests[-1].body).count("data:image/png;base64") == 2


def test_private_lists_adds_and_removes_for_the_session(shiro_shell, fake_openai, tmp_path):
    (Path(tmp_path) / ".shiro").mkdir()
    (Path(tmp_path) / ".shiro" / "private").write_text("ssn\n")
    run(
        shiro_shell,
        "import pandas as pd\npatients = pd.DataFrame({'ssn': ['123-45-6789', '987-65-4321'], 'age': [40, 51]})",
    )
    out = run(shiro_shell, "%shiro /private")
    assert "ssn  (project)" in out and "2 values in the kernel now from patients.ssn" in out
    out = run(shiro_shell, "%shiro /private add patients.age")
    assert "patients.age is private for this session" in out and "patients.age  (session)" in out
    assert "2 values of under 3 characters are not masked" in out  # 40 and 51: said, not hidden
    out = run(shiro_shell, "%shiro /private remove ssn")
    assert "ssn is no longer private for this session" in out and "ssn  (project)" not in out
    assert "not a private name" in run(shiro_shell, "%shiro /private add a.b.c")
    run(shiro_shell, "%shiro /private add ssn")
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "print(patients)"})]), Reply(text="done"))
    run(shiro_shell, '%config Shiro.approval = "auto"')
    run(shiro_shell, "%shiro show the patients")
    sent = b"".join(r.raw for r in fake_openai.requests)
    assert b"123-45-6789" not in sent and b"[private:ssn:" in sent


def test_a_resumed_session_masks_its_history_before_the_data_is_loaded_again(shiro_shell, fake_openai, tmp_path):
    from shiro_kernel.store.records import session_from_record, session_to_record

    run(shiro_shell, "import pandas as pd\ndf = pd.DataFrame({'email': ['ana.lima@example.com']})")
    run(shiro_shell, '%config Shiro.approval = "auto"')
    run(shiro_shell, "%config Shiro.private = ['email']")
    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": "print(df.email[0])"})]), Reply(text="done"))
    run(shiro_shell, "%shiro the first email?")
    agent = agent_of(shiro_shell)
    session = agent.current.session
    token = stand_in(fake_openai.requests[-1])
    record = session_to_record(session)
    assert record["privateSeen"] == {"ana.lima@example.com": "email"} and record["maskKey"] == session.mask_key
    resumed = session_from_record(json.loads(json.dumps(record)))
    run(shiro_shell, "del df")  # a new kernel: the data is not loaded yet
    mask = agent.private.mask_for(resumed)
    assert mask is not None and mask.token("ana.lima@example.com") == token
    assert mask.mask(f"it was {EMAILS[0]}")[0] == f"it was {token}"


def test_any_tools_result_an_mcp_servers_too_passes_the_mask(shiro_shell, fake_openai, tmp_path):
    """A tool the agent did not write (an MCP server's tools join ``agent.tools`` the same way) echoes the data."""
    from shiro_kernel.tools import Effect, Tool
    from shiro_kernel.tools.base import schema

    run(shiro_shell, "import pandas as pd\ncrm = pd.DataFrame({'email': ['ana.lima@example.com', 'bo@example.com']})")
    run(shiro_shell, '%config Shiro.approval = "auto"')
    run(shiro_shell, "%config Shiro.private = ['email']")
    agent = agent_of(shiro_shell)
    agent.tools["crm_lookup"] = Tool(
        "crm_lookup",
        "Looks a customer up.",
        schema({"q": {"type": "string"}}),
        lambda a, c: json.dumps({"match": "ana.lima@example.com", "query": a["q"]}),
        effects=Effect.READS,
    )
    fake_openai.enqueue(
        lambda request: Reply(tool_calls=[Call("crm_lookup", {"q": stand_in(request)})]), Reply(text="done")
    )
    run(shiro_shell, "%shiro look ana.lima@example.com up")
    sent = b"".join(r.raw for r in fake_openai.requests)
    assert b"ana.lima" not in sent and sent.count(b"[private:email:") >= 3
    results = [r for m in agent.current.session.messages if m.role == "tool" for r in m.tool_results()]
    assert json.loads(results[0].output)["query"] == "ana.lima@example.com"  # the tool got the real value


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_the_prefix_stays_byte_stable_with_private_values(shiro_shell, fake_openai, tmp_path, api):
    """Each request begins with the one before it, stand-ins and all, while new private values appear between
    steps (a frame made by the model's code): a value's stand-in never changes, and what was sent is not redone."""
    run(shiro_shell, f'%config Shiro.api = "{api}"')
    run(shiro_shell, "%config Shiro.store = False")  # every item inline: the whole history is compared
    run(shiro_shell, '%config Shiro.approval = "auto"')
    run(shiro_shell, "%config Shiro.private = ['email']")
    run(shiro_shell, "import pandas as pd\ndf = pd.DataFrame({'email': ['ana.lima@example.com'], 'n': [1]})")
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": "print(df)"})]),
        Reply(
            tool_calls=[
                Call("python", {"code": "more = pd.DataFrame({'email': ['bo.berg@example.org']}); print(more, df)"})
            ]
        ),
        lambda request: Reply(text=f"first is {stand_in(request)}"),
        Reply(tool_calls=[Call("python", {"code": "print(more.email[0], df.email[0])"})]),
        Reply(text="done"),
    )
    run(shiro_shell, "%shiro show the emails")
    run(shiro_shell, "%shiro again")
    requests = fake_openai.requests
    assert len(requests) == 5

    from kernelutil import state_of

    def conversation(request: Any) -> list[Any]:
        got = request.body.get("input") or request.body.get("messages") or []
        return got[:-1] if state_of(request) else got

    for earlier, later in itertools.pairwise(requests):
        assert later.body.get("instructions") == earlier.body.get("instructions")
        head = conversation(earlier)
        assert conversation(later)[: len(head)] == head
    assert b"bo.berg" not in b"".join(r.raw for r in requests[2:])  # masked from the step after it appeared
