"""``shiro mcp list | allow NAME… | deny NAME…``: which of a repository's ``.mcp.json`` servers may start.

The same allowances the kernel keeps (``SHIRO_HOME/mcp/allowed.json``, :mod:`shiro_kernel.mcp.consent`), for
one project: the repository (or folder) you are in, or ``--project DIR``. Nothing here starts a server or
imports the MCP SDK.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from ..errors import RequestError
from ..mcp.config import McpConfigError, ServerConfig, load_config
from ..mcp.consent import ALLOWED, CHANGED, ConsentStore
from ..store.paths import project_root
from .command import Command


def _arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION")
    listing = sub.add_parser("list", help="this project's .mcp.json servers and whether each may start")
    allow = sub.add_parser("allow", help="let these servers start (this exact definition, in this project)")
    allow.add_argument("names", nargs="+", metavar="NAME")
    deny = sub.add_parser("deny", help="forget the allowance: the server no longer starts")
    deny.add_argument("names", nargs="+", metavar="NAME")
    for p in (parser, listing, allow, deny):
        p.add_argument(
            "--project",
            metavar="DIR",
            default=argparse.SUPPRESS,
            help="the project (default: the repository or folder you are in)",
        )


def _project(args: argparse.Namespace) -> Path:
    return project_root(Path(getattr(args, "project", None) or ".").expanduser())


def _servers(root: Path) -> dict[str, ServerConfig]:
    """The project file's servers (the user's own ``Shiro.mcp_servers`` live in the kernel's settings)."""
    try:
        return load_config(root)
    except McpConfigError as exc:
        raise RequestError(str(exc)) from None


def _run(args: argparse.Namespace) -> int:
    root = _project(args)
    store = ConsentStore()
    if args.action in (None, "list"):
        print(_listing(root, store))
        return 0
    servers = _servers(root)
    code = 0
    for name in args.names:
        cfg = servers.get(name)
        if args.action == "allow":
            if cfg is None:
                print(f"no MCP server named {name!r} in {root / '.mcp.json'}")
                code = 1
                continue
            store.allow(root, cfg)
            print(f"allowed '{name}' in {root}: {cfg.describe()} (asked again if .mcp.json changes its definition)")
        else:
            was = store.revoke(root, name)
            print(f"'{name}' is {'no longer allowed' if was else 'not allowed'} in {root}")
    return code


def _listing(root: Path, store: ConsentStore) -> str:
    servers = _servers(root)
    allowed = store.project(root)
    if not servers and not allowed:
        return f"no MCP servers in {root / '.mcp.json'}"
    lines = [f"MCP servers in {root / '.mcp.json'}:"]
    for name, cfg in servers.items():
        target = f" ({cfg.transport}: {cfg.describe()})" if not cfg.error else ""
        how = f"shiro mcp allow {name} --project {shlex.quote(str(root))}"
        state = store.state(root, cfg) if not cfg.error else ""
        if cfg.error:
            shown = f"cannot start: {cfg.error}"
        elif state == ALLOWED:
            shown = f"allowed {allowed[name].allowed_at.replace('T', ' ').rstrip('Z')} UTC"
        elif state == CHANGED:
            shown = f"changed since you allowed it, not started: {how}"
        else:
            shown = f"not allowed yet: {how}"
        lines.append(f"  {name}{target} — {shown}")
    for name in allowed:
        if name not in servers:
            lines.append(f"  {name} — allowed, no longer in .mcp.json (shiro mcp deny {name} forgets it)")
    return "\n".join(lines)


COMMANDS = [Command("mcp", "which of this repository's .mcp.json MCP servers may start", _arguments, _run)]
