"""Golden path: a real kernel run headless by nbclient, against the fake OpenAI server."""

from __future__ import annotations

import json
import re

import nbformat
import pytest
from fakeopenai import Call, Reply
from kernelutil import NOTEBOOK_KEY as KEY
from kernelutil import run_notebook, tool_output


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_mean_of_df_x_runs_in_the_kernel(fake_openai, tmp_path, api):
    fake_openai.enqueue(
        Reply(text="I'll compute it in the kernel.", tool_calls=[Call("python", {"code": "df.x.mean()"})]),
        lambda request: Reply(text=f"The mean of `df.x` is **{tool_output(request).strip()}**."),
    )
    nb = run_notebook(
        tmp_path / "analysis.ipynb",
        [
            "%load_ext shiro_kernel",
            'import pandas\ndf = pandas.DataFrame({"x": [1, 2, 3]})',
            '%config Shiro.approval = "auto"',
            "%shiro --wait what is the mean of df.x?",
        ],
        {
            "OPENAI_API_KEY": KEY,
            "OPENAI_BASE_URL": fake_openai.base_url,
            "SHIRO_API": api,
            "SHIRO_MODEL": "gpt-4o-mini",
        },
    )

    assert len(fake_openai.requests) == 2
    path = "/responses" if api == "responses" else "/chat/completions"
    assert all(r.path.endswith(path) for r in fake_openai.requests)
    # the model's second request carries the real value computed in the kernel
    assert tool_output(fake_openai.requests[1]).strip() == "2.0"
    (shown,) = nb.cells[3].outputs  # one display: no stream, no traceback
    said, tool_row, answer, _footer = shown["data"]["text/plain"].split("\n\n")
    assert said == "I'll compute it in the kernel."
    assert re.fullmatch(r"✓ python\(df\.x\.mean\(\)\) · ok · [\d.]+ m?s", tool_row), tool_row
    assert answer == "The mean of `df.x` is **2.0**."
    assert KEY not in json.dumps(nb)
    assert fake_openai.validation_errors == []
    # the static rendering stays in the notebook: HTML with an expandable tool row, and the turn bundle
    final = [o for o in nb.cells[3].outputs if "data" in o][-1]["data"]
    call_id = final["application/vnd.shiro.turn+json"]["entries"][1]["callId"]
    mean = (  # the number read off the call's output links to its tool row (issue 28)
        f'<strong><a class="shiro-number" href="#shiro-call-{call_id}" title="from call 1 (python): 2.0" '
        'style="color:inherit;text-decoration:underline dotted">2.0</a></strong>'
    )
    assert '<details class="shiro-tool">' in final["text/html"]
    assert f"<p>The mean of <code>df.x</code> is {mean}.</p>" in final["text/html"]
    turn = final["application/vnd.shiro.turn+json"]
    assert turn["version"] == 1 and turn["end"]["reason"] == "answered"
    tool = [e for e in turn["entries"] if e["type"] == "tool"][0]
    assert (tool["name"], tool["args"], tool["status"], tool["output"].strip()) == (
        "python",
        "df.x.mean()",
        "ok",
        "2.0",
    )
    # the saved notebook rendered by nbconvert (no kernel, no widget state) shows the answer and the tool row
    from nbconvert import HTMLExporter

    html, _ = HTMLExporter().from_notebook_node(nbformat.read(tmp_path / "analysis.ipynb", as_version=4))
    mean = (  # nbconvert writes the link's attributes in alphabetical order
        f'<strong><a class="shiro-number" href="#shiro-call-{call_id}" '
        'style="color:inherit;text-decoration:underline dotted" title="from call 1 (python): 2.0">2.0</a></strong>'
    )
    assert f"<p>The mean of <code>df.x</code> is {mean}.</p>" in html
    assert '<details class="shiro-tool">' in html and "python(df.x.mean())" in html


def test_headless_ask_does_not_block_and_says_how_to_allow(fake_openai, tmp_path):
    fake_openai.enqueue(
        Reply(tool_calls=[Call("python", {"code": "import os; os.remove('data.csv')"})]),
        lambda request: Reply(text="I was not allowed: " + tool_output(request)[:60]),
    )
    nb = run_notebook(
        tmp_path / "n.ipynb",
        [
            "%load_ext shiro_kernel",
            "%shiro --wait delete data.csv",
        ],
        {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake_openai.base_url, "SHIRO_MODEL": "gpt-4o-mini"},
    )
    refused = tool_output(fake_openai.requests[1])
    assert refused == (
        "Error: not approved — this run cannot show approval buttons (no widget frontend) and Shiro.approval is "
        '"ask", so python was not run. To allow it, run `%config Shiro.approval = "auto"` and ask again.'
    )
    (shown,) = [o["data"]["text/plain"] for o in nb.cells[1].outputs if "text/plain" in o.get("data", {})]
    tool_row, notice, answer, _footer = shown.split("\n\n")
    assert tool_row.splitlines()[1:] == [f"  ↳ {refused}"]
    assert notice == (
        "[this run cannot show approval buttons, so calls that change something were not run; to allow them in "
        'a headless run you trust, run %config Shiro.approval = "auto" and ask again]'
    )
    assert answer == "I was not allowed: Error: not approved — this run cannot show approval buttons"


def test_missing_key_in_a_notebook_is_a_paragraph_not_a_traceback(tmp_path):
    nb = run_notebook(
        tmp_path / "n.ipynb",
        ["%load_ext shiro_kernel", "%shiro --wait hello?"],
        {"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""},
    )
    (shown,) = nb.cells[1].outputs  # one display, not an error output
    assert shown["output_type"] == "display_data"
    said, _footer = shown["data"]["text/plain"].split("\n\n")
    assert said == (
        "shiro: No API key: set OPENAI_API_KEY (in a notebook: %env OPENAI_API_KEY=sk-...), or point shiro at a "
        "local OpenAI-compatible server (Ollama, vLLM, llama.cpp, LM Studio) with "
        '%config Shiro.base_url = "http://localhost:11434/v1" (or OPENAI_BASE_URL), where no key is needed.'
    )
