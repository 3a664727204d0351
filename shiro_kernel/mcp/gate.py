"""The consent gate of one kernel: which of the repository's ``.mcp.json`` servers may start now.

:class:`ConsentGate` combines the user's lasting allowances (:class:`~.consent.ConsentStore`) with what this
kernel was told: a Deny holds until the kernel ends (a live turn does not ask on every turn), and a headless
run's "not started" notice is shown once per server definition. Everything is keyed by (project root, server
name, fingerprint), so a changed definition is a new question.

Invariants:

* Only servers from the repository's file are gated (``ServerConfig.from_project``); the user's own
  ``Shiro.mcp_servers`` always pass. An entry in error runs nothing and passes (it fails as it is).
* Nothing is started here: :meth:`ConsentGate.hold` returns the names to hold back, with the reason
  ``%shiro /mcp`` shows; the manager does the rest.
* A consent file that cannot be read allows nothing and is said once; one that cannot be written still
  lets an "Allow" count for this kernel, and says so.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from pathlib import Path

from ..errors import CorruptFile, StoreError
from ..events import Event, Notice
from .config import ServerConfig
from .consent import (
    ALLOW,
    ALLOWED,
    CHANGED,
    DENY,
    NEW,
    ConsentAsker,
    ConsentRequest,
    ConsentStore,
    held_reason,
    project_key,
    waiting_notice,
)

Emit = Callable[[Event], None]
Key = tuple[str, str, str]


class ConsentGate:
    def __init__(self, store: ConsentStore | None = None) -> None:
        self.store = store or ConsentStore()
        self._denied: set[Key] = set()
        self._allowed_here: set[Key] = set()  # allowed, but the file could not be written
        self._told: set[Key] = set()  # headless: the "not started" notice was shown
        self._told_unreadable = False

    @staticmethod
    def _key(root: Path, cfg: ServerConfig) -> Key:
        return (project_key(root), cfg.name, cfg.fingerprint())

    def hold(
        self,
        root: Path,
        configs: Mapping[str, ServerConfig],
        ask: ConsentAsker | None = None,
        emit: Emit | None = None,
        abort: threading.Event | None = None,
    ) -> dict[str, str]:
        """The servers not to start, with why: each server of the repository's ``.mcp.json`` that the user
        has not allowed in this exact definition. ``ask`` (a live turn) asks about each, until ``abort``;
        without it (a headless run) one notice through ``emit`` names the new ones and how to allow them."""
        held: dict[str, str] = {}
        waiting: list[tuple[ServerConfig, str]] = []
        for name, cfg in configs.items():
            if not cfg.from_project or cfg.error:
                continue
            key = self._key(root, cfg)
            state = ALLOWED if key in self._allowed_here else self._stored_state(root, cfg, emit)
            if state == ALLOWED:
                continue
            if key in self._denied:
                held[name] = held_reason(state, name, denied=True)
                continue
            if ask is not None and not (abort is not None and abort.is_set()):
                answer = ask(ConsentRequest(name, root / ".mcp.json", tuple(cfg.consent_lines()), state == CHANGED))
                if answer == ALLOW:
                    self.remember(root, cfg, emit)
                    continue
                if answer == DENY:
                    self._denied.add(key)
                    held[name] = held_reason(state, name, denied=True)
                    continue
            held[name] = held_reason(state, name)
            if ask is None and key not in self._told:
                waiting.append((cfg, state))
        if waiting and emit is not None:
            self._told.update(self._key(root, cfg) for cfg, _ in waiting)
            emit(Notice(waiting_notice(root, waiting), kind="warning"))
        return held

    def _stored_state(self, root: Path, cfg: ServerConfig, emit: Emit | None) -> str:
        try:
            return self.store.state(root, cfg)
        except CorruptFile as exc:  # allows nothing; said once
            if emit is not None and not self._told_unreadable:
                self._told_unreadable = True
                emit(
                    Notice(
                        f"{exc}; this repository's MCP servers are treated as not allowed (allowing one sets "
                        "the file aside)",
                        kind="warning",
                    )
                )
            return NEW

    def remember(self, root: Path, cfg: ServerConfig, emit: Emit | None = None) -> str:
        """Allow ``cfg`` for good; when the file cannot be written, for this kernel (the warning, else '')."""
        key = self._key(root, cfg)
        self._denied.discard(key)
        try:
            self.store.allow(root, cfg)
        except StoreError as exc:
            self._allowed_here.add(key)
            text = f"MCP server '{cfg.name}' is allowed in this kernel only: {exc}"
            if emit is not None:
                emit(Notice(text, kind="warning"))
            return text
        return ""

    # -- /mcp allow, /mcp deny ----------------------------------------------------------------------------
    def allow(self, root: Path, configs: Mapping[str, ServerConfig], names: list[str]) -> list[str]:
        """``/mcp allow NAME…``: one line per name (``allowed '…'`` when it was)."""
        lines = []
        for name in names:
            cfg = configs.get(name)
            if cfg is None:
                lines.append(f"no MCP server named {name!r} in {root / '.mcp.json'}")
            elif not cfg.from_project:
                lines.append(f"'{name}' comes from your own Shiro.mcp_servers: it starts without asking")
            else:
                lines.append(
                    self.remember(root, cfg)
                    or f"allowed '{name}' in {root}: {cfg.describe()} (asked again if .mcp.json changes its definition)"
                )
        return lines

    def deny(self, root: Path, configs: Mapping[str, ServerConfig], names: list[str]) -> list[str]:
        """``/mcp deny NAME…``: forget the allowance, and hold the server for the rest of this kernel."""
        lines = []
        for name in names:
            cfg = configs.get(name)
            if cfg is not None and not cfg.from_project:
                lines.append(f"'{name}' comes from your own Shiro.mcp_servers: remove it there to stop it")
                continue
            try:
                was = self.store.revoke(root, name)
            except StoreError as exc:
                lines.append(f"could not forget '{name}': {exc}")
                continue
            if cfg is not None:
                self._denied.add(self._key(root, cfg))
                self._allowed_here.discard(self._key(root, cfg))
            what = "no longer allowed" if was else "not allowed"
            lines.append(f"'{name}' is {what} in {root}; it does not start in this kernel (%shiro /mcp allow {name})")
        return lines

    def waiting(self, root: Path, configs: Mapping[str, ServerConfig]) -> str:
        """The line ``/mcp allow`` without a name shows: which servers wait for an answer."""
        held = self.hold(root, configs)
        if not held:
            return "no MCP server of this repository is waiting to be allowed"
        return "waiting: " + ", ".join(f"{name} ({configs[name].describe()})" for name in held)


__all__ = ["ConsentGate"]
