"""What one request may carry, beyond the history rules: the newest few images, and tool arguments and
results cut to caps. Both act on the wire copy only; the session's own history keeps everything.

* :func:`limit_images` keeps only the newest :data:`KEEP_IMAGES` images; each older one is replaced by a
  line in its result's text naming what it showed.
* :func:`limit_sizes` cuts every tool call's arguments to :data:`WIRE_ARGUMENT_CHARS` (still valid JSON)
  and every tool result to :data:`WIRE_RESULT_CHARS`: a 5 MB argument would otherwise ride along in every
  later request.
"""

from __future__ import annotations

import json
from dataclasses import replace

from ..text import cut
from ..transcript import Message, Part, ToolCallPart, ToolResultPart

#: images sent with one request: the newest few
KEEP_IMAGES = 3
#: how many newer images may join them before the older ones go (:func:`held_image_cut`): dropping an image
#: rewrites an early part of the history, which a provider's prefix cache then cannot serve, so it is done
#: once every few figures rather than at every one
IMAGE_SLACK = 9
#: one tool call's arguments, and one tool result, at most on the wire (the session keeps them whole)
WIRE_ARGUMENT_CHARS = 20_000
WIRE_RESULT_CHARS = 30_000


def _images(message: Message) -> int:
    return sum(len(p.images) for p in message.parts if isinstance(p, ToolResultPart))


def held_image_cut(messages: list[Message], held: int | None, keep: int = KEEP_IMAGES) -> int | None:
    """Where images stop being left out, held still: the index of the message before which every image goes
    (None: none goes). Images go only once more than ``keep`` + :data:`IMAGE_SLACK` would be sent: then the
    cut moves so that the newest ``keep`` stay, and holds while the newer ones add up again."""
    start = held if held is not None and held <= len(messages) else 0
    if sum(_images(m) for m in messages[start:]) <= keep + IMAGE_SLACK:
        return held if start else None
    seen = 0
    for i in range(len(messages) - 1, -1, -1):
        seen += _images(messages[i])
        if seen > keep:
            return i + 1 if seen - _images(messages[i]) >= keep else None
    return None


def limit_images(
    messages: list[Message], keep: int = KEEP_IMAGES, *, before: int | None = None
) -> tuple[list[Message], int]:
    """The wire copy with only the newest ``keep`` images (or, with ``before``, none of the images before
    that message and all of those after it); each image left out is replaced by a line in its result's text
    naming what it showed. Returns ``(messages, how many were left out)``; the same list when nothing goes.
    The session's own history keeps every image."""
    if before is not None:
        return _without_images(messages, before)
    seen = 0
    cut_at = -1  # messages before this index lose their images
    for i in range(len(messages) - 1, -1, -1):
        for p in messages[i].parts:
            if isinstance(p, ToolResultPart) and p.images:
                seen += len(p.images)
        if seen > keep:
            cut_at = i
            break
    if cut_at < 0:
        return messages, 0
    out: list[Message] = []
    dropped = 0
    remaining = keep
    # walk newest first so the newest `keep` images survive, even inside one message
    for i in range(len(messages) - 1, -1, -1):
        m = messages[i]
        if i > cut_at or not any(isinstance(p, ToolResultPart) and p.images for p in m.parts):
            if i > cut_at:
                remaining -= sum(len(p.images) for p in m.parts if isinstance(p, ToolResultPart))
            out.append(m)
            continue
        parts: list[Part] = []
        for p in reversed(m.parts):
            if isinstance(p, ToolResultPart) and p.images:
                kept = p.images[len(p.images) - max(0, remaining) :] if remaining > 0 else []
                gone = p.images[: len(p.images) - len(kept)]
                remaining -= len(kept)
                dropped += len(gone)
                notes = "".join(
                    f"\n[image left out of this request to save context: {g.alt or 'an image'}]" for g in gone
                )
                p = replace(p, images=list(kept), output=p.output + notes, meta=dict(p.meta))
            parts.append(p)
        out.append(Message(m.role, parts[::-1]))
    return out[::-1], dropped


def _without_images(messages: list[Message], before: int) -> tuple[list[Message], int]:
    """Every image of the messages before index ``before`` left out (a line in its result says what it showed)."""
    out: list[Message] = []
    dropped = 0
    for i, m in enumerate(messages):
        if i >= before or not _images(m):
            out.append(m)
            continue
        parts: list[Part] = []
        for p in m.parts:
            if isinstance(p, ToolResultPart) and p.images:
                notes = "".join(
                    f"\n[image left out of this request to save context: {g.alt or 'an image'}]" for g in p.images
                )
                dropped += len(p.images)
                p = replace(p, images=[], output=p.output + notes, meta=dict(p.meta))
            parts.append(p)
        out.append(Message(m.role, parts))
    return (out if dropped else messages), dropped


def limit_sizes(messages: list[Message]) -> tuple[list[Message], int]:
    """The wire copy with every tool call's arguments and every tool result cut to their caps (a 5 MB
    argument would otherwise ride along in every later request). Returns ``(messages, how many parts
    were shortened)``; the same list when none was. Shortened arguments stay valid JSON."""
    out: list[Message] | None = None
    shortened = 0
    for i, m in enumerate(messages):
        parts: list[Part] | None = None
        for j, p in enumerate(m.parts):
            new: Part | None = None
            if isinstance(p, ToolCallPart) and len(p.arguments) > WIRE_ARGUMENT_CHARS:
                head = p.arguments[: WIRE_ARGUMENT_CHARS // 2]
                note = (
                    f"{head}… [{len(p.arguments) - len(head):,} more characters of these arguments are left out "
                    "of this request; the call ran with them in full]"
                )
                new = replace(p, arguments=json.dumps({"_shortened": note}), meta=dict(p.meta))
            elif isinstance(p, ToolResultPart) and len(p.output) > WIRE_RESULT_CHARS:
                new = replace(
                    p, output=cut(p.output, WIRE_RESULT_CHARS, tail=WIRE_RESULT_CHARS // 4), meta=dict(p.meta)
                )
            if new is not None:
                if parts is None:
                    parts = list(m.parts)
                parts[j] = new
                shortened += 1
        if parts is not None:
            if out is None:
                out = list(messages[:i])
            out.append(Message(m.role, parts))
        elif out is not None:
            out.append(m)
    return (out if out is not None else messages), shortened


__all__ = [
    "IMAGE_SLACK",
    "KEEP_IMAGES",
    "WIRE_ARGUMENT_CHARS",
    "WIRE_RESULT_CHARS",
    "held_image_cut",
    "limit_images",
    "limit_sizes",
]
