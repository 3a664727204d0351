"""Settings: one traitlets ``Configurable`` named ``Shiro``, and the environment read in one place.

Every setting works as ``%config Shiro.NAME = ...`` in a notebook or ``c.Shiro.NAME = ...`` in
``ipython_config.py``. Defaults that the environment can set (``SHIRO_MODEL``, ``SHIRO_API``,
``OPENAI_BASE_URL``, ``SHIRO_REPLAY``) are read when the value is first needed, so an explicit ``%config``
always wins.
The API key is never a setting: it is read from ``OPENAI_API_KEY`` when a client is built and
kept nowhere else, so it cannot land in a file, a notebook or widget state.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any, NamedTuple

from traitlets import Bool, Dict, Enum, Float, Int, List, TraitError, Unicode, Union, default, observe, validate
from traitlets.config import Configurable

DEFAULT_MODEL = "gpt-5-mini"


class Environment(NamedTuple):
    """The environment variables shiro reads, in one place. (A named tuple: ``%load_ext`` imports this
    module, and a dataclass costs ~1 ms to create.)"""

    api_key: str | None
    base_url: str | None
    model: str | None
    api: str | None
    home: Path
    replay: str | None
    request: str | None


def environment() -> Environment:
    env = os.environ
    api = (env.get("SHIRO_API") or "").strip().lower() or None
    replay = (env.get("SHIRO_REPLAY") or "").strip().lower() or None
    request = (env.get("SHIRO_REQUEST") or "").strip().lower() or None
    return Environment(
        api_key=env.get("OPENAI_API_KEY") or None,
        base_url=env.get("OPENAI_BASE_URL") or None,
        model=(env.get("SHIRO_MODEL") or "").strip() or None,
        api=api if api in ("responses", "chat") else None,
        home=Path(env.get("SHIRO_HOME") or Path.home() / ".shiro-neko").expanduser(),
        replay=replay if replay in ("auto", "notebook", "off") else None,
        request=request if request in ("auto", "full", "lean") else None,
    )


#: the settings an administrator's policy limits (:mod:`~shiro_kernel.policy`)
LIMITED = ("base_url", "model", "approval", "budget_usd")


class _Checked:
    """A trait the administrator's policy limits (:meth:`Shiro._within_policy`). traitlets skips validators for
    an allowed ``None`` (and sees no change from a default never read), while "no budget" or "the default server"
    may be beyond the policy; and it rolls a refused ``%config`` back to the static default ('' for a model), not
    to the value the setting had."""

    def set(self, obj: Any, value: Any) -> None:
        if self.name not in obj._trait_values:  # type: ignore[attr-defined]
            # the default first: a change from it is seen (and checked under %config), and a refused value is
            # rolled back to it, never to the static None
            getattr(obj, self.name)  # type: ignore[attr-defined]
        super().set(obj, value)  # type: ignore[misc]

    def _validate(self, obj: Any, value: Any) -> Any:
        if value is None and obj._cross_validation_lock is False:
            return self._cross_validate(obj, value)  # type: ignore[attr-defined]
        return super()._validate(obj, value)  # type: ignore[misc]


class _CheckedFloat(_Checked, Float):  # type: ignore[type-arg]
    pass


class _CheckedUnicode(_Checked, Unicode):  # type: ignore[type-arg]
    pass


class Shiro(Configurable):
    """Settings of the %shiro agent."""

    model = _CheckedUnicode(help="Model name sent to the server (default: $SHIRO_MODEL, else gpt-5-mini).").tag(
        config=True
    )
    api = Enum(
        ["responses", "chat"],
        help="Which API to call: 'responses' (/v1/responses) or 'chat' "
        "(/v1/chat/completions). Default: $SHIRO_API, else responses.",
    ).tag(config=True)
    base_url = _CheckedUnicode(
        None,
        allow_none=True,
        help="OpenAI-compatible server URL, e.g. http://localhost:11434/v1 for Ollama (default: $OPENAI_BASE_URL).",
    ).tag(config=True)
    store = Bool(
        True,
        help="Responses API `store`: keep items on the provider's side and refer to them by id. "
        "Off: nothing is stored and reasoning is replayed encrypted.",
    ).tag(config=True)
    stream = Bool(True, help="Stream responses as they are generated.").tag(config=True)
    approval = Enum(
        ["ask", "auto", "read-only"],
        help="Tools that change something (python, write_file, "
        "edit_file, shell): 'ask' first, run them 'auto'matically, or refuse them ('read-only'). Default: 'ask', "
        "or less where the administrator's policy allows less.",
    ).tag(config=True)
    compact_threshold = Int(120_000, help="Estimated tokens at which the wire copy of the history is pruned.").tag(
        config=True
    )
    max_steps = Int(50, help="Most model calls in one turn.").tag(config=True)
    memory = Bool(True, help="Load and write project memory (False is --no-memory).").tag(config=True)
    budget_usd = _CheckedFloat(
        None,
        allow_none=True,
        help="Spend limit in USD for this notebook's session (default: none, or the administrator's policy's).",
    ).tag(config=True)
    mute = List(
        Unicode(),
        help="Named memories muted for this kernel's session (like --mute NAME): their index "
        "line is hidden and reading them by name is refused; files are untouched.",
    ).tag(config=True)
    agent = Unicode("default", help="Agent variant: 'default', 'deep', or one defined in Shiro.agents.").tag(
        config=True
    )
    agents = Dict(
        help="Your own agent variants: name -> {'prompt': extra system prompt, 'max_steps': int, "
        "'reasoning_effort': 'low'|'medium'|'high'}; they add to (or replace) 'default' and 'deep'."
    ).tag(config=True)
    timeout_s = Float(120.0, help="Seconds to wait for the model server before a request counts as timed out.").tag(
        config=True
    )
    approval_timeout_s = Float(
        600.0,
        help="Seconds an approval question (buttons, or a change shown in the notebook) waits for an answer; "
        "unanswered, it counts as a refusal the model is told about, and queued prompts move on.",
    ).tag(config=True)
    frontend = Enum(
        ["auto", "widgets", "text"],
        "auto",
        help="How %shiro shows a turn: 'widgets' runs it in "
        "the background with live widgets (Stop, approval buttons, prompt queue); 'text' always blocks "
        "and prints Markdown; 'auto' uses widgets only when a widget frontend (JupyterLab) is "
        "connected to the kernel.",
    ).tag(config=True)
    max_retries = Int(3, help="Retries (with backoff) after a 429, a 5xx or a timeout.").tag(config=True)
    undo_max_mb = Float(
        1024.0,
        help="Memory the undo checkpoints may hold, in MB (in the kernel only: never on disk). A value bigger than "
        "this is not kept (its step says so); older turns' checkpoints are dropped first to make room. pandas "
        "objects cost about nothing (copy-on-write); numpy arrays and containers cost their size. 0 turns undo off.",
    ).tag(config=True)
    max_output_tokens = Int(
        None,
        allow_none=True,
        help="Most tokens one model answer may have (Responses `max_output_tokens`, Chat Completions `max_tokens`, "
        "or `max_completion_tokens` where the model asks for it). Default (None): the server's own limit — a small "
        "local model may then write until its context is full.",
    ).tag(config=True)
    redact = List(
        Unicode(),
        help="Regular expressions whose matches are replaced by [redacted:pattern] in every tool result, before it "
        "is sent, recorded, shown or saved. Added to the built-in rule: the API key and the values (8+ characters) "
        "of environment variables named like *KEY*, *TOKEN*, *SECRET*, *PASSWORD*, *CREDENTIAL* are always "
        "replaced by [redacted:NAME].",
    ).tag(config=True)
    private = List(
        Unicode(),
        help="What never reaches the model as it is: 'email' (a column of that name in any frame, and a variable of "
        "that name whole), 'patients.ssn' (that variable's column). Its values leave only as stable stand-ins "
        "([private:email:3f9a2c81]); counts, aggregates, column names and the other columns pass, and the stand-ins "
        "the model writes mean the real values in the kernel and the views. Added to the project's .shiro/private and "
        "the administrator's policy; %shiro /private lists and changes it for the session.",
    ).tag(config=True)
    private_figures = Bool(
        False,
        help="Send the model the figures drawn from private data (Shiro.private): a call whose code names a private "
        "column or variable. Default False: the user sees them, the model reads that they were not sent.",
    ).tag(config=True)
    turn_timeout_s = Float(
        None,
        allow_none=True,
        help="Wall-clock limit of one blocking turn, in seconds. Default (None): 900 s in a headless run "
        "(nbclient, papermill, terminal IPython), no limit in interactive use.",
    ).tag(config=True)
    vision = Union(
        [Enum(["auto"]), Bool()],
        default_value="auto",
        help="Send images (figures, image files) to the model: True, False, or 'auto' — send them, and when the "
        "provider answers that the model takes no images, re-send that step with text descriptions and keep "
        "doing so for the session.",
    ).tag(config=True)
    image_max_px = Int(
        1024, help="Images sent to the model are downscaled to this long side (pixels); the user sees the original."
    ).tag(config=True)
    replay = Enum(
        ["auto", "notebook", "off"],
        help="A %shiro cell rerun in a kernel where its recorded turn has not run (a fresh kernel, Restart & Run "
        "All, nbclient) replays that turn's successful python calls without the model: 'auto' from this "
        "machine's session record, or from the turn saved in the notebook when the notebook is trusted; "
        "'notebook' from the saved turn even when the notebook is not trusted (CI); 'off' always asks the "
        "model. Default: $SHIRO_REPLAY, else auto.",
    ).tag(config=True)
    check_numbers = Bool(
        True,
        help="When a turn ends, look each number of the answer up in what the turn's tools returned and displayed: "
        "a number found links to its call, one found nowhere is marked (⚠) and the model is told at the next turn. "
        "False: no check.",
    ).tag(config=True)
    request = Enum(
        ["auto", "full", "lean"],
        help="What a request offers the model: 'full' every tool with its whole schema; 'lean' the instructions in "
        "short, `python` and `more_tools` (which lists and loads the other tools when the model asks), so a local "
        "engine's first request is a few hundred tokens of prefill, not thousands; 'auto' lean for a server on this "
        "machine or your network serving a model shiro has no price for, else full. Default: $SHIRO_REQUEST, else auto.",
    ).tag(config=True)
    verify_answers = Union(
        [Enum(["auto"]), Bool()],
        default_value="auto",
        help="An answer whose numbers no output of the turn shows (or that answers a question about a file without "
        "looking at it) does not end the turn: the model is told once and computes them, or says they were not "
        "computed. True, False, or 'auto' — on when requests are lean (Shiro.request).",
    ).tag(config=True)
    text_calls = Union(
        [Enum(["auto"]), Bool()],
        default_value="auto",
        help="Run a tool call the model wrote as text instead of the API's tool_calls — only when its whole answer is "
        "the call (a <tool_call> block, a fenced JSON {name, arguments} object, a lone ```python block), never a call "
        "quoted among other text or in its reasoning: True, False, or 'auto' — for a server on this machine or your "
        "network (a local engine), never a hosted API. Such a call asks for approval like any other.",
    ).tag(config=True)
    mcp_servers = Dict(
        help="MCP servers whose tools the agent may use, like .mcp.json's mcpServers (the trait wins on a name "
        "clash): {NAME: {'command', 'args', 'env'} | {'url', 'headers'}}; ${VAR} is read from the environment."
    ).tag(config=True)

    @default("model")
    def _model_default(self) -> str:
        return environment().model or DEFAULT_MODEL

    @default("api")
    def _api_default(self) -> str:
        return environment().api or "responses"

    @observe("api")
    def _api_set(self, change: dict[str, str]) -> None:
        self._api_chosen = True

    @property
    def api_chosen(self) -> bool:
        """The user chose the API (``%config Shiro.api``, ``ipython_config.py``, ``SHIRO_API``): it is kept even on
        a server that lacks it (the error then says what to set), never switched by shiro."""
        # `%config Shiro.api = "responses"` chooses it even when it is the value it has (no change to observe)
        configured = "api" in self.config.get(type(self).__name__, {})
        return bool(getattr(self, "_api_chosen", False)) or configured or environment().api is not None

    @default("replay")
    def _replay_default(self) -> str:
        return environment().replay or "auto"

    @default("request")
    def _request_default(self) -> str:
        return environment().request or "auto"

    @default("base_url")
    def _base_url_default(self) -> str | None:
        return environment().base_url

    @default("approval")
    def _approval_default(self) -> str:
        from . import policy

        return policy.approval_default()

    @default("budget_usd")
    def _budget_default(self) -> float | None:
        from . import policy

        return policy.budget_default()

    @validate(*LIMITED)
    def _within_policy(self, proposal: Any) -> Any:
        """A value beyond the administrator's policy (:mod:`~shiro_kernel.policy`) is refused in one sentence."""
        from . import policy
        from .errors import PolicyError

        try:
            why = policy.refusal(proposal["trait"].name, proposal["value"])
        except PolicyError:  # a policy that cannot be applied: taken here, and no turn sends anything (policy.check)
            return proposal["value"]
        if why is not None:
            raise TraitError(why)
        return proposal["value"]

    @validate("redact")
    def _check_redact(self, proposal: dict[str, list[str]]) -> list[str]:
        import re

        for pattern in proposal["value"]:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise TraitError(f"Shiro.redact: {pattern!r} is not a regular expression ({exc})") from None
        return proposal["value"]

    @validate("private")
    def _check_private(self, proposal: dict[str, list[str]]) -> list[str]:
        from .private.names import check

        try:
            return [check(name) for name in proposal["value"]]
        except ValueError as exc:
            raise TraitError(f"Shiro.private: {exc}") from None

    @observe("redact")
    def _redact_changed(self, change: dict[str, list[str]]) -> None:
        from . import redact

        redact.set_patterns(change["new"])


def for_shell(shell: Any) -> Shiro:
    """The settings of ``shell``'s config (``ipython_config.py``, ``c.Shiro.…``). A value there beyond the
    administrator's policy does not fail ``%load_ext``: it is not taken, and the refusal's sentence is printed."""
    try:
        return Shiro(parent=shell)
    except TraitError:
        from . import policy

        section = shell.config.get("Shiro", {})
        refused = {name: why for name in LIMITED if name in section and (why := policy.refusal(name, section[name]))}
        if not refused:
            raise
        for name, why in refused.items():
            del section[name]
            print(f"shiro: {why} ipython_config.py's value is not taken.", file=sys.stderr)
        return Shiro(parent=shell)


#: the variants that ship; ``Shiro.agents`` adds to or replaces them
BUILTIN_AGENTS: dict[str, dict[str, object]] = {
    "default": {},
    "deep": {
        "prompt": (
            "You are running as the `deep` variant: for anything with more than one step, write a plan "
            "with todo_write first, check each intermediate result before building on it, and finish "
            "with what you verified and what you did not."
        ),
        "max_steps": 100,
        "reasoning_effort": "high",
    },
}


def agent_variant(config: Shiro, name: str | None) -> tuple[str, dict[str, object]]:
    """The named variant's settings; a :class:`~shiro_kernel.errors.RequestError` naming the known ones for
    an unknown name."""
    from .errors import RequestError  # errors.py imports nothing of the project: no cost, no circle

    variants = {**BUILTIN_AGENTS, **{k: dict(v) for k, v in (config.agents or {}).items()}}
    chosen = name or config.agent
    if chosen not in variants:
        raise RequestError(
            f"unknown agent variant {chosen!r}; known: {', '.join(sorted(variants))} "
            "(add your own with %config Shiro.agents = {...})"
        )
    return chosen, variants[chosen]
