"""A ``%shiro`` line: its one grammar, and the line parsed once — its options, its prompt, what it asks for.

The grammar is :data:`OPTIONS`: the magic's help (``%shiro?``) is built from it, :func:`parse` reads a line
with it, and a rerun of the notebook reads a saved cell's lines with it (:func:`prompt_of`), so the three
never disagree. Options are read only at the start of the line; the rest is the prompt, kept exactly as typed
(apostrophes, quotes, a trailing ``?``), which a shell-style split of the whole line would break. ``--`` ends
the options. IPython reads a line ending in ``?`` as a help request, so :func:`claim_questions` rewrites a
``%shiro … ?`` line into a direct magic call before IPython reads it (``%shiro?`` alone stays the help).

The magic (a blocking turn) and the live controller (a background turn, a queued prompt) both act on the
parsed :class:`Line`, and :attr:`Line.action` is the one place that decides what a line does:

* ``command`` — the prompt is a slash command (``/todos``);
* ``turn`` — a prompt for the model;
* ``switch`` — no prompt, but a session switch (``--new``, ``-c``, ``-r ID``);
* ``flags`` — no prompt, only flags that hold for the session (``--no-memory``, ``--memory``, ``--mute``);
* ``empty`` — nothing to do: a usage error.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any, Literal

from .errors import RequestError

Action = Literal["command", "turn", "switch", "flags", "empty"]
GIVE_A_PROMPT = "give a prompt, e.g. %shiro what columns does df have?"


@dataclass(frozen=True)
class Option:
    """One option of ``%shiro``: its name, the :class:`Line` field it sets, and either a value it takes
    (``takes``: its metavar) or the value it sets (``sets``, for a switch)."""

    name: str
    field: str
    help: str
    takes: str = ""
    sets: Any = True


#: the options of ``%shiro`` and ``%%shiro``, in the order ``%shiro?`` lists them
OPTIONS: tuple[Option, ...] = (
    Option("--wait", "wait", "block until the turn has ended (waits for a running or queued turn first)"),
    Option("--new", "new", "start a fresh session"),
    Option("-c", "cont", "continue the newest session of this notebook"),
    Option("-r", "resume", "resume a session by id or unique prefix", takes="ID"),
    Option(
        "--no-memory",
        "memory",
        "no project notes or named memories for this session (--memory turns them back on)",
        sets=False,
    ),
    Option("--memory", "memory", "turn memory back on after --no-memory"),
    Option("--mute", "mute", "hide named memories for this session", takes="NAME[,NAME]"),
    Option("--model", "model", "the model for this turn", takes="NAME"),
    Option("--agent", "agent", "the agent variant for this turn (default, deep, or your own)", takes="NAME"),
    Option("--again", "again", "ask the model, even where this cell's recorded turn would be replayed without it"),
)
_BY_NAME = {o.name: o for o in OPTIONS}


@dataclass(frozen=True)
class Line:
    prompt: str = ""
    #: block until the turn has ended (waits for a running or queued turn first)
    wait: bool = False
    new: bool = False
    cont: bool = False
    resume: str | None = None
    #: ``--memory`` True, ``--no-memory`` False, neither None
    memory: bool | None = None
    mute: tuple[str, ...] = ()
    model: str | None = None
    agent: str | None = None
    #: ``--again``: ask the model even where the cell's recorded turn could be replayed
    again: bool = False
    #: the cell the line was typed in (its id, where the front end sends one) and the line's place among this
    #: kernel's turns with the same prompt: what a rerun of the notebook finds the recorded turn by
    cell_id: str | None = None
    ordinal: int = 0

    @property
    def switches(self) -> bool:
        """Does the line choose the session (``--new``, ``-c``, ``-r``)?"""
        return self.new or self.cont or self.resume is not None

    @property
    def flags(self) -> bool:
        """Does the line set something for the session (memory, mutes)?"""
        return self.memory is not None or bool(self.mute)

    @property
    def action(self) -> Action:
        if self.prompt.startswith("/"):
            return "command"
        if self.prompt:
            return "turn"
        if self.switches:
            return "switch"
        if self.flags:
            return "flags"
        return "empty"

    def with_prompt(self, prompt: str) -> Line:
        return replace(self, prompt=prompt)


def parse(text: str) -> Line:
    """A ``%shiro`` line's argument as a :class:`Line`. Raises :class:`~shiro_kernel.errors.RequestError` (one
    sentence) for an option the grammar does not know, or one that needs a value and has none."""
    values: dict[str, Any] = {}
    rest = text.strip()
    while rest.startswith("-"):
        token, _, tail = rest.partition(" ")
        name, eq, attached = token.partition("=")
        if token == "--":
            rest = tail.lstrip()
            break
        option = _BY_NAME.get(name)
        if option is None or (eq and not option.takes):
            known = ", ".join(_BY_NAME)
            raise RequestError(
                f"unknown option {token!r} (known: {known}); put `--` before a prompt that starts with a dash"
            )
        rest = tail.lstrip()
        if not option.takes:
            values[option.field] = option.sets
            continue
        value = attached
        if not eq:
            value, _, rest = rest.partition(" ")
            rest = rest.lstrip()
        if not value:
            raise RequestError(f"{name} needs a value, e.g. {name} {option.takes}")
        values[option.field] = value
    mute = tuple(n.strip() for n in values.pop("mute", "").split(",") if n.strip())
    return Line(rest, mute=mute, **values)


def prompt_of(text: str) -> str | None:
    """The prompt of a ``%shiro`` line's argument (``--wait which region?`` → ``which region?``); '' for a line
    that gives none; None for a line the magic would refuse."""
    try:
        return parse(text).prompt
    except RequestError:
        return None


# -- "%shiro why is it slow?": a prompt, not IPython's help request ------------------------------------
_QUESTION = re.compile(r"^(\s*)%shiro\s+(.*\S)\s*$")


def question(source_line: str) -> tuple[str, str] | None:
    """``(indent, argument)`` of a ``%shiro … ?`` line of a cell's source, which IPython would read as a help
    request (it ends in ``?``), else None. ``%shiro?`` alone is the help, and a ``%%shiro`` line is IPython's."""
    match = _QUESTION.match(source_line.rstrip("\n"))
    if match is None or not source_line.rstrip().endswith("?") or source_line.lstrip().startswith("%%"):
        return None
    indent, argument = match.groups()
    return indent, argument


def claim_questions(lines: list[str]) -> list[str]:
    """A cell's source lines with each ``%shiro … ?`` line rewritten into a direct magic call, so the prompt
    reaches the agent instead of IPython's help (an input transformer's work, before IPython reads the ``?``)."""
    out = []
    for line in lines:
        found = question(line)
        if found:
            indent, argument = found
            newline = "\n" if line.endswith("\n") else ""
            out.append(f"{indent}get_ipython().run_line_magic('shiro', {argument!r}){newline}")
        else:
            out.append(line)
    return out


__all__ = [
    "GIVE_A_PROMPT",
    "OPTIONS",
    "Action",
    "Line",
    "Option",
    "claim_questions",
    "parse",
    "prompt_of",
    "question",
]
