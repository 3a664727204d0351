"""Secrets never leave the kernel: the filter every tool result passes (``shiro_kernel.redact``)."""

from __future__ import annotations

import json

import pytest
from faultlog import record
from traitlets import TraitError

from shiro_kernel import redact as r
from shiro_kernel.config import Shiro
from shiro_kernel.provider.failures import safe_url
from shiro_kernel.text import cut
from shiro_kernel.tools import ToolContext, all_tools, run_tool
from shiro_kernel.transcript import ToolCallPart

KEY = "sk-test-REDACT-0123456789abcdef"
HF = "hf_abcdefghijklmnopqrstuvwxyz012345"


@pytest.fixture(autouse=True)
def _secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setenv("HF_TOKEN", HF)
    monkeypatch.setenv("db_password", "hunter2hunter2")
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # under 8 characters: not a secret
    monkeypatch.setenv("EDITOR_THEME", "solarized-dark")  # not a secret name
    r.set_patterns([])


def test_values_of_secret_looking_variables_are_replaced_by_their_name() -> None:
    text = f"key={KEY}\ntoken: {HF}\npw hunter2hunter2\nshort abc\ntheme solarized-dark"
    out = r.redact(text)
    assert out == (
        "key=[redacted:OPENAI_API_KEY]\ntoken: [redacted:HF_TOKEN]\npw [redacted:db_password]\n"
        "short abc\ntheme solarized-dark"
    )
    assert [name for name, _ in r.secrets()][0] == "OPENAI_API_KEY"


def test_pieces_left_at_a_cut_are_redacted_too() -> None:
    text = "x" * 50 + HF + "y" * 50
    for shortened in (cut(text, 60), cut(text, 90, tail=40), text[:60] + "...", "'" + HF[:12] + "'..." + "'" + HF[-9:]):
        out = r.redact(shortened)
        assert HF[:6] not in out and HF[-6:] not in out, (shortened, out)
    assert r.redact("the word hf_abc is fine") == "the word hf_abc is fine"  # under 6 characters


def test_url_passwords_and_secret_query_values_are_removed() -> None:
    out = r.redact("GET https://bob:s3cret-pass@example.com/x?api_key=AAA&page=2&X-Amz-Signature=BBB ok")
    assert out == "GET https://bob:[redacted]@example.com/x?api_key=[redacted]&page=2&X-Amz-Signature=[redacted] ok"
    assert safe_url("http://user:pw@127.0.0.1:8080/v1?key=1") == "http://127.0.0.1:8080/v1"


def test_shiro_redact_adds_patterns_and_refuses_bad_ones() -> None:
    config = Shiro(redact=[r"ACME-\d{6}"])
    try:
        assert r.redact("id ACME-123456 here") == "id [redacted:pattern] here"
        with pytest.raises(TraitError, match="not a regular expression"):
            config.redact = ["("]
    finally:
        config.redact = []
    assert r.redact("id ACME-123456 here") == "id ACME-123456 here"


def test_every_tool_result_is_redacted_errors_included(tmp_path) -> None:
    (tmp_path / "notes.txt").write_text(f"token {HF}\n")
    tools = all_tools()
    ctx = ToolContext(root=tmp_path)
    read = run_tool(tools, ToolCallPart("c1", "read_file", json.dumps({"path": "notes.txt"})), ctx)
    assert HF not in read.output and "[redacted:HF_TOKEN]" in read.output
    failed = run_tool(tools, ToolCallPart("c2", "read_file", json.dumps({"path": f"missing-{HF}.txt"})), ctx)
    assert failed.output.startswith("Error:") and HF not in failed.output


def test_the_shell_tool_runs_without_the_api_key(tmp_path) -> None:
    from shiro_kernel.tools.shell_tool import run_command

    out = run_command("echo key=${OPENAI_API_KEY:-none}; echo hf=${HF_TOKEN:+set}", str(tmp_path), 10)
    assert out == "key=none\nhf=set\n[exit code 0]"  # other variables stay: the user's tools may need them


def test_a_registered_secret_is_redacted_until_removed(tmp_path) -> None:
    token = "Zq8-served-token-5fJ2kT0pXw"  # in no environment variable: shiro made it (``/mcp serve``)
    other = "second-server-token-77aa"
    assert r.redact(f"Bearer {token}") == f"Bearer {token}"
    r.add_secret("SHIRO_MCP_TOKEN", token)
    r.add_secret("SHIRO_MCP_TOKEN", other)  # a second kernel server in the same process
    r.add_secret("TOO_SHORT", "abc")
    try:
        assert r.redact(f"Bearer {token} / {other}") == (
            "Bearer [redacted:SHIRO_MCP_TOKEN] / [redacted:SHIRO_MCP_TOKEN]"
        )
        assert r.redact("abc") == "abc"
        # through the one filter every tool result passes: a shell command printing it
        tools = all_tools()
        ctx = ToolContext(root=tmp_path)
        shown = run_tool(tools, ToolCallPart("c1", "shell", json.dumps({"command": f"echo {token}"})), ctx)
        assert token not in shown.output and "[redacted:SHIRO_MCP_TOKEN]" in shown.output
        r.remove_secret("SHIRO_MCP_TOKEN", token)
        assert r.redact(f"{token} {other}") == f"{token} [redacted:SHIRO_MCP_TOKEN]"
    finally:
        r.remove_secret("SHIRO_MCP_TOKEN")
        r.remove_secret("TOO_SHORT")
    assert r.redact(other) == other


def test_what_python_displays_is_redacted_too(tmp_path) -> None:
    """``display(token)``, a DataFrame holding a secret, JSON for Plotly: the view and the saved notebook get
    the displays, so they pass the same filter as the text the model reads (images stay as they are)."""
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        code = (
            "from IPython.display import display, HTML, JSON\n"
            f"display(HTML('<td>{HF}</td>'))\n"
            f"display(JSON({{'token': '{HF}'}}))\n"
            f"print('{HF}')"
        )
        part = run_tool(
            all_tools(), ToolCallPart("c1", "python", json.dumps({"code": code})), ToolContext(tmp_path, shell)
        )
        assert HF not in part.output and "[redacted:HF_TOKEN]" in part.output
        shown = json.dumps(part.displays)
        assert len(part.displays) == 2
        assert HF not in shown, shown
        assert shown.count("[redacted:HF_TOKEN]") == 2  # the HTML and the JSON
        assert part.displays[1]["data"]["application/json"] == {"token": "[redacted:HF_TOKEN]"}
        record(
            "security: a secret shown by python as text, HTML and JSON displays",
            3,
            int(HF in part.output) + int(HF in shown),
            "0 copies in the text the model reads or in the displays the view and the notebook keep",
        )
    finally:
        InteractiveShell.clear_instance()
