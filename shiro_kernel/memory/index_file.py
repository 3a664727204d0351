"""The ``index.md`` of a memory scope folder, shared by named memories and bundles.

A scope folder (system: ``SHIRO_HOME/memories/``; project: ``SHIRO_HOME/memories/projects/<slug>/``)
holds one markdown file per memory and an ``index.md`` whose managed lines (``- **name** · scope · date ·
size[ · from bundle][ — description]``) are kept by ``memory_write`` and bundle installs; every other
byte of the file is preserved. It is read-modify-written under an exclusive lock on
``<dir>/.index.lock``. Memory names are checked here too: a name is a file name and an index line.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Callable
from datetime import date
from pathlib import Path

from ..errors import MemoryRefused
from ..store import files, paths
from ..store.private import make_dirs

SCOPES = ("project", "system")
INDEX = "index"
MAX_NAME = 100
#: the estimated tokens one scope's index may reach before a write that takes it over gets a note
#: (samagotchi's ``memory.index_warn_tokens``; 0 turns the note off)
INDEX_WARN_TOKENS = 2500
#: characters per estimated token (samagotchi's ``context.chars_per_token`` default)
CHARS_PER_TOKEN = 4.0
INDEX_HEADER = (
    "# Memory Index\n\n"
    "Managed entries below are auto-maintained by memory_write "
    "(name, scope, last-written date, size). Free-form sections are preserved."
)
#: a managed line (``- **name** · …``), a legacy ``- **name**: desc`` line, or a bare ``- **name**``
INDEX_LINE = re.compile(r"\A- \*\*(.+?)\*\*[ \t]*(?:[·•].*|:.*)?\Z")


def system_dir() -> Path:
    return paths.home() / "memories"


def project_dir(root: Path) -> Path:
    return system_dir() / "projects" / paths.project_slug(root)


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a memory name (one sentence), else None. A name becomes a file name in
    its scope folder and a line of ``index.md``, which every later turn's system prompt carries: so no
    path separators or ``..`` (the seed's rule and wording), no control characters or line breaks (they
    would forge index lines), no leading dot (hidden files, ``.``) and at most 100 characters."""
    if "/" in name or "\\" in name or ".." in name or "\x00" in name:
        return f"invalid memory name '{name}': use a plain name (no /, \\ or ..)"
    if any(unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp") for ch in name):
        return f"invalid memory name {name!r}: use a plain name (no line breaks or control characters)"
    if name.startswith("."):
        return f"invalid memory name '{name}': use a plain name (it may not start with a dot)"
    if len(name) > MAX_NAME:
        return f"invalid memory name '{name[:40]}...': use a plain name (at most {MAX_NAME} characters)"
    return None


def check_name(name: str) -> str:
    """``name`` if it is a valid memory name; :class:`~shiro_kernel.errors.MemoryRefused` otherwise."""
    problem = name_problem(name)
    if problem:
        raise MemoryRefused(problem)
    return name


def managed_line(name: str, scope: str, size: int, description: str | None, owner: str | None = None) -> str:
    line = f"- **{name}** · {scope} · {date.today().isoformat()} · {size}"
    if owner:
        line += f" · from {owner}"
    desc = (description or "").strip()
    return f"{line} — {desc}" if desc else line


def _managed_pattern(name: str) -> re.Pattern[str]:
    return re.compile(r"^- \*\*" + re.escape(name) + r"\*\*[ \t]*(?:[·•][^\r\n]*|:[^\r\n]*)?(\r?\n|\Z)", re.MULTILINE)


def _existing_description(line: str, name: str) -> str | None:
    m = re.search(r"\s—\s(.*?)\s*\Z", line)
    if m:
        return m.group(1)
    m = re.match(r"\A- \*\*" + re.escape(name) + r"\*\*[ \t]*:\s*(.*?)\s*\Z", line)
    return m.group(1) if m else None


def managed_line_of(content: str | None, name: str) -> str | None:
    """The managed (or legacy) index line of ``name`` in ``content``, without its newline; None."""
    m = _managed_pattern(name).search(content or "")
    return m.group(0).rstrip("\r\n") if m else None


def owner_of_line(line: str) -> str | None:
    """The bundle a managed line says the memory came from (`` · from <bundle>``), else None."""
    return _existing_owner(line)


def _existing_owner(line: str) -> str | None:
    head = line.split(" — ", 1)[0]
    m = re.search(r" · from (\S+)", head)
    return m.group(1) if m else None


def upsert_index_text(
    content: str | None, name: str, scope: str, size: int, description: str | None, owner: str | None = None
) -> str:
    """``content`` with the managed line of ``name`` replaced in place (or appended). A blank
    ``description`` keeps the old one; the bundle owner (``· from X``) is kept unless given."""
    if content is None or not content.strip():
        return INDEX_HEADER + "\n\n" + managed_line(name, scope, size, description, owner) + "\n"
    pattern = _managed_pattern(name)
    m = pattern.search(content)
    if m:
        old = m.group(0).rstrip("\r\n")
        desc = description if (description or "").strip() else _existing_description(old, name)
        line = managed_line(name, scope, size, desc, owner or _existing_owner(old))
        return content[: m.start()] + line + m.group(1) + content[m.end() :]
    line = managed_line(name, scope, size, description, owner)
    return f"{content}{line}\n" if content.endswith("\n") else f"{content}\n{line}\n"


def remove_index_text(content: str, name: str) -> str:
    """``content`` without the managed line of ``name``; 3+ newlines collapse into 2."""
    new = _managed_pattern(name).sub("", content)
    return re.sub(r"\n{3,}", "\n\n", new)


def update_index(dir_: Path, change: Callable[[str | None], str | None]) -> None:
    """Read-modify-write ``<dir>/index.md`` under the exclusive lock on ``<dir>/.index.lock``."""
    make_dirs(dir_)
    index = dir_ / f"{INDEX}.md"
    with files.locked(dir_ / ".index"):
        content = index.read_bytes().decode("utf-8", errors="replace") if index.exists() else None
        new = change(content)
        if new is not None and new != content:
            files.write_atomic(index, new)


# -- the index's size -----------------------------------------------------------------------------
def index_tokens(text: str) -> int:
    """The estimated tokens of an index text as a prompt carries it: characters / 4, rounded up."""
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def crossing_note(scope: str, before: int, after: int, limit: int = INDEX_WARN_TOKENS) -> str | None:
    """The seed's note for a write that took ``scope``'s index from at or under ``limit`` tokens to over
    it; None otherwise (once per crossing: a write while the index is already over gets none, so the
    tightening it asks for starts no loop). A limit that is not positive is off."""
    if limit <= 0 or after <= limit or before > limit:
        return None
    return (
        f"Note: the {scope} memory index is now ~{after} tokens (over memory.index_warn_tokens {limit}) and is "
        "sent with every prompt. When you next have a moment, tighten long index descriptions (memory_write "
        "with name, scope and description only). Don't remove or merge memories unless the user asks."
    )
