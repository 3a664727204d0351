"""Which of a repository's MCP servers the user allowed to start: ``SHIRO_HOME/mcp/allowed.json``.

A clone's ``.mcp.json`` names commands to run; like Claude Code and VS Code, shiro starts none of them
until the user says so. An allowance is for one project root and one exact server definition
(:meth:`~.config.ServerConfig.fingerprint`: the command, args, env, cwd / URL and header names as written in
the file), so a ``.mcp.json`` changed by a pull asks again. Servers from the user's own
``Shiro.mcp_servers`` never need one.

The file (0600, in a 0700 folder)::

    {"version": 1, "projects": {"/abs/root": {"NAME": {"fingerprint": "…", "target": "uvx mcp-server-time",
                                                        "allowedAt": "2025-06-01T10:00:00Z"}}}}

Invariants:

* Read-modify-write under :func:`~shiro_kernel.store.files.locked`, written with
  :func:`~shiro_kernel.store.files.write_atomic`: two kernels allowing servers at once lose neither.
* A file that cannot be parsed allows nothing (:class:`~shiro_kernel.errors.CorruptFile` is raised to the
  caller, who says so); the next :meth:`ConsentStore.allow` sets it aside first, never overwriting it.
* ``target`` is :meth:`~.config.ServerConfig.describe` (secrets masked): safe to list, never a secret.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import CorruptFile, StoreError
from ..store import files
from .config import ServerConfig

VERSION = 1
FILE_MODE, DIR_MODE = 0o600, 0o700

#: :meth:`ConsentStore.state` of a project server
ALLOWED, NEW, CHANGED = "allowed", "new", "changed"


def folder() -> Path:
    """``SHIRO_HOME/mcp``: the consents and the ``/mcp serve`` token files."""
    from ..store.paths import home

    return home() / "mcp"


def private_folder(where: Path | None = None) -> Path:
    """``where`` (default :func:`folder`), created (and kept) readable by this user only. Raises ``OSError``."""
    where = folder() if where is None else where
    where.mkdir(parents=True, exist_ok=True, mode=DIR_MODE)
    if where.stat().st_mode & 0o077:
        os.chmod(where, DIR_MODE)
    return where


def project_key(root: Path) -> str:
    return str(Path(root).resolve())


@dataclass(frozen=True)
class Allowance:
    name: str
    fingerprint: str
    target: str
    allowed_at: str


class ConsentStore:
    """The allowances, in ``path`` (default ``SHIRO_HOME/mcp/allowed.json``, looked up at each use)."""

    def __init__(self, path: Path | None = None) -> None:
        self._path = path

    @property
    def path(self) -> Path:
        return self._path if self._path is not None else folder() / "allowed.json"

    # -- reading --------------------------------------------------------------------------------------
    def _read(self) -> dict[str, Any]:
        data = files.read_json(self.path)
        if data is None:
            return {"version": VERSION, "projects": {}}
        if not isinstance(data, dict) or not isinstance(data.get("projects"), dict):
            raise CorruptFile(self.path, 'not an object with "projects"')
        return data

    def project(self, root: Path) -> dict[str, Allowance]:
        """This project's allowances by server name. Raises :class:`CorruptFile`."""
        entries = self._read()["projects"].get(project_key(root))
        out: dict[str, Allowance] = {}
        for name, entry in (entries or {}).items() if isinstance(entries, dict) else ():
            if isinstance(entry, dict) and isinstance(entry.get("fingerprint"), str):
                out[name] = Allowance(
                    name, entry["fingerprint"], str(entry.get("target", "")), str(entry.get("allowedAt", ""))
                )
        return out

    def state(self, root: Path, config: ServerConfig) -> str:
        """:data:`ALLOWED` (this exact definition), :data:`CHANGED` (another one was), or :data:`NEW`."""
        allowance = self.project(root).get(config.name)
        if allowance is None:
            return NEW
        return ALLOWED if allowance.fingerprint == config.fingerprint() else CHANGED

    # -- writing --------------------------------------------------------------------------------------
    def allow(self, root: Path, config: ServerConfig) -> None:
        """Remember that ``config`` (exactly this definition) may start in the project at ``root``."""
        entry = {"fingerprint": config.fingerprint(), "target": config.describe(), "allowedAt": _now()}

        def add(projects: dict[str, Any]) -> None:
            entries = projects.get(project_key(root))
            if not isinstance(entries, dict):
                entries = projects[project_key(root)] = {}
            entries[config.name] = entry

        self._update(add)

    def revoke(self, root: Path, name: str) -> bool:
        """Forget the allowance of ``name`` in this project; False when there was none."""
        found: list[bool] = []

        def drop(projects: dict[str, Any]) -> None:
            entries = projects.get(project_key(root))
            found.append(isinstance(entries, dict) and entries.pop(name, None) is not None)
            if isinstance(entries, dict) and not entries:
                projects.pop(project_key(root), None)

        self._update(drop)
        return bool(found and found[0])

    def _update(self, change: Callable[[dict[str, Any]], None]) -> None:
        path = self.path
        try:
            private_folder(path.parent)
        except OSError as exc:
            raise StoreError(f"could not write {path} ({exc.strerror or exc})") from exc
        with files.locked(path):
            try:
                data = self._read()
            except CorruptFile:
                files.quarantine(path)  # kept beside, never overwritten: the user can look at it
                data = {"version": VERSION, "projects": {}}
            change(data["projects"])
            data["version"] = VERSION
            files.write_atomic(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n", mode=FILE_MODE)


# -- what the user is asked and told -------------------------------------------------------------------
ALLOW, DENY = "allow", "deny"


@dataclass(frozen=True)
class ConsentRequest:
    """One repository server waiting for a yes or no (what a consent prompt shows)."""

    server: str
    file: Path  # the .mcp.json it comes from
    lines: tuple[str, ...]  # ServerConfig.consent_lines(): the command line first
    changed: bool  # another definition of it was allowed before


#: asks the user about one project server; returns :data:`ALLOW`, :data:`DENY`, or None (not answered: the
#: turn was stopped). Called on the turn's thread; may block until a click.
ConsentAsker = Callable[[ConsentRequest], "str | None"]

PROMPT_TITLE = "start an MCP server from this repository's .mcp.json"
PROMPT_TITLE_CHANGED = "start an MCP server whose definition in .mcp.json changed since you allowed it"
PROMPT_HELP = (
    "Allow starts it now and from now on in this project, as long as .mcp.json defines it exactly so (a changed "
    "definition asks again). Deny: it does not start in this kernel."
)


def prompt_text(request: ConsentRequest) -> tuple[str, str, str]:
    """``(title, what would run, help)`` of the question (plain text; the view escapes it)."""
    title = PROMPT_TITLE_CHANGED if request.changed else PROMPT_TITLE
    return title, "\n".join(request.lines), f"From {request.file}. {PROMPT_HELP}"


def held_reason(state: str, name: str, denied: bool = False) -> str:
    """What ``%shiro /mcp`` says about a project server that is not started."""
    how = f"%shiro /mcp allow {name} starts it"
    if denied:
        return f"denied in this kernel (from .mcp.json): {how}"
    if state == CHANGED:
        return f"changed since you allowed it (from .mcp.json), not started: {how}"
    return f"not allowed yet (from .mcp.json): {how}"


def waiting_notice(root: Path, waiting: list[tuple[ServerConfig, str]]) -> str:
    """The one notice of a run that cannot ask (headless): which servers did not start, what they would run,
    and the three ways to allow them."""
    import shlex

    file = Path(root) / ".mcp.json"
    why = "a repository's MCP servers run only after you allow them"

    def label(cfg: ServerConfig, state: str) -> str:
        return f"'{cfg.name}'" + (" (changed since you allowed it)" if state == CHANGED else "")

    if len(waiting) == 1:
        cfg, state = waiting[0]
        head = f"MCP server {label(cfg, state)} from {file} was not started: {why}. It would run: {cfg.describe()}."
        them = "it"
    else:
        runs = "; ".join(f"{label(cfg, state)} would run: {cfg.describe()}" for cfg, state in waiting)
        head, them = f"MCP servers from {file} were not started: {why}. {runs}.", "them"
    names = " ".join(cfg.name for cfg, _ in waiting)
    return (
        f"{head} To allow {them}: %shiro /mcp allow {names}, or shiro mcp allow {names} --project "
        f"{shlex.quote(str(root))} in a terminal, or declare {them} in your own %config Shiro.mcp_servers."
    )


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


__all__ = [
    "ALLOW",
    "ALLOWED",
    "CHANGED",
    "DENY",
    "NEW",
    "Allowance",
    "ConsentAsker",
    "ConsentRequest",
    "ConsentStore",
    "folder",
    "held_reason",
    "private_folder",
    "project_key",
    "prompt_text",
    "waiting_notice",
]
