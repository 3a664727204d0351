"""Cell change detection: a fingerprint of every cell of the notebook on disk, taken at the end of
each turn and kept with the session (record key ``cells``); at the start of the next turn the cells
added, edited, deleted or run outside the agent since then are summarised for the model.

The notebook file is read by :func:`~shiro_kernel.notebook.file.read_notebook_shared` (as ``notebook_read`` and
the rerun wing read it). A cell whose saved outputs hold an exception says so (``— it raised KeyError: 'x'``), so
"why did my cell fail?" needs no copy-paste. A fingerprint row is ``{"key", "sha1", "count", "head"}``: the cell id (else ``#<index>``), the sha1 of
the source, the execution count, and the first line of the source (so a deleted cell can be named).
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Any

from ..notebook.file import read_notebook_shared
from ..text import first_line

HEADER = "Since your last turn the user changed the notebook:"
LIMIT = 1500
HEAD_CHARS = 100
ERROR_CHARS = 200


def _first_line(source: str) -> str:
    return first_line(source, HEAD_CHARS, "…") or "(empty)"


def _is_agent_cell(source: str) -> bool:
    head = source.lstrip()
    return head.startswith("%shiro") or head.startswith("%%shiro")


#: the last fingerprint of each notebook, by the file's (mtime, size, inode): a notebook with figures is
#: megabytes of JSON (12 MB parses in ~28 ms), and a turn looks at it at its start and its end
_LAST: dict[str, tuple[tuple[int, int, int], list[dict[str, Any]]]] = {}


def fingerprint(path: str | Path | None) -> list[dict[str, Any]] | None:
    """The fingerprint of every cell of the notebook at ``path``; None when it cannot be read. Read
    again only when the file changed since the last look (each call returns its own copy)."""
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    hit = _LAST.get(str(path))
    if hit is not None and hit[0] == stamp:
        return [dict(row) for row in hit[1]]
    rows = _read(Path(path))
    if rows is None:
        _LAST.pop(str(path), None)
        return None
    if len(_LAST) > 16:  # a kernel sees one notebook; keep a few
        _LAST.clear()
    _LAST[str(path)] = (stamp, rows)
    return [dict(row) for row in rows]


def _read(path: Path) -> list[dict[str, Any]] | None:
    try:
        nb = read_notebook_shared(path)
    except (OSError, ValueError):
        return None
    rows: list[dict[str, Any]] = []
    for index, cell in enumerate(nb.get("cells", [])):
        if not isinstance(cell, dict):
            return None
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(s for s in source if isinstance(s, str))
        if not isinstance(source, str):
            source = ""
        cid = cell.get("id")
        row = {
            "key": str(cid) if cid else f"#{index}",
            "sha1": hashlib.sha1(source.encode("utf-8")).hexdigest(),
            "count": cell.get("execution_count"),
            "head": _first_line(source),
            "agent": _is_agent_cell(source),
        }
        error = _error_line(cell)
        if error:
            row["error"] = error
        rows.append(row)
    return rows


_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")


def _error_line(cell: dict[str, Any]) -> str:
    """``ValueError: could not convert …`` when the cell's saved outputs hold an exception, else ''."""
    for output in cell.get("outputs") or []:
        if isinstance(output, dict) and output.get("output_type") == "error":
            name = _ANSI.sub("", str(output.get("ename") or "Error"))
            value = first_line(_ANSI.sub("", str(output.get("evalue") or "")), ERROR_CHARS)
            return f"{name}: {value}" if value else name
    return ""


def changes(old: list[dict[str, Any]] | None, new: list[dict[str, Any]] | None, values: bool = True) -> list[str]:
    """One line per changed cell (``edited cell 3: x = 2``), in notebook order, deleted cells last.
    Cells are numbered from 1 as they stand now (deleted ones: as they stood). ``values`` False (the policy's
    ``values: schema-only``): an exception by its name alone (its message can hold a value of the data)."""
    if old is None or new is None:
        return []
    before = {r["key"]: r for r in old}
    now_keys = {r["key"] for r in new}
    lines: list[str] = []
    for number, row in enumerate(new, 1):
        prev = before.get(row["key"])
        ran = prev is not None and prev.get("count") != row.get("count") and row.get("count") is not None
        raised = (
            f" — it raised {row['error'] if values else row['error'].split(':')[0]}"
            if row.get("error") and (prev is None or ran or prev.get("error") != row["error"])
            else ""
        )
        if prev is None:
            lines.append(f"- added cell {number}: {row.get('head', '')}{raised}")
        elif prev.get("sha1") != row["sha1"]:
            lines.append(f"- edited cell {number}: {row.get('head', '')}{raised}")
        elif ran and not row.get("agent"):
            lines.append(f"- ran cell {number} (execution count {row.get('count')}): {row.get('head', '')}{raised}")
    for number, row in enumerate(old, 1):
        if row["key"] not in now_keys:
            lines.append(f"- deleted cell {number} (as it was numbered then): {row.get('head', '')}")
    return lines


def block(
    old: list[dict[str, Any]] | None, new: list[dict[str, Any]] | None, limit: int = LIMIT, values: bool = True
) -> str:
    """The system-prompt block (at most ``limit`` characters); '' when nothing changed (``values``: :func:`changes`)."""
    lines = changes(old, new, values)
    if not lines:
        return ""
    out = [HEADER]
    size = len(HEADER)
    for index, line in enumerate(lines):
        rest = len(lines) - index
        tail = f"\n- … and {rest} more"
        if size + 1 + len(line) + (len(tail) if rest > 1 else 0) > limit:
            out.append(tail.strip("\n"))
            break
        out.append(line)
        size += 1 + len(line)
    return "\n".join(out)
