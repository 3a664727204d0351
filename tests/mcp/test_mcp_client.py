"""The MCP client against REAL servers: the SDK test server over stdio and over streamable HTTP, and the
published ``mcp-server-time`` (``python -m mcp_server_time``).

One manager is shared by the module (starting a Python MCP server costs ~1.5 s here); tests that break a
server use their own instance of it (``crasher``), so the order of tests does not matter.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import openai
import pytest
from mcp_testutil import PNG_PREFIX, PY, SDK_SERVER, children, http_sdk_server, wait_for
from openai_rules import problems

from shiro_kernel.mcp import McpManager
from shiro_kernel.mcp.config import parse_server
from shiro_kernel.provider import wire
from shiro_kernel.tools import Effect, Tool, ToolContext, ToolError, ToolOutput, run_tool
from shiro_kernel.transcript import ToolCallPart

SECRET = "tok-THIS-MUST-NOT-LEAK-8731"
#: a server that fails at once, saying why on stderr
BROKEN = "import sys; sys.stderr.write('boom: no config file\\n'); sys.exit(2)"


@dataclass
class Setup:
    manager: McpManager
    notices: list[str]
    markers: Path
    root: Path

    def tools(self) -> dict[str, Tool]:
        return {t.name: t for t in self.manager.tools()}

    def ctx(self, **kw: object) -> ToolContext:
        return ToolContext(root=self.root, **kw)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    root = tmp_path_factory.mktemp("project")
    markers = tmp_path_factory.mktemp("markers")
    home = str(tmp_path_factory.mktemp("server_home"))  # module fixtures run before the autouse isolation
    sdk_env = {"MCP_TEST_MARKERS": str(markers), "SERVICE_TOKEN": SECRET, "HOME": home}
    with http_sdk_server() as url:
        manager = McpManager(root, start_timeout_s=30)
        manager.configure(
            {
                "sdk": parse_server("sdk", {"command": PY, "args": [SDK_SERVER], "env": sdk_env}),
                "crasher": parse_server("crasher", {"command": PY, "args": [SDK_SERVER], "env": {"HOME": home}}),
                "time": parse_server(
                    "time",
                    {
                        "command": PY,
                        "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
                        "env": {"HOME": home},
                    },
                ),
                "web": parse_server("web", {"url": url, "headers": {"Authorization": f"Bearer {SECRET}"}}),
                "broken": parse_server(
                    "broken",
                    {
                        "command": PY,
                        "args": ["-c", BROKEN],
                    },
                ),
                "novar": parse_server("novar", {"command": PY, "env": {"K": "${MCP_TEST_UNSET_VAR}"}}, ".mcp.json"),
            }
        )
        assert manager.wait_ready(40), manager.status_text()
        try:
            yield Setup(manager, manager.drain_notices(), markers, root)
        finally:
            manager.close()


def test_servers_listed_with_tools(setup: Setup) -> None:
    tools = setup.tools()
    assert {"mcp__sdk__echo", "mcp__web__echo", "mcp__time__get_current_time", "mcp__time__convert_time"} <= set(tools)
    long_names = [n for n in tools if n.startswith("mcp__sdk__summarise")]
    assert len(long_names) == 1 and len(long_names[0]) == 64  # cut, with a hash suffix
    assert all(len(n) <= 64 for n in tools)
    lines = setup.manager.status_text().splitlines()
    assert lines[0] == "MCP servers:"
    servers = {line.split()[0]: line for line in lines if line.startswith("  ") and not line.startswith("    ")}
    py = shlex.quote(PY)
    assert servers["sdk"] == f"  sdk (stdio: {py} {SDK_SERVER}) — ready, 12 tools"
    assert servers["time"] == f"  time (stdio: {py} -m mcp_server_time --local-timezone UTC) — ready, 2 tools"
    assert re.fullmatch(r"  web \(http: http://127\.0\.0\.1:\d+/mcp\) — ready, 12 tools", servers["web"])
    assert servers["broken"] == (
        f"  broken (stdio: {py} -c {shlex.quote(BROKEN)}) — failed: the server closed the connection "
        "(boom: no config file)"
    )
    assert servers["novar"] == (
        "  novar — failed: MCP server 'novar' (.mcp.json): environment variable MCP_TEST_UNSET_VAR is not set "
        "(used in env.K)."
    )
    assert "    mcp__sdk__echo [read-only] — Echo the text back." in lines


def test_failures_give_one_notice_each(setup: Setup) -> None:
    broken = [n for n in setup.notices if "'broken'" in n]
    novar = [n for n in setup.notices if "'novar'" in n]
    assert len(broken) == 1 and len(novar) == 1, setup.notices
    assert broken[0] == (
        "MCP server 'broken' failed to start: the server closed the connection "
        "(boom: no config file). Its tools are not available."
    )
    assert "MCP_TEST_UNSET_VAR" in novar[0]
    assert not any(n.startswith("mcp__broken") for n in setup.tools())


def test_call_result_text_stdio_http_and_published(setup: Setup) -> None:
    tools = setup.tools()
    assert tools["mcp__sdk__echo"].run({"text": "hello"}, setup.ctx()) == "hello"
    assert tools["mcp__web__echo"].run({"text": "over http"}, setup.ctx()) == "over http"
    now = tools["mcp__time__get_current_time"].run({"timezone": "UTC"}, setup.ctx())
    assert isinstance(now, str) and '"timezone": "UTC"' in now
    # through the registry, as the turn runs it
    part = run_tool(
        tools,
        ToolCallPart(
            "c1",
            "mcp__time__convert_time",
            '{"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}',
        ),
        setup.ctx(),
    )
    assert not part.is_error and "21:00" in part.output


def test_read_only_hint_means_reads_and_anything_else_outside(setup: Setup) -> None:
    tools = setup.tools()
    assert tools["mcp__sdk__echo"].effects is Effect.READS
    assert tools["mcp__web__echo"].effects is Effect.READS
    assert tools["mcp__time__get_current_time"].effects is Effect.READS
    assert tools["mcp__sdk__greet"].effects is Effect.OUTSIDE and tools["mcp__sdk__crash"].effects is Effect.OUTSIDE
    assert not tools["mcp__sdk__greet"].undoable and tools["mcp__sdk__greet"].needs_approval


def test_image_result(setup: Setup) -> None:
    for name in ("mcp__sdk__image", "mcp__web__image"):
        out = setup.tools()[name].run({}, setup.ctx())
        assert isinstance(out, ToolOutput)
        assert out.text.startswith("a tiny image\n[image 1: image/png")
        assert len(out.images) == 1 and out.images[0].mime == "image/png"
        assert out.images[0].data.startswith(PNG_PREFIX) and len(out.images[0].data) == 70


def test_is_error_becomes_tool_error(setup: Setup) -> None:
    tool = setup.tools()["mcp__sdk__fail"]
    with pytest.raises(ToolError, match="the disk is on fire"):
        tool.run({}, setup.ctx())
    part = run_tool({tool.name: tool}, ToolCallPart("c2", tool.name, "{}"), setup.ctx())
    assert part.is_error and part.output == "Error: the disk is on fire"


def test_resources_as_text_lines(setup: Setup) -> None:
    out = setup.tools()["mcp__sdk__resources"].run({}, setup.ctx())
    assert isinstance(out, ToolOutput)
    assert out.text.splitlines() == [
        "[resource link] report: file:///tmp/report.csv (text/csv) — the full report",
        "[resource memo://note (text/plain)]",
        "remember the milk",
        "[image 1: image/png from resource memo://pic]",
    ]
    assert out.images[0].data.startswith(PNG_PREFIX)


def test_optional_arguments_strict_nulls_dropped(setup: Setup) -> None:
    tool = setup.tools()["mcp__sdk__greet"]
    assert wire.responses_tools([tool.spec()])[0]["strict"] is True
    assert tool.parameters["properties"]["punctuation"] == {"type": ["string", "null"]}
    call = ToolCallPart("c3", tool.name, '{"name": "Ada", "punctuation": null}')
    assert run_tool({tool.name: tool}, call, setup.ctx()).output == "Hello, Ada! (arguments: name)"
    assert tool.run({"name": "Bo", "punctuation": "?"}, setup.ctx()) == "Hello, Bo? (arguments: name, punctuation)"


def test_progress_reaches_ctx_progress(setup: Setup) -> None:
    for name in ("mcp__sdk__progress", "mcp__web__progress"):
        lines: list[str] = []
        assert setup.tools()[name].run({"steps": 3}, setup.ctx(progress=lines.append)) == "done"
        assert lines == ["step 1 (1/3)", "step 2 (2/3)", "step 3 (3/3)"]


def test_stop_cancels_a_slow_call(setup: Setup) -> None:
    tool = setup.tools()["mcp__sdk__slow"]
    abort = threading.Event()
    lines: list[str] = []

    def progress(line: str) -> None:  # the server reports progress: the call is running there; Stop now
        lines.append(line)
        abort.set()

    with pytest.raises(ToolError, match="stopped by the user; the MCP request was cancelled"):
        tool.run({"seconds": 30}, setup.ctx(abort=abort, progress=progress))
    assert lines[0] == "sleeping (1/300)"
    # the SDK sent notifications/cancelled: the server's handler was cancelled
    assert wait_for(lambda: (setup.markers / "cancelled-slow").exists(), 5)
    assert setup.tools()["mcp__sdk__echo"].run({"text": "still here"}, setup.ctx()) == "still here"


def test_env_reaches_server_and_secrets_stay_out(setup: Setup) -> None:
    tools = setup.tools()
    # the server got the value; the result that would land in the session record is redacted
    assert tools["mcp__sdk__getenv"].run({"name": "SERVICE_TOKEN"}, setup.ctx()) == "***"
    assert tools["mcp__sdk__getenv"].run({"name": "NOT_SET_HERE"}, setup.ctx()) == "(unset)"
    everything = setup.manager.status_text() + "\n".join(setup.notices)
    assert SECRET not in everything


def test_crashing_server_one_notice_others_keep_working(setup: Setup) -> None:
    setup.manager.drain_notices()
    crash = setup.tools()["mcp__crasher__crash"]
    with pytest.raises(ToolError, match="MCP server 'crasher' went away during the call"):
        crash.run({}, setup.ctx())
    notices = setup.manager.drain_notices()
    assert notices == [
        (
            "MCP server 'crasher' stopped: the server closed the connection (fatal: simulated crash). "
            "Its tools are no longer available."
        )
    ]
    assert "crasher (stdio: " in setup.manager.status_text()
    assert "failed: the server closed the connection (fatal: simulated crash)" in setup.manager.status_text()
    assert not any(n.startswith("mcp__crasher") for n in setup.tools())
    with pytest.raises(ToolError, match="not running"):
        crash.run({}, setup.ctx())
    assert setup.tools()["mcp__sdk__echo"].run({"text": "ok"}, setup.ctx()) == "ok"
    assert setup.tools()["mcp__web__echo"].run({"text": "ok"}, setup.ctx()) == "ok"
    assert setup.manager.drain_notices() == []
    # /mcp restart: the same server comes back
    setup.manager.restart("crasher")
    assert setup.manager.wait_ready(30)
    assert setup.tools()["mcp__crasher__echo"].run({"text": "back"}, setup.ctx()) == "back"
    assert setup.manager.drain_notices() == []


def test_schemas_accepted_by_both_apis(setup: Setup, fake_openai: object) -> None:
    tools = setup.manager.tools()
    assert len(tools) >= 24
    # the tools as the agent sends them: the wire layer marks each one strict or not
    responses_tools = wire.responses_tools(t.spec() for t in tools)
    chat_tools = wire.chat_tools(t.spec() for t in tools)
    for spec in responses_tools:
        found = problems(spec["name"], spec["description"], spec["parameters"], spec["strict"])
        assert not found, (spec["name"], found)
    base_url = fake_openai.base_url  # type: ignore[attr-defined]
    client = openai.OpenAI(api_key="sk-test-mcp", base_url=base_url, max_retries=0)
    client.responses.create(model="gpt-4o-mini", input="hi", tools=responses_tools)  # type: ignore[arg-type]
    client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "hi"}], tools=chat_tools)  # type: ignore[arg-type]
    assert [r.path for r in fake_openai.requests] == ["/v1/responses", "/v1/chat/completions"]  # type: ignore[attr-defined]


def test_close_stops_every_child(tmp_path: Path) -> None:
    before = set(children())
    manager = McpManager(tmp_path)
    impatient = McpManager(tmp_path, start_timeout_s=1.0)
    manager.configure({"a": parse_server("a", {"command": PY, "args": [SDK_SERVER]})})
    impatient.configure({"hang": parse_server("hang", {"command": PY, "args": ["-c", "import time; time.sleep(60)"]})})
    started = time.monotonic()
    assert impatient.wait_ready(10)
    assert time.monotonic() - started < 3  # reported at the deadline, not after the transport unwinds
    assert impatient.drain_notices() == [
        "MCP server 'hang' failed to start: no answer within 1 s. Its tools are not available."
    ]
    assert manager.wait_ready(30)
    spawned = {pid: cmd for pid, cmd in children().items() if pid not in before}
    assert any(SDK_SERVER in cmd for cmd in spawned.values()), spawned
    assert manager.tools()[0].run({"text": "x"}, ToolContext(root=tmp_path)) == "x"
    manager.close()
    impatient.close()
    assert wait_for(lambda: not (set(children()) & set(spawned)), 5), children()
    assert manager.status_text().startswith("No MCP servers configured.")


def test_legacy_protocol_list_changed_and_reconfigure(tmp_path: Path) -> None:
    """The 2025 handshake era (what most servers speak today): tools/list_changed makes the manager list
    again; dropping the server from the configuration stops it."""
    before = set(children())
    manager = McpManager(tmp_path, protocol="legacy")
    try:
        manager.configure({"a": parse_server("a", {"command": PY, "args": [SDK_SERVER]})})
        assert manager.wait_ready(30)
        spawned = set(children()) - before
        assert spawned and [t.name for t in manager.tools()][:1] == ["mcp__a__echo"]
        # tools/list_changed from the server: the manager lists again
        tools = {t.name: t for t in manager.tools()}
        assert tools["mcp__a__add_tool"].run({}, ToolContext(root=tmp_path)) == "added"
        assert wait_for(lambda: "mcp__a__added" in {t.name for t in manager.tools()}, 5)
        added = {t.name: t for t in manager.tools()}["mcp__a__added"]
        assert not added.changes and added.run({}, ToolContext(root=tmp_path)) == "the added tool works"
        manager.configure({})
        assert manager.tools() == []
        assert wait_for(lambda: not (set(children()) & spawned), 5)
    finally:
        manager.close()


def test_nothing_configured_imports_no_mcp(tmp_path: Path) -> None:
    code = (
        "import sys, pathlib; from shiro_kernel.mcp import McpManager, load_config; "
        f"m = McpManager(pathlib.Path({str(tmp_path)!r})); m.configure(m.load(m.root, {{}})); "
        "print(m.tools(), m.drain_notices(), m.status_text()[:25], 'mcp' in sys.modules, "
        "'mcp_types' in sys.modules); m.close()"
    )
    out = subprocess.run([PY, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == "[] [] No MCP servers configured False False"


def test_broken_file_gives_one_notice_and_trait_still_runs(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text("{not json")
    manager = McpManager(tmp_path)
    try:
        for _ in range(2):
            manager.configure(manager.load(tmp_path, {"t": {"command": "definitely-not-a-command-shiro"}}))
        assert manager.wait_ready(10)
        assert manager.drain_notices() == [
            f"{tmp_path / '.mcp.json'} is not valid JSON (Expecting property name enclosed in double quotes at "
            "line 1, column 2). MCP servers from that file are not started.",
            "MCP server 't' failed to start: command not found: definitely-not-a-command-shiro. "
            "Its tools are not available.",
        ]
    finally:
        manager.close()
