"""The tools a request offers, sized to the server: all of them, or a lean few with the rest on demand.

A request's tool schemas are most of its first tokens (21 tools are ~3,200 of a ~4,000-token first request). On
OpenAI's API that is cached and cheap; on a local engine it is prefill the user waits for — llama.cpp's server
reads ~80 tokens a second on two laptop cores, so the first answer of a turn waited a minute. A **lean** request
offers only the tools that declare themselves lean (``Tool.lean``: ``python``), with short schemas (the first
sentence of each description, no parameter prose), and one more: ``more_tools``, which lists the others and loads
the ones the model asks for — the way tool search keeps a large tool set reachable without sending it.

A loaded tool stays offered for the rest of the session (:attr:`WireState.loaded
<shiro_kernel.context.wire_copy.WireState.loaded>`), after the tools offered before it, so each request's tool
list — and with it the prompt's prefix, which a chat template renders the tools into — changes only when the model
loads one. A call of a tool that is not offered still runs (through the same approval): offering is about what the
model is shown, never about what it may do.

When a request is lean (``Shiro.request``): ``"lean"`` always, ``"full"`` never, ``"auto"`` (the default) for a
server on this machine or the user's network serving a model shiro has no price for — a local engine's model, not
a hosted one behind a local gateway.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..tools.base import Effect, Tool, ToolContext, ToolError, schema

NAME = "more_tools"
DESCRIPTION = (
    "List the other tools you can load (reading and writing files, grep, shell, the notebook's cells, the task "
    "list, memory), or load some by name so you can call them. Call with no names to list them."
)
PARAMETERS = schema(
    {"names": {"type": "array", "items": {"type": "string"}, "description": "tools to load; none: list them"}},
    optional=("names",),
)
#: the first sentence of a description (a short schema's whole description)
_SENTENCE = re.compile(r"^(.+?[.!?])(?:\s|$)", re.S)


def lean_for(request: str, local: bool, priced: bool) -> bool:
    """Whether requests are lean (see the module): ``request`` is ``Shiro.request``; ``local``: the server is on
    this machine or the user's network; ``priced``: the model is one shiro knows a price for (a hosted one)."""
    if request == "lean":
        return True
    if request == "full":
        return False
    return local and not priced


def brief(spec: dict[str, Any]) -> dict[str, Any]:
    """``spec`` with a short schema: the description's first sentence, the parameters without their prose."""
    match = _SENTENCE.match(spec.get("description", "").strip())
    description = match.group(1) if match else spec.get("description", "")
    params = dict(spec.get("parameters") or {})
    props = params.get("properties")
    if isinstance(props, dict):
        params["properties"] = {k: _plain(v) for k, v in props.items()}
    return {**spec, "description": description, "parameters": params}


def _plain(prop: Any) -> Any:
    """A property schema without its ``description`` (nested items and properties too)."""
    if not isinstance(prop, dict):
        return prop
    out = {k: v for k, v in prop.items() if k != "description"}
    if isinstance(out.get("items"), dict):
        out["items"] = _plain(out["items"])
    if isinstance(out.get("properties"), dict):
        out["properties"] = {k: _plain(v) for k, v in out["properties"].items()}
    return out


@dataclass
class Offer:
    """What one session's requests offer. ``tools``: every tool a call may name (``more_tools`` included when
    lean); ``loaded``: the tools the model loaded, in the order it did (the session's, kept between turns)."""

    tools: Mapping[str, Tool]
    lean: bool = False
    loaded: list[str] = field(default_factory=list)

    def specs(self) -> list[dict[str, Any]]:
        """The tool schemas of the next request (see the module)."""
        if not self.lean:
            return [t.spec() for t in self.tools.values() if t.name != NAME]
        core = [t for t in self.tools.values() if t.lean and t.name != NAME]
        extra = [self.tools[n] for n in self.loaded if n in self.tools and not self.tools[n].lean]
        return [*(brief(t.spec()) for t in core), brief(more_tools(self).spec()), *(t.spec() for t in extra)]

    def offered(self) -> set[str]:
        return {s["name"] for s in self.specs()}

    def others(self) -> list[Tool]:
        """The tools not offered now, in their order."""
        offered = self.offered()
        return [t for t in self.tools.values() if t.name not in offered and t.name != NAME]

    def load(self, names: list[str], ctx: ToolContext | None = None) -> str:
        """``more_tools``' answer: the tools not offered, listed, or those of ``names`` loaded — with, from ``ctx``,
        the project root and the notebook's path, which the loaded tools work on and which a lean request's
        instructions leave out (:mod:`~shiro_kernel.context.prompt`)."""
        if not names:
            listed = "\n".join(f"- {t.name}: {_first(t.description)}" for t in self.others())
            return (
                ("Tools you can load (call more_tools with their names):\n" + listed)
                if listed
                else "All tools are loaded."
            )
        unknown = [n for n in names if n not in self.tools or n == NAME]
        if unknown:
            raise ToolError(f"no tool named {', '.join(unknown)}; call more_tools with no names to list them")
        new = [n for n in dict.fromkeys(names) if n not in self.offered()]
        self.loaded.extend(new)
        done = ", ".join(names)
        text = f"Loaded: {done}. You can call {'it' if len(names) == 1 else 'them'} now."
        if ctx is not None:
            notebook = f"; the notebook is {ctx.notebook_path}" if ctx.notebook_path else ""
            text += f" Paths are relative to the project root, {ctx.root}{notebook}."
        return text


def _first(description: str) -> str:
    match = _SENTENCE.match(description.strip())
    return match.group(1) if match else description


def more_tools(offer: Offer) -> Tool:
    """The tool that lists and loads the tools a lean request leaves out (it changes only what is offered)."""

    def run(args: dict[str, Any], ctx: ToolContext) -> str:
        names = args.get("names") or []
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise ToolError("names must be a list of tool names")
        return offer.load(list(names), ctx)

    return Tool(NAME, DESCRIPTION, PARAMETERS, run, effects=Effect.READS, kernel_thread=False, lean=True, values=False)


def with_loader(tools: Mapping[str, Tool], offer: Offer) -> dict[str, Tool]:
    """``tools`` and, for a lean offer, ``more_tools``: what a turn's calls may name."""
    return {**tools, NAME: more_tools(offer)} if offer.lean else dict(tools)


__all__ = ["NAME", "Offer", "brief", "lean_for", "more_tools", "with_loader"]
