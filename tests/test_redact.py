"""The secrets it knows never leave the kernel: the filter every tool result and request passes (``shiro_kernel.redact``)."""

from __future__ import annotations

import json
import os

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


# --- a secret in every form (issue 42, point 2) ---------------------------------------------------------------

BACKSLASH = "ab\\cd-Qz9x"  # ``ab\cd-Qz9x``: a repr and a KeyError show it as ``ab\\cd-Qz9x``
QUOTED = "p\"a's-w0rd!"
UMLAUT = "Pässwört-2024"  # json.dumps sends it as ``P\u00e4ssw\u00f6rt-2024``
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEA3Tz2mr7SZiAMfQyuvBjM9Oi4fqXJ0Xf1qA7b2P8n6b0c9S1d\n"
    "Qk5v8YJ7cW2aZx3UoH4pLm1nRt6Ew0sVg9fKjD2yBq8Xe5NhTu7Ic3Ar0Zl4Wm9P\n"
    "hG6tR2yX8vN0bJ4kW1qE7sA3zD5cF9uL2mO8pK6iY0wT4rV1nB3gH7jS5eQ9xC2a\n"
    "-----END RSA PRIVATE KEY-----\n"
)
# key-shaped values that are in no environment variable
GHP = "ghp_aB3dE6gH9jK2mN5pQ8sT1vW4yZ7bC0eF3hI6"
SK_PROJ = "sk-proj-Xy7_Kq2-Lm9Pz4Rt8Vb3Nc6Wd1Fg5Hj0Sa2De4"
AKIA = "AKIAIOSFODNN7EXAMPLE"
SLACK = "xoxb-123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
GITHUB_PAT = "github_pat_11ABCDEFG0abcdefghijkl_MNOPqrstuvWXYZ0123456789abcdefghijklmnopqrstuv"
PEM_FOUND = PEM.replace("RSA PRIVATE KEY", "PRIVATE KEY").replace("MIIEowIBAAKCAQEA3", "MIIEvQIBADANBgkqh")
SHAPED = (GHP, SK_PROJ, AKIA, SLACK, GITHUB_PAT)


@pytest.fixture
def forms_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVICE_PASSWORD", BACKSLASH)
    monkeypatch.setenv("QUOTED_SECRET", QUOTED)
    monkeypatch.setenv("UMLAUT_TOKEN", UMLAUT)
    monkeypatch.setenv("SSH_PRIVATE_KEY", PEM)
    monkeypatch.setenv("PRIMARY_KEY", "customer_id")  # a column's name, not a secret
    monkeypatch.setattr(r, "_said", set())  # the plain-word notice is said once per process: once per test here


def shown_as(value: str) -> set[str]:
    """How text may show ``value``, written out here (not taken from the module): raw, in a repr, in JSON
    (ASCII-escaped or not), in JSON inside JSON, and each of its lines that is 8+ characters of key material."""
    out = {
        value,
        repr(value)[1:-1],
        json.dumps(value)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        json.dumps(json.dumps(value))[1:-1],
        repr(json.dumps(value))[1:-1],
    }
    out |= {line for line in value.splitlines() if len(line) >= 8 and not line.startswith("-----")}
    return out


def leaked(text: str, values: tuple[str, ...]) -> list[str]:
    return sorted(form for value in values for form in shown_as(value) if form in text)


def python(tmp_path, code: str):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        call = ToolCallPart("c1", "python", json.dumps({"code": code}))
        return run_tool(all_tools(), call, ToolContext(tmp_path, shell))
    finally:
        InteractiveShell.clear_instance()


def test_a_backslash_password_as_a_repr_and_in_a_key_error(forms_env, tmp_path) -> None:
    text = f"{BACKSLASH!r} {[BACKSLASH]!r} {json.dumps({'pw': BACKSLASH})}"
    assert r.redact(text) == (
        "'[redacted:SERVICE_PASSWORD]' ['[redacted:SERVICE_PASSWORD]'] {\"pw\": \"[redacted:SERVICE_PASSWORD]\"}"
    )
    # a real KeyError, through the python tool: its message is the key's repr
    part = python(tmp_path, "import os\nsettings = {}\nsettings[os.environ['SERVICE_PASSWORD']]")
    assert "KeyError" in part.output and "[redacted:SERVICE_PASSWORD]" in part.output, part.output
    assert leaked(part.output, (BACKSLASH,)) == []


def test_a_multi_line_private_key_with_escaped_newlines_and_line_by_line(forms_env) -> None:
    lines = PEM.splitlines()
    texts = [
        json.dumps({"key": PEM}),  # one line, the newlines as \n
        repr(PEM),
        f"line 2 of the key: {lines[1]}",
        PEM[:150] + "... (cut)",  # cut by a tool: the whole value is not there, its lines are
        "\n".join(reversed(lines)),
    ]
    for text in texts:
        out = r.redact(text)
        assert leaked(out, (PEM,)) == [], (text, out)
        assert "[redacted:SSH_PRIVATE_KEY]" in out or out == "[redacted:private-key]... (cut)"  # a cut block
    assert r.redact(json.dumps({"key": PEM})) == '{"key": "[redacted:SSH_PRIVATE_KEY]"}'


def test_quotes_and_non_ascii_through_json_dumps(forms_env) -> None:
    assert json.dumps(UMLAUT)[1:-1] == "P\\u00e4ssw\\u00f6rt-2024"  # the form that leaked
    texts = [
        json.dumps({"pw": QUOTED, "t": UMLAUT}),
        json.dumps({"pw": QUOTED, "t": UMLAUT}, ensure_ascii=False),
        repr({"pw": QUOTED, "t": UMLAUT}),
        json.dumps(json.dumps([QUOTED, UMLAUT])),  # JSON inside JSON
        repr(UMLAUT.encode()),  # b'P\xc3\xa4ssw\xc3\xb6rt-2024'
    ]
    for text in texts:
        out = r.redact(text)
        assert leaked(out, (QUOTED, UMLAUT)) == [], (text, out)
        assert "\\xc3\\xa4ssw" not in out and "[redacted:" in out
    # the JSON stays JSON: the placeholder replaces the escaped text inside the string
    assert json.loads(r.redact(json.dumps({"pw": QUOTED, "t": UMLAUT}))) == {
        "pw": "[redacted:QUOTED_SECRET]",
        "t": "[redacted:UMLAUT_TOKEN]",
    }


def test_key_shaped_values_in_a_dataframe_cell_are_redacted_though_in_no_variable(forms_env, tmp_path) -> None:
    pytest.importorskip("pandas")
    assert all(value not in os.environ.values() for value in SHAPED)
    code = (
        "import pandas as pd\n"
        f"df = pd.DataFrame({{'service': ['github', 'openai', 'aws', 'slack', 'pat'], 'token': {list(SHAPED)!r}}})\n"
        "pd.set_option('display.max_colwidth', None)\n"
        "print(df)\n"
        "df"
    )
    part = python(tmp_path, code)
    shown = part.output + json.dumps(part.displays)
    assert [value for value in SHAPED if value in shown] == [], shown
    for placeholder in ("github-token", "api-key", "aws-key-id", "slack-token"):
        assert f"[redacted:{placeholder}]" in part.output, part.output
    assert "github" in part.output and "slack" in part.output  # the other cells pass


def test_a_dotenv_file_never_loaded_is_redacted_when_read(forms_env, tmp_path) -> None:
    (tmp_path / ".env").write_text(
        "# local settings\n"
        f"OPENAI_API_KEY={SK_PROJ}\n"
        f"GITHUB_TOKEN={GHP}\n"
        f"AWS_ACCESS_KEY_ID={AKIA}\n"
        "AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
        'export DB_PASSWORD="Tr0ub4dor&3x"\n'
        f"SLACK_BOT_TOKEN='{SLACK}'\n"
        "PRIMARY_KEY=customer_id\n"
        "MAX_TOKENS=100000000\n"
        f'TLS_KEY="{PEM_FOUND.replace(chr(10), chr(92) + "n")}"\n'
    )
    part = run_tool(all_tools(), ToolCallPart("c1", "read_file", json.dumps({"path": ".env"})), ToolContext(tmp_path))
    out = part.output
    for value in (*SHAPED[:4], "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "Tr0ub4dor&3x", "MIIEvQIBADANBgkqh"):
        assert value not in out, (value, out)
    assert leaked(out, (PEM_FOUND,)) == []
    assert "[redacted:private-key]" in out and "[redacted:DB_PASSWORD]" in out
    assert "PRIMARY_KEY=customer_id" in out and "MAX_TOKENS=100000000" in out  # a word and a number pass
    # a PEM block found anywhere, raw or cut, goes whole
    assert r.redact(f"key:\n{PEM_FOUND}done") == "key:\n[redacted:private-key]\ndone"
    assert r.redact(PEM_FOUND[:120]) == "[redacted:private-key]"


def test_a_plain_word_in_a_secret_named_variable_is_no_secret_and_is_said_once(forms_env) -> None:
    code = "df.groupby('customer_id').amount.sum()  # by customer_id"
    assert r.redact(code) == code
    assert ("PRIMARY_KEY", "customer_id") not in r.secrets() and ("PRIMARY_KEY", "customer_id") in r.skipped()
    said = r.notices()
    assert len(said) == 1 and "PRIMARY_KEY" in said[0] and "customer_id" not in said[0]
    assert r.notices() == []  # once
    for word in ("customer_id", "CUSTOMER_ID", "sortOrder", "XMLHttpRequest", "solarized-dark", "/path/to/creds.json"):
        assert r.plain(word), word
    for secret in ("hunter2hunter2", "Tr0ub4dor&3", "aBcDeFgHiJ", "QwErTyUiOpAs", BACKSLASH, UMLAUT, QUOTED):
        assert not r.plain(secret), secret


def test_the_same_secret_is_always_the_same_placeholder(forms_env) -> None:
    text = f"{BACKSLASH} {BACKSLASH!r} {json.dumps(BACKSLASH)} {GHP} {GHP}"
    out = r.redact(text)
    assert out == r.redact(text)
    assert out.count("[redacted:SERVICE_PASSWORD]") == 3 and out.count("[redacted:github-token]") == 2
    assert r.redact(f"x {GHP} y") == "x [redacted:github-token] y"


@pytest.mark.parametrize("api", ["responses", "chat"])
def test_no_form_of_a_secret_reaches_the_server(forms_env, fake_openai, monkeypatch, tmp_path, api) -> None:
    """Through the real boundary: a tool result, the prompt and the model's own call arguments hold every
    form; the bytes the fake server received hold none, and ``customer_id`` arrives as it is."""
    from fakeopenai import Call, Reply
    from turnutil import TOOLS, make_turn

    from shiro_kernel.events import Notice
    from shiro_kernel.tools import Effect, Tool
    from shiro_kernel.tools.base import schema

    every = "\n".join(
        [
            f"{BACKSLASH!r} {json.dumps([QUOTED, UMLAUT])} {json.dumps({'k': PEM})}",
            f"{PEM.splitlines()[2]} {[QUOTED]!r}",
            "   customer_id  token",
            *(f"{i}  {i + 1000}  {value}" for i, value in enumerate(SHAPED)),
            PEM_FOUND,
        ]
    )
    monkeypatch.setitem(
        TOOLS,
        "leak",
        Tool(
            "leak", "Shows the settings.", schema({"q": {"type": "string"}}), lambda a, c: every, effects=Effect.READS
        ),
    )
    fake_openai.enqueue(
        Reply(tool_calls=[Call("leak", {"q": f"group by customer_id, {BACKSLASH!r}"})]),
        Reply(tool_calls=[Call("add", {"a": 1, "b": 2})]),
        Reply(text="done"),
    )
    events: list = []
    turn = make_turn(fake_openai, tmp_path, api=api, events=events)
    end = turn.run(f"use {json.dumps(UMLAUT)} and {GHP} for customer_id")
    assert end.reason == "answered" and len(fake_openai.requests) == 3
    raw = b"".join(req.raw for req in fake_openai.requests)
    sent = "\n".join(json.dumps(req.body, ensure_ascii=False) for req in fake_openai.requests)
    values = (BACKSLASH, QUOTED, UMLAUT, PEM, PEM_FOUND, *SHAPED)
    forms = {form for value in values for form in shown_as(value)}
    found = sorted(f for f in forms if f in sent or f.encode() in raw or json.dumps(f)[1:-1].encode() in raw)
    assert found == [], found
    decoded = "\n".join(str(req.body) for req in fake_openai.requests)
    for placeholder in ("SERVICE_PASSWORD", "QUOTED_SECRET", "UMLAUT_TOKEN", "SSH_PRIVATE_KEY", "github-token"):
        assert f"[redacted:{placeholder}]" in decoded, placeholder
    assert "customer_id" in decoded and "[redacted:PRIMARY_KEY]" not in decoded
    skipped = [e for e in events if isinstance(e, Notice) and "PRIMARY_KEY" in e.text]
    assert len(skipped) == 1  # said once, not at each of the 3 requests
    record(
        f"security: a secret as repr, JSON, \\u escapes, quotes, a multi-line key, key-shaped values ({api})",
        len(forms),
        len(found),
        "0 of the forms (raw, repr, JSON, JSON in JSON, each key line) in the bytes the server received, from a "
        "tool result, the prompt and the model's arguments; `PRIMARY_KEY=customer_id` passed and was said once",
    )
