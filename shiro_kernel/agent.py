"""The agent of one kernel: settings, the session, the provider, and running a turn.

The magics call :meth:`Agent.ask`; everything here runs without a kernel too (a plain
``InteractiveShell`` or ``shell=None``), which is how it is tested.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import Shiro
from .events import Event, TurnEnd
from .paths import notebook_path, project_root
from .prompt import build_system_prompt
from .provider import Provider, ProviderSettings
from .render import TURN_MIME, Throttle, TurnLog, to_bundle_json, to_html, to_markdown, to_text
from .session import Session
from .tools import ToolContext, all_tools
from .turn import Turn, TurnOptions


class Agent:
    def __init__(self, shell: Any = None, config: Shiro | None = None) -> None:
        self.shell = shell
        self.config = config or Shiro(parent=shell)
        self.session = Session()
        self._provider: Provider | None = None
        self._provider_key: tuple[Any, ...] | None = None
        self._tools = all_tools()
        self.abort = threading.Event()
        self.session.notebook_path = str(self.notebook) if self.notebook else None

    # -- where we are ------------------------------------------------------------------------------
    @property
    def notebook(self) -> Path | None:
        return notebook_path(getattr(self.shell, "user_ns", None))

    @property
    def root(self) -> Path:
        return project_root(self.notebook or Path.cwd())

    # -- the provider, rebuilt when its settings change ------------------------------------------------
    def provider(self, model: str | None = None) -> Provider:
        c = self.config
        settings = ProviderSettings(model=model or c.model, api=c.api, base_url=c.base_url, store=c.store,
                                    stream=c.stream, timeout_s=c.timeout_s, max_retries=c.max_retries)
        key = (settings.model, settings.api, settings.base_url, settings.store, settings.stream,
               settings.timeout_s, settings.max_retries)
        if self._provider is None or key != self._provider_key:
            self._provider, self._provider_key = Provider(settings), key
        return self._provider

    # -- a turn ------------------------------------------------------------------------------------
    def ask(self, prompt: str, *, on_event: Callable[[Event], None] | None = None, model: str | None = None,
            agent: str | None = None, headless: bool = True, propose: Callable[[str], None] | None = None) -> TurnEnd:
        root = self.root
        notebook = self.notebook
        ctx = ToolContext(root=root, shell=self.shell, notebook_path=notebook, propose=propose)
        variant = agent or self.config.agent
        approval = self.config.approval

        def system() -> str:
            return build_system_prompt(root=str(root), notebook=str(notebook) if notebook else None,
                                       approval=approval, agent=variant)

        self.abort.clear()
        turn = Turn(self.session, self.provider(model), self._tools, ctx, system,
                    TurnOptions(approval=approval, max_steps=self.config.max_steps, headless=headless),
                    on_event=on_event or (lambda e: None), abort=self.abort)
        return turn.run(prompt)


class TextView:
    """The blocking view: one display that is updated (throttled) as the turn streams, ending with
    the answer and one line per tool call. The display carries Markdown, HTML and the
    ``application/vnd.shiro.turn+json`` bundle, so the notebook shows the turn without a kernel too.

    ``details`` supplies what the bundle and footer need beyond the events (session id, task list,
    context percentage, resume hint)."""

    def __init__(self, live: bool = True, interval: float = 0.1,
                 details: Callable[[], dict[str, Any]] | None = None) -> None:
        self.live = live  # False (terminal): print once at the end instead of redrawing
        self.log = TurnLog()
        self.throttle = Throttle(interval)
        self.details = details or (lambda: {})
        self.handle: Any = None

    def bundle(self, final: bool = False) -> dict[str, Any]:
        if not final:  # while streaming, Markdown is enough and cheap
            return {"text/markdown": to_markdown(self.log) or "*working…*",
                    "text/plain": to_text(self.log) or "working…"}
        d = self.details()
        extra = d.get("footer", "")
        return {
            "text/plain": to_text(self.log, extra),
            "text/markdown": to_markdown(self.log, extra),
            "text/html": to_html(self.log, extra),
            TURN_MIME: to_bundle_json(self.log, session_id=d.get("session_id"), tasks=d.get("tasks"),
                                      context_percent=d.get("context_percent"), resume=d.get("resume")),
        }

    def __call__(self, event: Event) -> None:
        changed = self.log.feed(event)
        if isinstance(event, TurnEnd):
            self.show(final=True)
        elif changed and self.live and self.throttle.ready():
            self.show()

    def show(self, final: bool = False) -> None:
        from IPython.display import display

        data = self.bundle(final)
        if self.handle is None:
            self.handle = display(data, raw=True, display_id=True)
        else:
            self.handle.update(data, raw=True)
