"""``%shiro`` and ``%%shiro``: a thin skin that parses the line and calls :class:`~shiro_kernel.agent.Agent`.

Usage::

    %shiro [options] PROMPT        one agent turn (a prompt may end in "?")
    %%shiro [options]              the cell body is the prompt

Options (only at the start of the line): ``--wait`` block until the turn has ended; ``--new``, ``-c``,
``-r ID`` choose the session; ``--no-memory``; ``--mute NAME[,NAME]``; ``--model NAME``; ``--agent NAME``.
``%shiro /help`` lists the slash commands. Settings live on the ``Shiro`` configurable:
``%config Shiro.approval = "auto"``.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, cell_magic, line_magic, magics_class

from .config import Shiro, agent_variant

# Options that take a value, and flags.
_VALUED = {"--model": "model", "--agent": "agent", "-r": "resume", "--mute": "mute"}
_FLAGS = {"--wait": "wait", "--new": "new", "-c": "cont", "--no-memory": "no_memory"}


@dataclass
class Parsed:
    prompt: str = ""
    options: dict[str, Any] = field(default_factory=dict)


def parse_line(line: str) -> Parsed:
    """Split leading options from the prompt; the prompt keeps its own spacing and quotes."""
    parsed = Parsed()
    rest = line.strip()
    while rest.startswith("-"):
        token, _, tail = rest.partition(" ")
        if token in _FLAGS:
            parsed.options[_FLAGS[token]] = True
            rest = tail.lstrip()
        elif token in _VALUED or "=" in token and token.split("=", 1)[0] in _VALUED:
            name, eq, value = token.partition("=")
            if not eq:
                value, _, tail = tail.lstrip().partition(" ")
            if not value:
                raise UsageError(f"%shiro: {name} needs a value, e.g. {name} NAME")
            parsed.options[_VALUED[name]] = value
            rest = tail.lstrip()
        elif token == "--":
            rest = tail.lstrip()
            break
        else:
            known = ", ".join([*_FLAGS, *_VALUED])
            raise UsageError(f"%shiro: unknown option {token!r} (known: {known}); put `--` before a prompt "
                             "that starts with a dash")
    parsed.prompt = rest
    return parsed


def _magic_doc() -> str:
    from .commands import HELP

    return f"""Run one agent turn: %shiro [options] PROMPT, %%shiro [options] (cell body = prompt),
or a slash command: %shiro /todos

A prompt may end in "?" (%shiro why is it slow?); %shiro? alone shows this help.

options (only at the start of the line; `--` ends them):
  --wait          block until the turn has ended (waits for a running or queued turn first)
  --new           start a fresh session
  -c              continue the newest session of this notebook
  -r ID           resume a session by id or unique prefix
  --no-memory     no project notes or memories this turn
  --mute NAME     hide named memories for this session (comma list allowed)
  --model NAME    the model for this turn
  --agent NAME    the agent variant for this turn (default, deep)

With a widget frontend (JupyterLab) a turn runs in the background: the cell returns at once, the
view streams with Stop and approval buttons, and a %shiro typed meanwhile is queued. nbclient,
papermill, terminal IPython and --wait block. Settings: %config Shiro (e.g.
%config Shiro.approval = "auto", %config Shiro.frontend = "widgets").

{HELP}
"""


_MAGIC_DOC = _magic_doc()


@magics_class
class ShiroMagics(Magics):
    def __init__(self, shell: Any, config: Shiro) -> None:
        super().__init__(shell)
        self.settings = config
        self._agent: Any = None

    @property
    def agent(self) -> Any:
        if self._agent is None:
            from .agent import Agent

            self._agent = Agent(self.shell, self.settings)
        return self._agent

    @line_magic
    def shiro(self, line: str) -> None:
        self._run(parse_line(line))

    shiro.__doc__ = _MAGIC_DOC


    @cell_magic("shiro")
    def shiro_cell(self, line: str, cell: str) -> None:
        """%%shiro [options] — the cell body is the prompt."""
        parsed = parse_line(line)
        parsed.prompt = "\n".join(x for x in (parsed.prompt, cell.strip()) if x)
        self._run(parsed)

    def _run(self, parsed: Parsed) -> None:
        from IPython.display import display

        from . import commands
        from .agent import AgentError, TextView

        opts = parsed.options
        agent = self.agent
        try:
            agent_variant(self.settings, opts.get("agent"))
        except ValueError as exc:
            raise UsageError(f"%shiro: {exc}") from None
        if "mute" in opts:
            names = [n for n in opts["mute"].split(",") if n.strip()]
            agent.muted = sorted(set(agent.muted) | set(n.strip() for n in names))
            for warning in agent.memories().mute_warnings(names):
                print(warning, file=sys.stderr)
        live = self._live()
        if live is not None and live.busy:
            if opts.get("wait"):  # wait for the running turn and everything queued before this one
                live.wait_idle()
            elif parsed.prompt or opts.keys() & {"new", "cont", "resume"}:
                self._queue(parsed)
                return
            else:
                raise UsageError("%shiro: give a prompt, e.g. %shiro what columns does df have?")
        try:
            line = agent.start(new=bool(opts.get("new")), cont=bool(opts.get("cont")), resume=opts.get("resume"))
        except AgentError as exc:
            raise UsageError(f"%shiro: {exc}") from None
        if line:
            print(line)
        prompt = parsed.prompt
        if not prompt:
            if opts.keys() & {"new", "cont", "resume", "mute"}:
                return  # switching session or muting needs no prompt
            raise UsageError("%shiro: give a prompt, e.g. %shiro what columns does df have?")
        if prompt.startswith("/"):
            text = commands.run(agent, prompt)
            display({"text/plain": text, "text/markdown": f"```text\n{text}\n```"}, raw=True)
            return
        if live is not None and not opts.get("wait"):
            self._submit(parsed, prepare=None)
            return

        view = TextView(live=_has_frontend(self.shell), details=self._details)
        agent.ask(prompt, on_event=view, model=opts.get("model"), agent=opts.get("agent"),
                  memory=False if opts.get("no_memory") else None, headless=True)

    # -- the live (background) path ------------------------------------------------------------------
    def _details(self) -> dict[str, Any]:
        agent = self.agent
        return {"footer": agent.footer(), "session_id": agent.session.id, "tasks": agent.tasks.state(),
                "resume": f"%shiro -r {agent.session.id[:8]}", "context_percent": self._context_percent()}

    def _context_percent(self) -> int | None:
        from .prune import estimate_tokens, percent

        try:
            return percent(estimate_tokens(list(self.agent.session.messages)), self.settings.compact_threshold)
        except Exception:
            return None

    def _live(self) -> Any:
        """The agent's LiveController when turns run in the background here, else None."""
        from . import live

        if not live.widget_frontend(self.shell, self.settings.frontend):
            return None
        controller = getattr(self.agent, "live", None)
        if controller is None:
            controller = live.LiveController(self.agent, live.running_loop(self.shell),
                                             live.kernel_publisher(self.shell))
            self.agent.live = controller
        elif controller.loop is None:
            controller.loop = live.running_loop(self.shell)
        live.install_interrupt_handler(self.shell)
        return controller

    def _new_view(self) -> Any:
        from .widgets import TurnView

        controller = self.agent.live
        return TurnView(on_stop=controller.stop, call_later=controller.inbox.call_later,
                        meter=self._context_percent, tasks=lambda: self.agent.tasks.state())

    def _submit(self, parsed: Parsed, prepare: Any) -> int:
        from IPython.display import display

        from . import live
        from .agent import TextView

        controller = self.agent.live
        opts = parsed.options
        view = self._new_view()

        def bundle(item: Any) -> dict[str, Any]:
            text_view = TextView(live=False, details=self._details)
            text_view.log = item.view.turn_log
            return text_view.bundle(final=True)

        item = live.LiveTurn(parsed.prompt, {"model": opts.get("model"), "agent": opts.get("agent"),
                                             "memory": False if opts.get("no_memory") else None},
                             view=view, parent=live.cell_parent(self.shell), prepare=prepare, bundle=bundle)
        live_bundle = view._repr_mimebundle_()
        item.widget_data = {k: v for k, v in live_bundle.items() if k != "text/plain"}
        handle = display(live_bundle, raw=True, display_id=True)
        item.display_id = getattr(handle, "display_id", None)
        position = controller.submit(item)
        if position:
            print(f"queued (position {position})")
        return position

    def _queue(self, parsed: Parsed) -> None:
        def prepare(item: Any) -> str | None:
            from . import commands
            from .agent import AgentError

            opts = parsed.options
            try:
                line = self.agent.start(new=bool(opts.get("new")), cont=bool(opts.get("cont")),
                                        resume=opts.get("resume"))
            except AgentError as exc:
                return f"%shiro: {exc}"
            if not parsed.prompt:
                return line or "ok"
            if parsed.prompt.startswith("/"):
                return "\n".join(x for x in (line, commands.run(self.agent, parsed.prompt)) if x)
            return None

        self._submit(parsed, prepare)


def _has_frontend(shell: Any) -> bool:
    """True in a kernel (a frontend may draw updates); False in terminal IPython."""
    return type(shell).__name__ == "ZMQInteractiveShell"


# -- claiming "%shiro why is it slow?" from IPython's help syntax --------------------------------------
_QUESTION = re.compile(r"^(\s*)%shiro\s+(.*\S)\s*$")


def claim_question_lines(lines: list[str]) -> list[str]:
    """IPython reads a line ending in ``?`` as a help request; rewrite ``%shiro ... ?`` lines into a
    direct magic call so the prompt reaches the agent. ``%shiro?`` alone still shows the help."""
    out = []
    for line in lines:
        match = _QUESTION.match(line.rstrip("\n"))
        if match and line.rstrip().endswith("?") and not line.lstrip().startswith("%%"):
            indent, arg = match.groups()
            newline = "\n" if line.endswith("\n") else ""
            out.append(f"{indent}get_ipython().run_line_magic('shiro', {arg!r}){newline}")
        else:
            out.append(line)
    return out


def load(shell: Any) -> None:
    config = next((c for c in shell.configurables if isinstance(c, Shiro)), None)
    if config is None:
        config = Shiro(parent=shell)
        shell.configurables.append(config)
    shell.register_magics(ShiroMagics(shell, config))
    if claim_question_lines not in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.append(claim_question_lines)
    from . import _warmup, live

    live.watch_comm_opens(shell)
    _warmup.start()


def unload(shell: Any) -> None:
    if claim_question_lines in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(claim_question_lines)
