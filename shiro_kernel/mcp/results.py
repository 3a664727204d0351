"""An MCP ``CallToolResult`` as a shiro tool result, and a progress notification as one line.

Invariants:

* Text content → text (blocks joined by newlines). Image content → :class:`Image` (decoded bytes + MIME),
  the same path figures take; an embedded blob resource whose MIME type is an image goes there too.
  Resource links and other embedded resources → one text line each (text resources add their text).
  Audio → a one-line placeholder (no API path for audio in tool results).
* ``structuredContent`` is shown as JSON only when there is no other content (the spec says servers
  SHOULD repeat it as text, so showing both would double it).
* ``isError`` → :class:`ToolError` carrying the text; the registry turns it into ``Error: …``.
* Works on the SDK's pydantic models by attribute access only, so this module imports nothing from ``mcp``.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from ..tools import Image, ToolError, ToolOutput

_IMAGE_MIMES = ("image/png", "image/jpeg", "image/gif", "image/webp")


def convert_result(result: Any, redact: Any = None) -> str | ToolOutput:
    """``result`` (a ``CallToolResult``) as a string, or a :class:`ToolOutput` when it holds images."""
    lines: list[str] = []
    images: list[Image] = []
    for block in getattr(result, "content", None) or []:
        kind = getattr(block, "type", None)
        if kind == "text":
            lines.append(str(getattr(block, "text", "")))
        elif kind == "image":
            image = _image(getattr(block, "data", ""), getattr(block, "mime_type", ""))
            if image is None:
                lines.append(f"[image: {getattr(block, 'mime_type', '?')} that could not be decoded]")
            else:
                images.append(image)
                lines.append(f"[image {len(images)}: {image.mime}, {len(image.data):,} bytes]")
        elif kind == "audio":
            lines.append(f"[audio: {getattr(block, 'mime_type', '?')}, not shown to the model]")
        elif kind == "resource_link":
            lines.append(_link_line(block))
        elif kind == "resource":
            lines.extend(_embedded(getattr(block, "resource", None), images))
        else:
            lines.append(f"[{kind or 'unknown'} content not shown]")
    structured = getattr(result, "structured_content", None)
    if not lines and structured is not None:
        lines.append(json.dumps(structured, ensure_ascii=False, indent=1, default=str))
    text = "\n".join(lines) if lines else "(no output)"
    if callable(redact):
        text = redact(text)
    if getattr(result, "is_error", False):
        raise ToolError(text if lines else "the tool reported an error without a message")
    return ToolOutput(text, images=images) if images else text


def progress_text(progress: float, total: float | None, message: str | None) -> str:
    """One short line for the live view's tool row, e.g. ``"reading files (2/5)"``."""
    count = f"{progress:g}/{total:g}" if total else f"{progress:g}" if progress else ""
    if message and count:
        return f"{message} ({count})"
    return message or count


def _image(data: str, mime: str) -> Image | None:
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return None
    if not raw:
        return None
    mime = (mime or "").lower()
    return Image(raw, mime if mime in _IMAGE_MIMES else _sniff(raw) or mime or "application/octet-stream")


def _sniff(raw: bytes) -> str | None:
    if raw.startswith(b"\x89PNG"):
        return "image/png"
    if raw.startswith(b"\xff\xd8"):
        return "image/jpeg"
    if raw[:4] == b"GIF8":
        return "image/gif"
    if raw[:4] == b"RIFF" and raw[8:12] == b"WEBP":
        return "image/webp"
    return None


def _link_line(block: Any) -> str:
    name = getattr(block, "title", None) or getattr(block, "name", None) or ""
    uri = getattr(block, "uri", "")
    mime = getattr(block, "mime_type", None)
    desc = getattr(block, "description", None)
    line = f"[resource link] {name + ': ' if name else ''}{uri}"
    if mime:
        line += f" ({mime})"
    if desc:
        line += f" — {desc}"
    return line


def _embedded(resource: Any, images: list[Image]) -> list[str]:
    uri = getattr(resource, "uri", "?")
    mime = getattr(resource, "mime_type", None) or ""
    text = getattr(resource, "text", None)
    if isinstance(text, str):
        return [f"[resource {uri}{' (' + mime + ')' if mime else ''}]", text]
    blob = getattr(resource, "blob", None)
    if isinstance(blob, str):
        if mime.lower() in _IMAGE_MIMES:
            image = _image(blob, mime)
            if image is not None:
                images.append(image)
                return [f"[image {len(images)}: {image.mime} from resource {uri}]"]
        size = len(blob) * 3 // 4
        return [f"[resource {uri}: {mime or 'binary'}, about {size:,} bytes, not shown]"]
    return [f"[resource {uri}]"]
