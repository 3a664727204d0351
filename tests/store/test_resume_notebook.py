"""Sessions and memory across kernels: real kernels run by nbclient on one notebook, one after the
other, against the fake OpenAI server."""

from __future__ import annotations

import json
import re

from fakeopenai import Call, Reply
from kernelutil import outputs_text, run_notebook, state_of

KEY = "sk-test-resume-KEY-0000"


def env(fake) -> dict[str, str]:
    return {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake.base_url, "SHIRO_MODEL": "gpt-4o-mini"}


def instructions(request) -> str:
    return request.body.get("instructions", "")


def test_a_new_kernel_resumes_the_notebooks_session_with_its_task_list(fake_openai, tmp_path):
    todos = [
        {"content": "load the sales data", "status": "done"},
        {"content": "compare regions", "status": "in_progress"},
    ]
    fake_openai.enqueue(
        Reply(tool_calls=[Call("todo_write", {"todos": todos})]),
        Reply(text="Plan recorded."),
        Reply(text="North grew the most."),
    )
    path = tmp_path / "analysis.ipynb"
    run_notebook(
        path,
        [
            "%load_ext shiro_kernel",
            "%shiro --wait plan the analysis of sales by region",
            "%shiro --wait which region grew the most?",
        ],
        env(fake_openai),
    )
    assert len(fake_openai.requests) == 3
    # the task list block is in the system prompt on every step after todo_write
    # the task list is the per-step state message after the conversation, on every step after todo_write
    assert "Your task list (1/2 done). Keep it current with todo_write:" in state_of(fake_openai.requests[1])
    assert "[~] compare regions" in state_of(fake_openai.requests[2])
    assert "task list" not in instructions(fake_openai.requests[1])

    fake_openai.enqueue(Reply(text="We were comparing regions."))
    nb = run_notebook(path, ["%load_ext shiro_kernel", "%shiro --wait where were we?"], env(fake_openai))
    shown = outputs_text(nb.cells[1])
    resumed = re.match(r'resumed ([0-9a-f-]{8,36}) — 6 messages: "plan the analysis of sales by region"\n', shown)
    assert resumed is not None, shown
    first = fake_openai.requests[3]
    # store is on: the earlier assistant items go out as references to what the provider stored
    sent = json.dumps(
        [fake_openai.stored_item(i["id"]) if i.get("type") == "item_reference" else i for i in first.body["input"]]
    )
    assert "plan the analysis of sales by region" in sent and "North grew the most." in sent
    assert "[x] load the sales data" in state_of(first) and "[~] compare regions" in state_of(first)
    plain = [o["data"]["text/plain"] for o in nb.cells[1].outputs if "text/plain" in o.get("data", {})][-1]
    answer, footer = plain.split("\n\n")
    assert answer == "We were comparing regions."
    assert footer.endswith(f"resume: %shiro -c or %shiro -r {resumed.group(1)}")  # the same session, saved again
    assert KEY not in json.dumps(nb)


def test_new_starts_fresh_and_a_remembered_note_reaches_the_next_kernel(fake_openai, tmp_path):
    fake_openai.enqueue(
        Reply(tool_calls=[Call("remember", {"kind": "gotcha", "text": "sales.csv uses ; as separator"})]),
        Reply(text="Noted."),
    )
    path = tmp_path / "n.ipynb"
    cells = ["%load_ext shiro_kernel", '%config Shiro.approval = "auto"', "%shiro --wait remember the csv separator"]
    run_notebook(path, cells, env(fake_openai))
    assert fake_openai.requests[1].body["input"][-1]["output"].startswith("Remembered as gotcha (1 stored)")

    fake_openai.enqueue(Reply(text="fresh"))
    nb = run_notebook(path, ["%load_ext shiro_kernel", "%shiro --new --wait hello"], env(fake_openai))
    first = fake_openai.requests[2]
    assert "resumed" not in outputs_text(nb.cells[1])
    assert [i.get("content") for i in first.body["input"]] == ["hello"]  # a fresh session
    boot = instructions(first)
    assert "What you learned about this project in earlier sessions. Trust it, but verify anything" in boot
    assert "- (gotcha) sales.csv uses ; as separator" in boot
