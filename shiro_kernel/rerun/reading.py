"""How a reader compares a cell's outputs (``shiro check``, :mod:`shiro_kernel.rerun.check`): text results, errors,
and a turn's replayed calls' outputs and answer; images by their size in pixels, not their bytes;
``text/html`` (a DataFrame) by its text. Never execution counts, timings, memory addresses, ids, token counts
or footers (:func:`normal_text` takes them out). And how ``shiro check`` and ``shiro export`` read the saved
notebook (:func:`read_saved`): one line for any file they cannot read, never a traceback.
"""

from __future__ import annotations

import base64
import html
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import RequestError
from ..notebook.mimes import TURN_MIME
from ..text import one_line
from .replay_plan import has_replay, plan_from_bundle

#: characters of an output shown in a difference's line
SNIPPET = 60

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]{4,}\b")
_TIMING = re.compile(r"\b\d+(?:[.,]\d+)?\s?(?:ns|µs|us|ms|s|sec|secs|seconds|min|mins|minutes|it/s|s/it)\b")
_CLOCK = re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:\.\d+)?\b")
_TOOL_FILE = re.compile(r"<shiro-python-\d+>")
_TAGS = re.compile(r"<[^>]*>")
_HIDDEN_HTML = re.compile(r"<(style|script)\b.*?</\1\s*>", re.S | re.I)


#: levels of JSON a notebook may have: deeper than any notebook needs, shallow enough for the copies and the
#: nbformat calls check and export make (about 500 levels exhaust Python's recursion limit there)
MAX_DEPTH = 200
TOO_DEEP = f"it is nested too deeply to be a notebook (over {MAX_DEPTH} levels of JSON)"


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether ``value`` (parsed JSON) nests lists and objects more than ``limit`` deep; no recursion."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return True
        inner = item.values() if isinstance(item, dict) else item
        stack.extend((child, depth + 1) for child in inner if isinstance(child, (dict, list)))
    return False


def read_saved(path: str | os.PathLike[str]) -> dict[str, Any]:
    """The notebook at ``path`` as JSON (:func:`shiro_kernel.notebook.file.read_notebook`), for check and
    export. Raises :class:`RequestError` with one line — ``no notebook at …`` or ``cannot read …: why`` — for a
    file that is missing, not a notebook, or nested too deeply (a 100,000-deep one overflows the JSON parser's
    recursion; a 500-deep one parses but would overflow the copies and nbformat's checks later)."""
    from ..notebook.file import TooDeep, read_notebook

    try:
        nb = read_notebook(Path(path))
    except FileNotFoundError:
        raise RequestError(f"no notebook at {path}") from None
    except TooDeep:
        raise RequestError(f"cannot read {path}: {TOO_DEEP}") from None
    except (OSError, ValueError) as exc:
        raise RequestError(f"cannot read {path}: {exc}") from None
    if _deeper_than(nb, MAX_DEPTH):
        raise RequestError(f"cannot read {path}: {TOO_DEEP}")
    return nb


def normal_text(text: str) -> str:
    """Text as compared: no ANSI codes, addresses, timings or the tool's numbered file names; trailing
    spaces and blank edges dropped."""
    text = _ANSI.sub("", text.replace("\r\n", "\n"))
    text = _ADDRESS.sub("0x…", text)
    text = _TOOL_FILE.sub("<shiro-python>", text)
    text = _CLOCK.sub("<time>", _TIMING.sub("<time>", text))
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n")


def _joined(value: Any) -> str:
    return "".join(str(v) for v in value) if isinstance(value, list) else str(value)


def _image_bytes(value: Any, limit: int | None = None) -> bytes:
    text = re.sub(r"\s+", "", _joined(value))
    if limit is not None:
        text = text[: limit - limit % 4]
    try:
        return base64.b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return b""


def image_size(mime: str, value: Any) -> tuple[int, int] | None:
    """An image's (width, height) in pixels from its header (PNG, GIF, JPEG), without decoding it."""
    if mime == "image/png":
        head = _image_bytes(value, 44)
        if head[:8] == b"\x89PNG\r\n\x1a\n" and head[12:16] == b"IHDR":
            return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    elif mime == "image/gif":
        head = _image_bytes(value, 16)
        if head[:3] == b"GIF":
            return int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little")
    elif mime == "image/jpeg":
        data = _image_bytes(value)
        i = 2
        while i + 9 < len(data) and data[i] == 0xFF:
            marker, length = data[i + 1], int.from_bytes(data[i + 2 : i + 4], "big")
            if marker in (0xC0, 0xC1, 0xC2, 0xC3, 0xC5, 0xC6, 0xC7, 0xC9, 0xCA, 0xCB, 0xCD, 0xCE, 0xCF):
                return int.from_bytes(data[i + 7 : i + 9], "big"), int.from_bytes(data[i + 5 : i + 7], "big")
            i += 2 + length
    return None


def html_text(markup: str) -> str:
    """The text an HTML output shows (a DataFrame's cells), tags, styles and scripts removed."""
    return " ".join(html.unescape(_TAGS.sub(" ", _HIDDEN_HTML.sub(" ", markup))).split())


def display_view(data: Mapping[str, Any]) -> tuple[str, str]:
    """(kind, value) of a display's MIME bundle as a reader compares it."""
    for mime in ("image/png", "image/jpeg", "image/gif"):
        if mime in data:
            size = image_size(mime, data[mime])
            return "image", f"{mime} {size[0]}×{size[1]}" if size else mime
    if "image/svg+xml" in data:
        svg = _joined(data["image/svg+xml"])
        dims = re.search(r'<svg[^>]*?\bwidth="([^"]+)"[^>]*?\bheight="([^"]+)"', svg)
        return "image", f"image/svg+xml {dims.group(1)}×{dims.group(2)}" if dims else "image/svg+xml"
    if "application/vnd.jupyter.widget-view+json" in data:
        return "widget", "a widget"
    for mime in ("application/vnd.plotly.v1+json", "application/vnd.vegalite.v5+json"):
        if mime in data:
            return "chart", mime
    if "text/html" in data:
        return "text", normal_text(html_text(_joined(data["text/html"])))
    for mime in ("text/markdown", "text/latex", "text/plain"):
        if mime in data:
            return "text", normal_text(_joined(data[mime]))
    for mime, value in data.items():
        if mime.endswith("json"):
            return "text", json.dumps(value, sort_keys=True, ensure_ascii=False)
    return "other", ", ".join(sorted(data))


class Item(NamedTuple):
    """One output as a reader sees it: ``kind`` (stdout, stderr, error, text, image, widget, chart, turn,
    other) and a comparable ``value``."""

    kind: str
    value: Any


def turn_view(bundle: Mapping[str, Any], calls: list[str]) -> Any:
    """A turn bundle as compared: for each of ``calls`` (the ids of the turn's replayed calls), its output
    text and what it displayed; the answer; and the error the turn ended with, if any. Footers, usage, ids and
    the other rows are left out."""
    rows = {}
    for entry in bundle.get("entries") or []:
        if isinstance(entry, dict) and entry.get("type") == "tool" and entry.get("callId") in calls:
            shown = tuple(
                display_view(o["data"])
                for o in entry.get("outputs") or []
                if isinstance(o, dict) and isinstance(o.get("data"), dict)
            )
            rows[entry["callId"]] = (normal_text(str(entry.get("output") or "")), shown)
    texts = [
        str(e.get("text") or "")
        for e in bundle.get("entries") or []
        if isinstance(e, dict) and e.get("type") == "text" and str(e.get("text") or "").strip()
    ]
    end = bundle.get("end")
    error = end.get("error") if isinstance(end, dict) else None
    return tuple(rows.get(c) for c in calls), normal_text(texts[-1] if texts else ""), normal_text(str(error or ""))


def replayed_calls(bundle: Mapping[str, Any]) -> list[str] | None:
    """The ids of the calls a replay of ``bundle`` runs; None for a bundle that cannot be replayed."""
    if not has_replay(bundle):
        return None
    try:
        return [step.call_id for step in plan_from_bundle(dict(bundle)).runs]
    except ValueError:
        return None


def reader_view(outputs: list[Any], *, shiro_only: bool, calls: list[list[str] | None]) -> list[Item]:
    """A cell's outputs as a reader compares them. ``shiro_only``: the cell is all shiro lines, so its
    streams and other displays are shiro's own (resume lines, notices) and are left out. ``calls``: for each
    turn bundle in order, the ids of its replayed calls (from the saved notebook)."""
    items: list[Item] = []
    turn = 0
    for output in outputs:
        if not isinstance(output, dict):
            continue
        kind = output.get("output_type")
        if kind == "stream":
            if shiro_only:
                continue
            name = str(output.get("name") or "stdout")
            text = _joined(output.get("text") or "")
            if items and items[-1].kind == name:
                items[-1] = Item(name, items[-1].value + text)
            else:
                items.append(Item(name, text))
        elif kind == "error":
            ename, evalue = str(output.get("ename") or "Error"), str(output.get("evalue") or "")
            items.append(Item("error", normal_text(f"{ename}: {evalue}" if evalue else ename)))
        elif kind in ("execute_result", "display_data"):
            data = output.get("data")
            if not isinstance(data, dict):
                continue
            if isinstance(data.get(TURN_MIME), dict):
                bundle = data[TURN_MIME]
                ids = calls[turn] if turn < len(calls) else replayed_calls(bundle)
                turn += 1
                items.append(Item("turn", turn_view(bundle, ids) if ids is not None else ("not replayable",)))
            elif not shiro_only:
                items.append(Item(*display_view(data)))
    return [Item(i.kind, normal_text(i.value)) if i.kind in ("stdout", "stderr") else i for i in items]


# -- saying how they differ ------------------------------------------------------------------------------
def _quoted(text: str) -> str:
    return '"' + one_line(text, SNIPPET) + '"'


def _first_difference(saved: str, now: str) -> tuple[str, str]:
    """The first line that differs in each, both cut to show where they part (a long line is shown from a
    little before its first differing character)."""
    a, b = saved.splitlines() or [""], now.splitlines() or [""]
    for x, y in zip(a, b):
        if x != y:
            same = next((i for i, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
            start = 0
            if max(len(x), len(y)) > SNIPPET:
                back = max(0, same - SNIPPET // 4)
                space = x.rfind(" ", 0, back)  # start at a word when one starts shortly before
                start = space + 1 if space >= 0 and back - space <= 10 else back
            return ("…" if start else "") + x[start:], ("…" if start else "") + y[start:]
    return (a[len(b)] if len(a) > len(b) else "(nothing more)"), (b[len(a)] if len(b) > len(a) else "(nothing more)")


_NAMES = {
    "stdout": "printed text",
    "stderr": "text on stderr",
    "error": "an error",
    "text": "a result",
    "image": "an image",
    "widget": "a widget",
    "chart": "a chart",
    "turn": "a shiro turn",
    "other": "an output",
}


def _turn_difference(saved: Any, now: Any) -> str:
    if saved == ("not replayable",):
        return "its shiro turn was saved without replay information (by an older version), so it cannot be replayed"
    if now == ("not replayable",) or len(now) != 3:
        return "its shiro turn was not replayed now"
    (saved_rows, saved_answer, _), (now_rows, now_answer, now_error) = saved, now
    if now_error:
        return f"its shiro turn was not replayed now; it ended: {one_line(now_error, 120)}"
    for number, (a, b) in enumerate(zip(saved_rows, now_rows), 1):
        if a == b:
            continue
        if b is None:
            return f"shiro turn: replayed call {number} did not run now"
        if a is not None and a[0] != b[0]:
            x, y = _first_difference(a[0], b[0])
            return f"shiro turn: replayed call {number}'s output differs: saved {_quoted(x)}, now {_quoted(y)}"
        return f"shiro turn: what replayed call {number} displayed differs: saved {a[1] if a else ()}, now {b[1]}"
    if saved_answer != now_answer:
        return "shiro turn: the answer shown differs from the saved one"
    return "shiro turn differs"


def difference(saved: list[Item], now: list[Item]) -> str | None:
    """One line saying how ``now`` differs from ``saved``; None when a reader sees the same."""
    if saved == now:
        return None
    for number, (a, b) in enumerate(zip(saved, now), 1):
        if a == b:
            continue
        if a.kind != b.kind:
            return f"output {number} is {_NAMES.get(b.kind, b.kind)} now, {_NAMES.get(a.kind, a.kind)} when saved"
        if a.kind == "turn":
            return _turn_difference(a.value, b.value)
        if a.kind == "image":
            return f"output {number}, an image, is {b.value.split(' ')[-1]} now, {a.value.split(' ')[-1]} when saved"
        x, y = _first_difference(str(a.value), str(b.value))
        return f"output {number} differs: saved {_quoted(x)}, now {_quoted(y)}"
    if len(now) > len(saved):
        extra = now[len(saved)]
        return f"{len(now)} outputs now, {len(saved)} when saved (now also {_NAMES.get(extra.kind, extra.kind)})"
    gone = saved[len(now)]
    return f"{len(now)} outputs now, {len(saved)} when saved ({_NAMES.get(gone.kind, gone.kind)} is missing)"


# -- why a cell failed ------------------------------------------------------------------------------------
