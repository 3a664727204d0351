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

from .config import Shiro

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
        """Run one agent turn: %shiro [options] PROMPT, or a slash command: %shiro /help

        Options: --wait (block until the turn ends), --new (fresh session), -c (newest session of
        this notebook), -r ID (resume by id or prefix), --no-memory (no notes or memories this turn),
        --mute NAME[,NAME] (hide named memories for this session), --model NAME, --agent NAME."""
        self._run(parse_line(line))

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
        if "mute" in opts:
            names = [n for n in opts["mute"].split(",") if n.strip()]
            agent.muted = sorted(set(agent.muted) | set(n.strip() for n in names))
            for warning in agent.memories().mute_warnings(names):
                print(warning, file=sys.stderr)
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

        def details() -> dict[str, Any]:
            return {"footer": agent.footer(), "session_id": agent.session.id, "tasks": agent.tasks.state(),
                    "resume": f"%shiro -r {agent.session.id[:8]}"}

        view = TextView(live=_has_frontend(self.shell), details=details)
        agent.ask(prompt, on_event=view, model=opts.get("model"), agent=opts.get("agent"),
                  memory=False if opts.get("no_memory") else None, headless=True)


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
    from . import _warmup

    _warmup.start()


def unload(shell: Any) -> None:
    if claim_question_lines in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(claim_question_lines)
