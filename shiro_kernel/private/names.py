"""What is private, and who said so.

A name is ``column`` (a column of that name in any frame, a Series of that name, and a variable of that name,
whole), or ``variable.column`` (that column of that variable only). Four places name them, each adding to the
others: ``Shiro.private`` (``%config``, ``ipython_config.py``), the session's own changes
(``%shiro /private add|remove``), the project's file ``.shiro/private`` in the repository (one name a line,
``#`` comments: a team shares it through git), and the administrator's policy (``private:``, which nobody
lifts). A project file only ever adds names, so a repository cannot make anything less private.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

#: the project's file, under the project root
PROJECT_FILE = Path(".shiro") / "private"
#: the most of the project's file read (a file of names, not data)
MAX_FILE_BYTES = 64 * 1024
#: what a name may be: identifiers, one optional ``variable.column``; a column name may hold spaces and dashes
_NAME = re.compile(r"[^\s.#][^.#]{0,199}(?:\.[^.#]{1,200})?")

#: where a name comes from, in the order :class:`Private` lists them
SOURCES = ("policy", "project", "setting", "session")


@dataclass(frozen=True)
class Name:
    """One private name: ``variable`` (None: any variable) and ``column`` (None: the whole variable)."""

    text: str
    variable: str | None
    column: str | None

    @classmethod
    def parse(cls, text: str) -> Name:
        """``email`` (a column anywhere, or the variable ``email`` whole) or ``patients.ssn``; ValueError otherwise."""
        text = text.strip()
        if not text or not _NAME.fullmatch(text):
            raise ValueError(
                f"{text!r} is not a private name: give a column ('email') or a variable's column ('df.ssn')"
            )
        if "." in text:
            variable, column = text.split(".", 1)
            return cls(text, variable.strip(), column.strip())
        return cls(text, None, text)

    def column_of(self, variable: str, column: object) -> bool:
        """Whether ``variable``'s column ``column`` is private by this name."""
        return str(column) == self.column and (self.variable is None or self.variable == variable)

    def whole(self, variable: str) -> bool:
        """Whether the variable ``variable`` is private as a whole by this name."""
        return self.variable is None and self.column == variable


def check(text: str) -> str:
    """``text`` as a private name (stripped), or ValueError with the sentence to show."""
    return Name.parse(text).text


def read_project(root: Path | None) -> tuple[tuple[str, ...], list[str]]:
    """The names in the project's file (none when there is no file) and what to tell of lines it skipped."""
    if root is None:
        return (), []
    path = root / PROJECT_FILE
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        return (), []
    except OSError as exc:
        return (), [f"{path} could not be read ({exc.strerror or exc}): its private names do not apply"]
    problems = []
    if len(raw) > MAX_FILE_BYTES:
        problems.append(f"{path} is over {MAX_FILE_BYTES // 1024} KiB: only its first part is read")
        raw = raw[:MAX_FILE_BYTES]
    names = []
    for number, line in enumerate(raw.decode("utf-8", "replace").splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            names.append(check(line))
        except ValueError as exc:
            problems.append(f"{path}, line {number}: {exc}")
    return tuple(dict.fromkeys(names)), problems


@dataclass
class Private:
    """The session's private names from every source, and its own changes (never saved: they last the session)."""

    added: list[str] = field(default_factory=list)
    removed: set[str] = field(default_factory=set)

    def add(self, text: str) -> str:
        name = check(text)
        self.removed.discard(name)
        if name not in self.added:
            self.added.append(name)
        return name

    def remove(self, text: str, fixed: Iterable[str] = ()) -> str:
        """Stop treating ``text`` as private for this session; ValueError when the policy names it."""
        name = check(text)
        if name in set(fixed):
            raise ValueError(f"{name} is private by the administrator's policy: it cannot be removed")
        self.removed.add(name)
        if name in self.added:
            self.added.remove(name)
        return name

    def sources(self, setting: Iterable[str], project: Iterable[str], policy: Iterable[str]) -> dict[str, str]:
        """Each private name and where it comes from (the first source that names it), the session's removals
        taken out (never the policy's)."""
        out: dict[str, str] = {}
        for source, names in zip(SOURCES, (policy, project, setting, self.added)):
            for text in names:
                try:
                    name = check(text)
                except ValueError:
                    continue
                if name in out or (source != "policy" and name in self.removed):
                    continue
                out[name] = source
        return out


__all__ = ["PROJECT_FILE", "SOURCES", "Name", "Private", "check", "read_project"]
