"""MCP configuration: .mcp.json + the Shiro.mcp_servers trait, ${VAR} expansion, validation, secrets."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shiro_kernel.mcp.config import McpConfigError, load_config, parse_server


def write(root: Path, servers: object) -> None:
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": servers}))


def test_file_and_trait_merge_trait_wins(tmp_path: Path) -> None:
    write(
        tmp_path,
        {"fs": {"command": "npx", "args": ["-y", "server-fs", "."]}, "web": {"url": "https://example.org/mcp"}},
    )
    servers = load_config(tmp_path, {"web": {"url": "http://127.0.0.1:9/mcp"}, "extra": {"command": "x"}})
    assert list(servers) == ["fs", "web", "extra"]
    fs = servers["fs"]
    assert (fs.transport, fs.command, fs.args, fs.error, fs.source) == (
        "stdio",
        "npx",
        ("-y", "server-fs", "."),
        None,
        ".mcp.json",
    )
    assert servers["web"].url == "http://127.0.0.1:9/mcp" and servers["web"].source == "Shiro.mcp_servers"
    # the trait may also use the file's {"mcpServers": {...}} wrapper
    assert list(load_config(tmp_path, {"mcpServers": {"z": {"command": "z"}}})) == ["fs", "web", "z"]


def test_no_file_no_trait_is_empty(tmp_path: Path) -> None:
    assert load_config(tmp_path, {}) == {}
    assert load_config(tmp_path, None) == {}


def test_var_expansion_everywhere(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_T_TOKEN", "tok-123456")
    monkeypatch.setenv("MCP_T_HOST", "example.org")
    monkeypatch.setenv("MCP_T_EMPTY", "")
    write(
        tmp_path,
        {
            "s": {
                "command": "${MCP_T_HOST}-cmd",
                "args": ["--token", "${MCP_T_TOKEN}", "${MCP_T_EMPTY:-fallback}"],
                "env": {"TOKEN": "${MCP_T_TOKEN}", "PLAIN": "x${MCP_T_HOST}y"},
            },
            "h": {"url": "https://${MCP_T_HOST}/mcp", "headers": {"Authorization": "Bearer ${MCP_T_TOKEN}"}},
            "d": {"command": "run", "args": ["${MCP_T_MISSING:-default-value}"]},
        },
    )
    servers = load_config(tmp_path)
    s, h = servers["s"], servers["h"]
    assert s.command == "example.org-cmd"
    assert s.args == ("--token", "tok-123456", "fallback")
    assert dict(s.env) == {"TOKEN": "tok-123456", "PLAIN": "xexample.orgy"}
    assert h.url == "https://example.org/mcp" and dict(h.headers) == {"Authorization": "Bearer tok-123456"}
    assert servers["d"].args == ("default-value",)


def test_missing_var_fails_that_server_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MCP_T_NOPE", raising=False)
    write(tmp_path, {"gh": {"command": "gh-mcp", "env": {"GITHUB_TOKEN": "${MCP_T_NOPE}"}}, "ok": {"command": "fine"}})
    servers = load_config(tmp_path)
    assert servers["ok"].error is None
    error = servers["gh"].error
    assert error is not None
    assert "MCP_T_NOPE" in error and "'gh'" in error and "env.GITHUB_TOKEN" in error
    assert error.endswith(".") and "\n" not in error  # one sentence


@pytest.mark.parametrize(
    "entry,words",
    [
        ({"command": "a", "url": "http://x"}, "not both"),
        ({}, 'needs "command"'),
        ({"args": ["x"]}, 'needs "command"'),
        ({"command": ""}, "non-empty"),
        ({"command": "a", "args": "x y"}, "list of strings"),
        ({"command": "a", "env": {"K": ["v"]}}, "env.K"),
        ({"command": "a", "env": "K=v"}, '"env" must be an object'),
        ({"url": "ftp://host/x"}, "http:// or https://"),
        ({"url": "http://h/x", "headers": {"A": {"b": 1}}}, "headers.A"),
        ({"type": "sse", "url": "http://h/sse"}, "SSE transport is not supported"),
        ({"type": "carrier-pigeon", "command": "a"}, 'unknown "type"'),
        ("npx server", "must be an object"),
    ],
)
def test_validation_one_sentence(entry: object, words: str) -> None:
    cfg = parse_server("bad", entry, ".mcp.json")
    assert cfg.error is not None and words in cfg.error, cfg.error
    assert cfg.error.startswith("MCP server 'bad' (.mcp.json): ") and "\n" not in cfg.error


def test_claude_code_type_keys_accepted() -> None:
    assert parse_server("a", {"type": "http", "url": "http://127.0.0.1:1/mcp"}).error is None
    assert parse_server("b", {"type": "stdio", "command": "x"}).error is None
    assert parse_server("c", {"type": "streamable-http", "url": "https://h/mcp", "timeout": 5}).error is None


def test_broken_file_raises_one_sentence(tmp_path: Path) -> None:
    (tmp_path / ".mcp.json").write_text('{"mcpServers": {"a": ')
    with pytest.raises(McpConfigError, match=r"\.mcp\.json is not valid JSON \(.* at line 1"):
        load_config(tmp_path)
    (tmp_path / ".mcp.json").write_text('{"mcpServers": []}')
    with pytest.raises(McpConfigError, match="must be a JSON object"):
        load_config(tmp_path)
    # the trait still loads when the caller leaves the file out
    assert list(load_config(tmp_path, {"t": {"command": "t"}}, include_file=False)) == ["t"]


def test_secrets_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MCP_T_SECRET", "s3cr3t-value-42")
    cfg = parse_server(
        "gh",
        {
            "command": "server",
            "args": ["--key", "${MCP_T_SECRET}"],
            "env": {"API_KEY": "plain-secret-99", "LOG_LEVEL": "info"},
        },
    )
    shown = cfg.describe()
    assert "s3cr3t-value-42" not in shown and "plain-secret-99" not in shown and "***" in shown
    assert cfg.redact("oops s3cr3t-value-42 plain-secret-99 info") == "oops *** *** ***"
    # tool results keep ordinary words: only certain secrets are removed there
    assert cfg.redact_output("level info, key plain-secret-99, arg s3cr3t-value-42") == "level info, key ***, arg ***"
    literal = parse_server(
        "l",
        {"command": "srv", "args": ["--api-key", "sk-literal-1", "--token=abc123", "--port", "8080", "MY_SECRET=zzz"]},
    )
    assert literal.describe() == "srv --api-key *** --token=*** --port 8080 MY_SECRET=***"
    web = parse_server(
        "w",
        {"url": "https://user:pa55word@h.example/mcp?api_key=zzz", "headers": {"Authorization": "Bearer abcdef123"}},
    )
    assert web.describe() == "https://h.example/mcp"
    assert web.redact("Authorization: Bearer abcdef123 pa55word") == "Authorization: *** ***"
    assert web.redact("token abcdef123") == "token ***"
    assert web.redact_output("token abcdef123") == "token ***"
