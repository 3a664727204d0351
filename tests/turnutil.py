"""The turn loop for tests (importable as ``turnutil``): a few small tools, and a :class:`Turn` against
a provider pointed at the fake OpenAI server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from shiro_kernel.provider.client import Provider, ProviderSettings
from shiro_kernel.session import Session
from shiro_kernel.tools import Effect, Tool, ToolContext, ToolError, Touches
from shiro_kernel.tools.base import schema
from shiro_kernel.turn import HEADLESS, Frontend, Turn, TurnOptions

KEY = "sk-test-THISKEYMUSTNEVERLEAK-1234567890"


def _add(args: dict[str, Any], ctx: ToolContext) -> str:
    return str(args["a"] + args["b"])


def _fail(args: dict[str, Any], ctx: ToolContext) -> str:
    raise ToolError("the disk is on fire")


def _crash(args: dict[str, Any], ctx: ToolContext) -> str:
    raise RuntimeError("bug in the tool")


TOOLS = {
    "add": Tool(
        "add",
        "Add two integers.",
        schema({"a": {"type": "integer"}, "b": {"type": "integer"}}),
        _add,
        effects=Effect.READS,
    ),
    "fail": Tool("fail", "Always fails.", schema({}), _fail, effects=Effect.READS),
    "crash": Tool("crash", "Has a bug.", schema({}), _crash, effects=Effect.READS),
    "write": Tool(
        "write",
        "Changes something.",
        schema({"x": {"type": "string"}}),
        lambda a, c: "written",
        effects=Effect.FILES,
        touches=lambda a, c: Touches(),  # it says it changes files, and writes none
    ),
}


def make_turn(
    fake: Any,
    tmp_path: Path,
    *,
    api: str = "responses",
    stream: bool = True,
    store: bool = True,
    model: str = "gpt-4o-mini",
    options: TurnOptions | None = None,
    front: Frontend = HEADLESS,
    session: Session | None = None,
    events: list[Any] | None = None,
    max_retries: int = 2,
    timeout_s: float = 10.0,
) -> Turn:
    """A turn with :data:`TOOLS` against ``fake`` (approval "auto" unless ``options`` say otherwise);
    its events go to ``events``."""
    provider = Provider(
        ProviderSettings(
            model=model,
            api=api,
            base_url=fake.base_url,
            store=store,
            stream=stream,
            max_retries=max_retries,
            timeout_s=timeout_s,
        )
    )
    log = events if events is not None else []
    return Turn(
        session or Session(),
        provider,
        TOOLS,
        ToolContext(root=tmp_path),
        "You are a test.",
        options or TurnOptions(approval="auto"),
        observers=[log.append],
        front=front,
    )
