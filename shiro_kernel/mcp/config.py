"""Which MCP servers to run: ``<root>/.mcp.json`` plus the ``Shiro.mcp_servers`` trait.

Both use the common shape ``{"mcpServers": {NAME: {"command", "args", "env", "cwd"} | {"url", "headers"}}}``
(the trait may also be the inner ``{NAME: {...}}`` mapping). Claude Code's ``"type"`` key is accepted
(``stdio`` / ``http`` / ``streamable-http``); unknown keys are ignored so a shared file keeps working.

Invariants:

* Nothing here imports ``mcp``: reading the config is cheap and happens before any server starts.
* ``${VAR}`` and ``${VAR:-default}`` are expanded from ``os.environ`` in command, args, env, cwd, url and
  headers. A missing variable fails *that server only* (``ServerConfig.error``), naming the variable.
* A problem with one server's entry never hides the others: it becomes ``ServerConfig.error``, a single
  sentence. Only a broken file as a whole (unreadable, not JSON, wrong top-level shape) raises
  :class:`McpConfigError`.
* ``ServerConfig.definition`` is the entry as written (before ``${VAR}`` expansion): what the user allows
  when a repository's ``.mcp.json`` asks to start a server (:mod:`.consent`). Its :meth:`~ServerConfig.fingerprint`
  changes whenever the command, args, env (names and raw values), cwd, URL or header names change.
* Secrets: every env and header value (and every value a ``${VAR}`` expanded to) is listed in
  ``ServerConfig.secrets``; :meth:`ServerConfig.redact` removes them from status lines, notices and
  errors. Tool results (which reach the session record) go through :meth:`ServerConfig.redact_output`,
  which removes the certain secrets only. ``describe()`` never includes env or header values.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

#: the project file, at the repository root (the same file Claude Code reads)
CONFIG_FILE = ".mcp.json"
#: ``ServerConfig.source`` of the two origins: a repository's file (needs consent, hints not trusted) and
#: the user's own ``Shiro.mcp_servers``
PROJECT_SOURCE = CONFIG_FILE
USER_SOURCE = "Shiro.mcp_servers"

_SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASS|AUTH|CRED|COOKIE|SESSION|PRIVATE|SIGNATURE", re.IGNORECASE)
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: shorter values are not treated as secrets: redacting "1" or "on" would garble every message
_MIN_SECRET = 4


class McpConfigError(ValueError):
    """The configuration as a whole cannot be read (one sentence, naming the file)."""


@dataclass(frozen=True)
class ServerConfig:
    """One server: stdio (``command``) or streamable HTTP (``url``), or an ``error`` saying why not."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    #: one sentence when the entry cannot be used; the manager reports it as this server's failure
    error: str | None = None
    #: where the entry came from: ".mcp.json" or "Shiro.mcp_servers"
    source: str = ""
    secrets: tuple[str, ...] = ()
    #: the subset that is certainly secret (headers, ${VAR} values, env entries named like KEY/TOKEN/...):
    #: removed from tool results too, where redacting every env value (e.g. "info") would garble text
    output_secrets: tuple[str, ...] = ()
    #: the entry as written, before ``${VAR}`` expansion, as canonical JSON (see :meth:`fingerprint`)
    definition: str = ""

    @property
    def transport(self) -> str:
        return "stdio" if self.command is not None else "http"

    @property
    def from_project(self) -> bool:
        """From a repository's ``.mcp.json`` (not the user's own settings): it starts only once allowed, and
        its tools' ``readOnlyHint`` is not believed."""
        return self.source == PROJECT_SOURCE

    def fingerprint(self) -> str:
        """SHA-256 of :attr:`definition`: what a consent is for. Any change to the command, args, env, cwd,
        URL or header names gives another fingerprint."""
        import hashlib

        return hashlib.sha256(self.definition.encode("utf-8")).hexdigest()

    def consent_lines(self) -> list[str]:
        """What starting this server means, for a person deciding whether to allow it: the command line (or
        URL), then env and cwd (or header names). Values as written in the file, secret-looking ones as
        ``***``; ``${VAR}`` references are shown as references, never expanded."""
        raw: dict[str, Any] = json.loads(self.definition) if self.definition else {}
        lines = [self.describe()]
        env = raw.get("env") or {}
        if env:
            shown = [f"{k}={'***' if _SECRET_NAME.search(k) and not _VAR.fullmatch(v) else v}" for k, v in env.items()]
            lines.append("env: " + " ".join(shown))
        if raw.get("cwd"):
            lines.append(f"cwd: {raw['cwd']}")
        if raw.get("headers"):
            lines.append("headers: " + ", ".join(raw["headers"]))
        return lines

    def key(self) -> tuple[Any, ...]:
        """What identifies a running server: a changed key means restart it."""
        return (
            self.command,
            self.args,
            tuple(sorted(self.env.items())),
            self.cwd,
            self.url,
            tuple(sorted(self.headers.items())),
            self.error,
        )

    def redact(self, text: str) -> str:
        """``text`` (a status line, notice or error) with every env/header value of this server as ``***``."""
        return _replace(text, self.secrets)

    def redact_output(self, text: str) -> str:
        """``text`` (a tool result, which lands in the session record) without this server's secrets."""
        return _replace(text, self.output_secrets)

    def describe(self) -> str:
        """How it is reached, safe to show: the command line (redacted) or the URL without query/userinfo."""
        if self.command is not None:
            return self.redact(" ".join([shlex.quote(self.command), *_mask_flag_values(self.args)]))
        if self.url is not None:
            parts = urlsplit(self.url)
            host = parts.hostname or ""
            port = f":{parts.port}" if parts.port else ""
            return self.redact(f"{parts.scheme}://{host}{port}{parts.path}")
        return "(not configured)"


def load_config(
    project_root: Path, trait: Mapping[str, Any] | None = None, *, include_file: bool = True
) -> dict[str, ServerConfig]:
    """Servers from ``<project_root>/.mcp.json`` and the trait (the trait wins on a name clash).

    Raises :class:`McpConfigError` only when the file as a whole is broken; a bad entry becomes that
    server's ``error``.
    """
    servers: dict[str, ServerConfig] = {}
    path = Path(project_root) / CONFIG_FILE
    if include_file and path.is_file():
        try:
            data = json.loads(path.read_text("utf-8"))
        except json.JSONDecodeError as exc:
            raise McpConfigError(
                f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})."
            ) from None
        except (OSError, UnicodeDecodeError) as exc:
            raise McpConfigError(f"{path} cannot be read ({exc}).") from None
        if not isinstance(data, dict) or not isinstance(data.get("mcpServers", {}), dict):
            raise McpConfigError(f'{path} must be a JSON object with an "mcpServers" object inside.')
        servers.update(_parse_servers(data.get("mcpServers", {}), PROJECT_SOURCE))
    if trait:
        inner = trait.get("mcpServers", trait) if isinstance(trait, Mapping) else trait
        if not isinstance(inner, Mapping):
            raise McpConfigError("Shiro.mcp_servers must be a dict of server name to settings.")
        servers.update(_parse_servers(inner, USER_SOURCE))
    return servers


def _parse_servers(entries: Mapping[str, Any], source: str) -> dict[str, ServerConfig]:
    return {str(name): parse_server(str(name), entry, source) for name, entry in entries.items()}


def parse_server(name: str, entry: Any, source: str = "", environ: Mapping[str, str] | None = None) -> ServerConfig:
    """One entry, validated and ``${VAR}``-expanded; problems become ``error`` (never raise)."""
    env_source = os.environ if environ is None else environ
    try:
        return _parse(name, entry, source, env_source)
    except _EntryError as exc:
        return ServerConfig(name=name, error=f"MCP server '{name}' ({source or 'config'}): {exc}", source=source)


class _EntryError(Exception):
    pass


def _parse(name: str, entry: Any, source: str, environ: Mapping[str, str]) -> ServerConfig:
    if not name.strip():
        raise _EntryError("the server name is empty.")
    if not isinstance(entry, Mapping):
        raise _EntryError('the entry must be an object with "command" or "url".')
    kind = entry.get("type")
    has_cmd, has_url = "command" in entry, "url" in entry
    if kind == "sse":
        raise _EntryError('the SSE transport is not supported; use streamable HTTP ("type": "http").')
    if kind not in (None, "stdio", "http", "streamable-http", "streamableHttp", "streamable_http"):
        raise _EntryError(f'unknown "type" {kind!r}; use "stdio" or "http".')
    if has_cmd and has_url:
        raise _EntryError('give either "command" (stdio) or "url" (HTTP), not both.')
    if not has_cmd and not has_url:
        raise _EntryError('it needs "command" (a stdio server) or "url" (a streamable HTTP server).')
    secrets: list[str] = []
    expanded: list[str] = []  # values that came from ${VAR}: always treated as secret
    expand = _Expander(environ, expanded)
    if has_cmd:
        command = entry["command"]
        if not isinstance(command, str) or not command.strip():
            raise _EntryError('"command" must be a non-empty string.')
        args = entry.get("args", [])
        if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
            raise _EntryError('"args" must be a list of strings.')
        env = _string_map(entry.get("env", {}), "env")
        cwd = entry.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise _EntryError('"cwd" must be a string.')
        exp_env = {k: expand(v, f"env.{k}") for k, v in env.items()}
        secrets += exp_env.values()
        named = [v for k, v in exp_env.items() if _SECRET_NAME.search(k)]
        written = {"name": name, "command": command, "args": [str(a) for a in args], "env": env, "cwd": cwd}
        return ServerConfig(
            name=name,
            command=expand(command, "command"),
            args=tuple(expand(str(a), f"args[{i}]") for i, a in enumerate(args)),
            env=exp_env,
            cwd=expand(cwd, "cwd") if cwd else None,
            source=source,
            secrets=_secret_list(secrets + expanded),
            output_secrets=_secret_list(named + expanded),
            definition=_canonical(written),
        )
    url = entry["url"]
    if not isinstance(url, str) or not url.strip():
        raise _EntryError('"url" must be a non-empty string.')
    headers = _string_map(entry.get("headers", {}), "headers")
    exp_headers = {k: expand(v, f"headers.{k}") for k, v in headers.items()}
    for value in exp_headers.values():
        secrets.append(value)
        scheme, _, token = value.partition(" ")
        if token and scheme.lower() in ("bearer", "basic", "token"):
            secrets.append(token)
    exp_url = expand(url, "url")
    parts = urlsplit(exp_url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise _EntryError(
            f'"url" must be an http:// or https:// URL, not {_replace(exp_url, _secret_list(secrets + expanded))!r}.'
        )
    if parts.password:
        secrets.append(parts.password)
    found = _secret_list(secrets + expanded)
    # header names only: a token rotated in the file does not change where the server is or what it gets
    written = {"name": name, "url": url, "headers": sorted(headers)}
    return ServerConfig(
        name=name,
        url=exp_url,
        headers=exp_headers,
        source=source,
        secrets=found,
        output_secrets=found,
        definition=_canonical(written),
    )


class _Expander:
    """Expands ``${VAR}`` / ``${VAR:-default}``; remembers expanded values as secrets."""

    def __init__(self, environ: Mapping[str, str], found: list[str]) -> None:
        self.environ = environ
        self.found = found

    def __call__(self, value: str, where: str) -> str:
        def sub(match: re.Match[str]) -> str:
            var, default = match.group(1), match.group(2)
            found = self.environ.get(var)
            if found is None or (found == "" and default is not None):
                if default is None:
                    raise _EntryError(f"environment variable {var} is not set (used in {where}).")
                return default
            self.found.append(found)
            return found

        return _VAR.sub(sub, value)


def _canonical(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _string_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise _EntryError(f'"{what}" must be an object of string values.')
    out: dict[str, str] = {}
    for key, item in value.items():
        if not isinstance(item, (str, int, float)) or isinstance(item, bool):
            raise _EntryError(f'"{what}.{key}" must be a string.')
        out[str(key)] = str(item)
    return out


def _secret_list(values: list[str]) -> tuple[str, ...]:
    return tuple(sorted({v for v in values if len(v) >= _MIN_SECRET}))


def _mask_flag_values(args: tuple[str, ...]) -> list[str]:
    """``--api-key sk-…`` / ``--token=…`` / ``API_KEY=…`` written literally in args: shown as ``***``; the
    rest shell-quoted, so ``bash -c 'a; b'`` reads as the one argument it is."""
    out: list[str] = []
    for i, arg in enumerate(args):
        flag, eq, _value = arg.partition("=")
        if eq and _SECRET_NAME.search(flag):
            out.append(f"{shlex.quote(flag)}=***")
        elif i and args[i - 1].startswith("-") and "=" not in args[i - 1] and _SECRET_NAME.search(args[i - 1]):
            out.append("***")
        else:
            out.append(shlex.quote(arg))
    return out


def _replace(text: str, secrets: tuple[str, ...]) -> str:
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text
