"""Stand-ins for private values, and the one matcher every request is scanned with at the boundary.

A value leaves as ``[private:LABEL:HEX]``: the label is the column (or variable) it came from, the hex a keyed
hash of the value under the session's own key (:attr:`~shiro_kernel.session.Session.mask_key`, kept in its
local record, never sent) — so the same value is the same stand-in for the whole session, after a resume too,
and nobody without the key and the data can tell which value it is. Two values whose hashes collide get a
longer stand-in.

Each value is matched in every form a request carries it in (as it is, in a ``repr``, in JSON, in HTML:
:func:`shiro_kernel.redact.escaped`), where it stands as a whole (a value that starts or ends with a letter or a
digit is not matched inside a longer word: ``Ann`` is not masked in ``Annual``). All forms of all values are one
Aho-Corasick automaton (``ahocorasick_rs``, the Rust crate's, imported on first use), built when values are added,
so a request costs one pass whatever the number of values; every match is found (overlapping ones too), and where
the matches that stand as a whole overlap, the leftmost, then the longest, is masked.

The other way, :meth:`Mask.unmask` turns the stand-ins in what the model sends back into the real values — its
text, for the views and the record, and its calls' arguments, so code that runs in the kernel means the real
value (a stand-in inside quotes is escaped for them). A stand-in the mask does not know is left as it is.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from ..redact import escaped

if TYPE_CHECKING:
    from ..events import Notice, ProviderEvent

STAND_IN = re.compile(r"\[private:([A-Za-z0-9_-]{1,24}):([0-9a-f]{8,16})\]")
#: a stand-in as a model may write it back: with its brackets, or without them (Qwen2.5-Coder-1.5B, measured:
#: ``df[df.email == 'private:email:7c5655c5']``)
WRITTEN = re.compile(r"(?<![A-Za-z0-9_])\[?private:([A-Za-z0-9_-]{1,24}):([0-9a-f]{8,16})(?![0-9a-f])\]?")
#: the hex digits of a stand-in, and the longer ones a collision gets
_DIGITS = (8, 12, 16)


class Mask:
    """One session's stand-ins: :meth:`add` values, :meth:`mask` a text to send, :meth:`unmask` a text received."""

    def __init__(self, key: str, seen: dict[str, str] | None = None) -> None:
        self.key = key.encode("utf-8")
        #: each value masked so far and its label: the session keeps them (its local record), so what its history
        #: holds is masked again after a resume, before the kernel has loaded the data once more
        self.seen: dict[str, str] = {} if seen is None else seen
        self._label: dict[str, str] = {}
        self._token: dict[str, str] = {}  # value -> stand-in
        self._value: dict[str, str] = {}  # stand-in -> value
        self._lock = threading.Lock()
        self._automaton: Any = None  # rebuilt on the next mask after values were added
        self._stand_ins: list[str] = []  # the stand-in of each of the automaton's patterns, by its index
        self._stale = False

    def __len__(self) -> int:
        return len(self._token)

    def token(self, value: str) -> str | None:
        return self._token.get(value)

    def add(self, texts: Mapping[str, str]) -> int:
        """Give each new text of ``texts`` (text -> label) its stand-in; returns how many were new."""
        new = 0
        with self._lock:
            for text, label in texts.items():
                if text in self._token:
                    continue
                digest = hmac.new(self.key, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()
                for digits in _DIGITS:
                    token = f"[private:{label}:{digest[:digits]}]"
                    if token not in self._value:
                        break
                self._token[text] = token
                self._value[token] = text
                self._label[text] = label
                new += 1
            if new:
                self._stale = True
        return new

    def _built(self) -> Any:
        with self._lock:
            if self._stale or self._automaton is None:
                tokens: dict[str, str] = {}  # each form -> its value's stand-in (the first value to have it)
                for value, token in self._token.items():
                    for form in escaped(value):
                        if form:
                            tokens.setdefault(form, token)
                if tokens:
                    import ahocorasick_rs

                    self._automaton = ahocorasick_rs.AhoCorasick(list(tokens))
                    self._stand_ins = list(tokens.values())
                else:
                    self._automaton = False
                self._stale = False
            return self._automaton

    def mask(self, text: str) -> tuple[str, int]:
        """``text`` with each private value as its stand-in, and how many were masked."""
        if not text or not self._token:
            return text, 0
        automaton = self._built()
        if not automaton:
            return text, 0
        stand_ins = self._stand_ins
        spans = [
            (start, end, stand_ins[index])
            for index, start, end in automaton.find_matches_as_indexes(text, overlapping=True)
            if _whole(text, start, end)
        ]
        if not spans:
            return text, 0
        spans.sort(key=lambda s: (s[0], -s[1]))
        out: list[str] = []
        pos = count = 0
        for start, end, token in spans:
            if start < pos:
                continue
            out += (text[pos:start], token)
            pos, count = end, count + 1
            value = self._value[token]
            if value not in self.seen:
                self.seen[value] = self._label[value]
        out.append(text[pos:])
        return "".join(out), count

    def value_of(self, written: re.Match[str]) -> str | None:
        """The value of a stand-in as the model wrote it (:data:`WRITTEN`), or None when this mask gave none such."""
        return self._value.get(f"[private:{written.group(1)}:{written.group(2)}]")

    def unmask(self, text: str) -> str:
        """``text`` with each stand-in this mask gave, brackets or not, as its value."""
        if not text or "private:" not in text:
            return text
        return WRITTEN.sub(lambda m: self.value_of(m) or m.group(0), text)

    def unmask_code(self, text: str) -> str:
        """:meth:`unmask` for code, so that a value always arrives as data and never as code: a stand-in inside a
        string literal becomes the value escaped for that literal (its quotes, its backslashes, an f-string's
        braces doubled), so ``df[df.email == "[private:email:…]"]`` runs with the real value whatever it holds; a
        stand-in outside any string becomes a literal (a number as it is, anything else as its ``repr``). Where that
        cannot be done safely — a raw or bytes literal the value does not fit, code that does not parse into
        tokens — the stand-in stays as it is (the code then fails, or matches nothing)."""
        if not text or "private:" not in text:
            return text
        strings = _string_spans(text)
        out: list[str] = []
        pos = 0
        for m in WRITTEN.finditer(text):
            value = self.value_of(m)
            if value is None:
                continue
            if strings is None:
                continue  # not tokenizable: nothing is substituted
            literal = next((span for span in strings if span[0] <= m.start() and m.end() <= span[1]), None)
            if literal is None:
                shown: str | None = value if _NUMBER.fullmatch(value) else repr(value)
            else:
                shown = _in_literal(value, text[literal[0] : literal[1]])
            if shown is None:
                continue
            out += (text[pos : m.start()], shown)
            pos = m.end()
        out.append(text[pos:])
        return "".join(out)

    def unmask_shell(self, text: str) -> str:
        """:meth:`unmask` for a shell command: a stand-in becomes its value only where the value is one plain word
        the shell reads as itself (letters, digits, ``@._+-/:=,``); otherwise it stays as it is."""
        if not text or "private:" not in text:
            return text

        def plain(m: re.Match[str]) -> str:
            value = self.value_of(m)
            return value if value is not None and _SHELL_WORD.fullmatch(value) else m.group(0)

        return WRITTEN.sub(plain, text)

    def unmask_arguments(self, arguments: str) -> str:
        """A call's JSON arguments with the stand-ins in its strings unmasked: Python code (``code``, ``source``)
        as :meth:`unmask_code`, a shell ``command`` as :meth:`unmask_shell`, any other text as it is."""
        if not arguments or "private:" not in arguments:
            return arguments
        try:
            parsed = json.loads(arguments)
        except ValueError:
            return arguments  # not JSON: its call fails as it is
        by_key = {"code": self.unmask_code, "source": self.unmask_code, "command": self.unmask_shell}
        return json.dumps(_walk(parsed, lambda key, text: by_key.get(key, self.unmask)(text)), ensure_ascii=False)


_SHELL_WORD = re.compile(r"[A-Za-z0-9@._+/:=,-]+")
_NUMBER = re.compile(r"-?[0-9]+(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_PREFIX = re.compile(r"[A-Za-z]*")


def _string_spans(code: str) -> list[tuple[int, int]] | None:
    """Where ``code``'s string literals are (offsets of each STRING token, f-strings whole), or None when it does
    not tokenize."""
    import io
    import tokenize

    starts = [0]
    for line in code.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    spans = []
    fstring_start, fstring_end = getattr(tokenize, "FSTRING_START", -1), getattr(tokenize, "FSTRING_END", -1)
    opened: list[int] = []  # Python 3.12 and later: an f-string's start, until its end
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            begin, end = starts[tok.start[0] - 1] + tok.start[1], starts[tok.end[0] - 1] + tok.end[1]
            if tok.type == tokenize.STRING:
                spans.append((begin, end))
            elif tok.type == fstring_start:
                opened.append(begin)
            elif tok.type == fstring_end and opened:
                spans.append((opened.pop(), end))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return spans


def _in_literal(value: str, literal: str) -> str | None:
    """``value`` as it must be written inside the string literal ``literal`` to mean itself, or None where it
    cannot be (a raw literal and a backslash or its quote, a bytes literal and a non-ASCII letter)."""
    prefix = _PREFIX.match(literal).group(0).lower()  # type: ignore[union-attr]
    quote = literal[len(prefix) : len(prefix) + 3]
    quote = quote if quote in ('"""', "'''") else quote[:1]
    if "r" in prefix:
        if "\\" in value or quote[0] in value or (len(quote) == 1 and ("\n" in value or "\r" in value)):
            return None
        inner = value
    else:
        inner = value.replace("\\", "\\\\").replace(quote[0], "\\" + quote[0])
        inner = inner.replace("\r", "\\r").replace("\n", "\\n")
    if "b" in prefix and not inner.isascii():
        return None
    if "f" in prefix:
        inner = inner.replace("{", "{{").replace("}", "}}")
    return inner


def _walk(value: Any, fix: Callable[[str, str], str], key: str = "") -> Any:
    """``value`` with ``fix(key, text)`` applied to each string (``key``: the nearest dict key above it)."""
    if isinstance(value, str):
        return fix(key, value)
    if isinstance(value, list):
        return [_walk(v, fix, key) for v in value]
    if isinstance(value, dict):
        return {k: _walk(v, fix, k) for k, v in value.items()}
    return value


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


def _whole(text: str, start: int, end: int) -> bool:
    """Whether ``text[start:end]`` stands as a whole: not a piece of a longer word or number."""
    if _word(text[start]) and start > 0:
        before = text[start - 1]
        if _word(before) or (before == "." and text[start].isdigit() and start > 1 and text[start - 2].isdigit()):
            return False
    if _word(text[end - 1]) and end < len(text):
        after = text[end]
        if _word(after) or (
            after == "." and text[end - 1].isdigit() and end + 1 < len(text) and text[end + 1].isdigit()
        ):
            return False
    return True


class StreamUnmask:
    """:meth:`Mask.unmask` for a text that arrives in pieces: a piece that may be the start of a stand-in is
    held until the stand-in is whole (or cannot be one), so the view never shows half of one."""

    #: the longest stand-in: ``[private:`` + 24 + ``:`` + 16 + ``]``
    LONGEST = 51

    def __init__(self, mask: Mask) -> None:
        self.mask = mask
        self._held = ""

    def feed(self, piece: str) -> str:
        text = self._held + piece
        cut = _unfinished(text, self.LONGEST)
        text, self._held = (text[:cut], text[cut:]) if cut != -1 else (text, "")
        return self.mask.unmask(text)

    def flush(self) -> str:
        text, self._held = self._held, ""
        return self.mask.unmask(text)


def _unfinished(text: str, longest: int) -> int:
    """Where an unfinished stand-in (brackets or not) ends ``text``, or -1."""
    for i in range(max(0, len(text) - longest), len(text)):
        ch = text[i]
        if (ch == "[" or (ch == "p" and (i == 0 or not _word(text[i - 1])))) and _may_start(text[i:]):
            return i
    return -1


def _may_start(text: str) -> bool:
    """Whether ``text`` can still grow into a stand-in (``[private:…]`` or ``private:…``)."""
    text = text[1:] if text.startswith("[") else text
    head = "private:"
    if len(text) <= len(head):
        return head.startswith(text)
    return (
        text.startswith(head)
        and re.fullmatch(r"[A-Za-z0-9_-]{0,24}(?::[0-9a-f]{0,16})?", text[len(head) :]) is not None
    )


def unmasked(events: Iterable[ProviderEvent | Notice], mask: Mask) -> Iterator[ProviderEvent | Notice]:
    """``events`` with the private values' stand-ins the model wrote turned back into the values
    (:mod:`shiro_kernel.private.mask`): the streamed text (a stand-in split across deltas is held until whole), and
    the answer that goes into the record — its text, and its calls' arguments as code that runs in the kernel."""
    from dataclasses import replace

    from ..events import Done, TextDelta
    from ..transcript import TextPart, ToolCallPart

    stream = StreamUnmask(mask)
    for event in events:
        if isinstance(event, TextDelta):
            text = stream.feed(event.text)
            if text:
                yield TextDelta(text)
            continue
        if isinstance(event, Done):
            rest = stream.flush()
            if rest:
                yield TextDelta(rest)
            parts = [
                replace(p, text=mask.unmask(p.text))
                if isinstance(p, TextPart)
                else replace(p, arguments=mask.unmask_arguments(p.arguments))
                if isinstance(p, ToolCallPart)
                else p
                for p in event.message.parts
            ]
            event = replace(event, message=replace(event.message, parts=parts))
        yield event


__all__ = ["STAND_IN", "WRITTEN", "Mask", "StreamUnmask", "unmasked"]
