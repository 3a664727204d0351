"""The ``%shiro`` lines of a notebook: which lines of a cell are shiro's, and each turn's prompt and ordinal.

A *turn site* is a ``%shiro PROMPT`` line or a ``%%shiro`` cell with a prompt (not a slash command, not a
line that only switches sessions or memory). Its prompt is what the magic receives, read the way the magic
reads it (the one grammar of :mod:`shiro_kernel.line`: options at the start, the rest kept as typed; a
``%%shiro`` cell's prompt is its line's prompt and its body). Its **ordinal** is its rank among the
notebook's turn sites *with the same prompt*, from 0: inserting or deleting a ``%shiro`` cell with another
prompt does not change it, and a kernel running the cells in order (nbclient, papermill, which send no cell
id) knows it by counting the turns it has started with that prompt (:class:`Ordinals`).

Other shiro lines: ``%load_ext``/``%reload_ext``/``%unload_ext shiro_kernel``, ``%config Shiro…``,
``%env SHIRO_…``, and ``%shiro`` lines that run no turn (slash commands, ``--new`` alone).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..line import prompt_of

TURN, COMMAND, SETUP = "turn", "command", "setup"

_LINE_MAGIC = re.compile(r"^\s*%shiro(?:\s+(.*?))?\s*$")
_CELL_MAGIC = re.compile(r"^\s*%%shiro(?:\s+(.*?))?\s*$")
_SETUP = re.compile(r"^\s*(?:%(?:load_ext|reload_ext|unload_ext)\s+shiro_kernel\s*$|%config\s+Shiro\b|%env\s+SHIRO_)")


@dataclass(frozen=True)
class CellLine:
    """One shiro line of a cell: ``kind`` is ``turn``, ``command`` or ``setup``; a turn has its prompt. A
    ``%%shiro`` cell is one line covering the whole cell (``whole``)."""

    number: int  # the line's index in the cell's source
    kind: str
    prompt: str = ""
    whole: bool = False


def source_text(source: Any) -> str:
    """A cell's source as one string (a saved notebook may hold it as a list of lines)."""
    if isinstance(source, list):
        return "".join(s for s in source if isinstance(s, str))
    return source if isinstance(source, str) else ""


def shiro_lines(source: str) -> list[CellLine]:
    """The shiro lines of one code cell's source, in order."""
    lines = source.splitlines()
    first = next((n for n, line in enumerate(lines) if line.strip()), None)
    if first is None:
        return []
    head = _CELL_MAGIC.match(lines[first])  # IPython drops leading blank lines before a cell magic
    if head is not None:
        prompt = prompt_of(head.group(1) or "")
        if prompt is None:
            return [CellLine(first, COMMAND, whole=True)]
        body = "\n".join(lines[first + 1 :]).strip()
        prompt = "\n".join(p for p in (prompt, body) if p)
        kind = TURN if prompt and not prompt.startswith("/") else COMMAND
        return [CellLine(first, kind, prompt if kind == TURN else "", whole=True)]
    out = []
    for number, line in enumerate(lines):
        if _SETUP.match(line):
            out.append(CellLine(number, SETUP))
            continue
        match = _LINE_MAGIC.match(line)
        if match is None:
            continue
        prompt = prompt_of(match.group(1) or "")
        if prompt and not prompt.startswith("/"):
            out.append(CellLine(number, TURN, prompt))
        else:
            out.append(CellLine(number, COMMAND))
    return out


@dataclass(frozen=True)
class Site:
    """A turn site of a notebook: its cell (index from 0, and id when the file has one), its line in the
    cell, its prompt and its ordinal among the sites with that prompt."""

    cell: int
    cell_id: str | None
    line: int
    prompt: str
    ordinal: int


def notebook_sites(nb: dict[str, Any]) -> list[Site]:
    """Every turn site of the notebook ``nb`` (a v4 notebook as JSON), in order."""
    seen: dict[str, int] = {}
    out = []
    for index, cell in enumerate(nb.get("cells") or []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        cid = cell.get("id")
        for line in shiro_lines(source_text(cell.get("source"))):
            if line.kind != TURN:
                continue
            rank = seen.get(line.prompt, 0)
            seen[line.prompt] = rank + 1
            out.append(Site(index, cid if isinstance(cid, str) and cid else None, line.number, line.prompt, rank))
    return out


def ordinal_in(nb: dict[str, Any], cell_id: str, prompt: str) -> int | None:
    """The ordinal of the turn site with ``prompt`` in the cell ``cell_id`` (the first such site), if any."""
    for site in notebook_sites(nb):
        if site.cell_id == cell_id and site.prompt == prompt:
            return site.ordinal
    return None


class Ordinals:
    """How many turns with each prompt this kernel has started: the ordinal of the next one, for a front end
    that sends no cell id (nbclient and papermill run the cells in order)."""

    def __init__(self) -> None:
        self._started: dict[str, int] = {}

    def next(self, prompt: str) -> int:
        count = self._started.get(prompt, 0)
        self._started[prompt] = count + 1
        return count

    def running(self, prompt: str, cell_id: str | None = None, nb: dict[str, Any] | None = None) -> int:
        """The ordinal of the turn starting now (count it once per ``%shiro`` turn, replayed or not): the
        cell's own, read from the notebook, when the front end sent its id and the file has that cell; else
        the count of turns with this prompt this kernel started before."""
        counted = self.next(prompt)
        if cell_id is not None and nb is not None:
            found = ordinal_in(nb, cell_id, prompt)
            if found is not None:
                return found
        return counted


__all__ = [
    "COMMAND",
    "SETUP",
    "TURN",
    "CellLine",
    "Ordinals",
    "Site",
    "notebook_sites",
    "ordinal_in",
    "shiro_lines",
    "source_text",
]
