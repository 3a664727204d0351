"""Secrets never leave the kernel: the one filter every tool result passes before it is sent to the model,
recorded in the session, drawn in the notebook or saved (applied in :func:`shiro_kernel.tools.run_tool`).

What is replaced, by ``[redacted:NAME]``:

* the configured API key (``OPENAI_API_KEY``);
* the secrets shiro itself holds, registered by name with :func:`add_secret` (the ``/mcp serve`` bearer
  token, ``[redacted:SHIRO_MCP_TOKEN]``) until :func:`remove_secret`;
* the value of every environment variable whose name looks secret — it contains ``KEY``, ``TOKEN``,
  ``SECRET``, ``PASSWORD``, ``PASSWD`` or ``CREDENTIAL`` (any case) — when the value has 8 or more
  characters (shorter values are too likely to occur by chance);
* matches of the regular expressions in ``Shiro.redact`` (``[redacted:pattern]``);
* the password of a URL (``https://user:[redacted]@host``) and the values of URL query parameters named
  like a secret (``?token=[redacted]``, ``X-Amz-Signature=[redacted]``);
* a piece of a secret (6+ characters) that a tool's own truncation left at a cut — right before or after
  a ``...``/``…`` marker or at either end of the text — since a tool may shorten its output before the
  filter sees it.

The environment is read at each call (a variable set in the notebook counts at once); the compiled
pattern is cached for as long as the secrets and patterns stay the same. A secret that was transformed
(base64, split across lines, hashed) is not recognised.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Mapping

API_KEY_VAR = "OPENAI_API_KEY"
#: names of environment variables whose values are secrets
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
#: shorter values are not treated as secrets (too likely to occur by chance: "true", a port number)
MIN_CHARS = 8

_URL_PASSWORD = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://[^\s/@:]*:)([^\s/@]+)(@)")
_SECRET_QUERY = re.compile(
    r"([?&][^=&\s#]*(?:key|token|secret|password|passwd|signature|credential)[^=&\s#]*=)([^&\s#\"'<>]+)",
    re.IGNORECASE,
)

#: the shortest piece of a secret, left at a truncation point, that is still redacted
FRAGMENT_CHARS = 6
# what follows a head that was cut, and what precedes a tail that was kept (a repr may quote the pieces)
_CUT_AFTER = tuple(q + m for q in ("", "'", '"') for m in ("...", "\u2026", "\n[...", "\n[\u2026"))
_CUT_BEFORE = tuple(m + q for q in ("", "'", '"', "b'", 'b"') for m in ("...", "\u2026", "...]\n", "\u2026]\n"))

_extra: tuple[str, ...] = ()
#: ``(name, value)`` of the secrets registered with :func:`add_secret`, sorted (replaced whole, never changed
#: in place: turns on other threads read it while the kernel's thread registers a token)
_held: tuple[tuple[str, str], ...] = ()
_cache_lock = threading.Lock()
_cache: tuple[tuple[tuple[str, str], ...], tuple[str, ...], re.Pattern[str] | None, dict[str, str]] | None = None


def set_patterns(patterns: Iterable[str]) -> None:
    """The extra patterns (``Shiro.redact``). Raises ``re.error`` for one that does not compile."""
    global _extra
    new = tuple(patterns)
    for pattern in new:
        re.compile(pattern)
    _extra = new


def patterns() -> tuple[str, ...]:
    return _extra


def add_secret(name: str, value: str) -> None:
    """Redact ``value`` as ``[redacted:NAME]`` from now on (a secret shiro made, in no environment variable;
    one name may hold several values). Values under :data:`MIN_CHARS` characters are ignored, as for the
    environment."""
    global _held
    if value and len(value) >= MIN_CHARS:
        _held = tuple(sorted({*_held, (name, value)}))


def remove_secret(name: str, value: str | None = None) -> None:
    """Stop redacting the secret registered as ``name`` (only ``value``, when given): it no longer works."""
    global _held
    _held = tuple(item for item in _held if item[0] != name or (value is not None and item[1] != value))


def secrets(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``(name, value)`` of every secret: the API key first, then those registered with :func:`add_secret`,
    then the environment's by name."""
    env = os.environ if environ is None else environ
    found: list[tuple[str, str]] = []
    key = env.get(API_KEY_VAR)
    if key and len(key) >= MIN_CHARS:
        found.append((API_KEY_VAR, key))
    found += _held
    for name in sorted(env):
        value = env.get(name) or ""
        if name != API_KEY_VAR and len(value) >= MIN_CHARS and SECRET_NAME.search(name):
            found.append((name, value))
    return found


def _compiled(found: list[tuple[str, str]], extra: tuple[str, ...]) -> tuple[re.Pattern[str] | None, dict[str, str]]:
    global _cache
    key = tuple(found)
    with _cache_lock:
        if _cache is not None and _cache[0] == key and _cache[1] == extra:
            return _cache[2], _cache[3]
        names: dict[str, str] = {}
        for name, value in found:  # the first name wins for a value several variables share
            names.setdefault(value, name)
        alternatives = [re.escape(v) for v in sorted(names, key=len, reverse=True)]
        pattern = re.compile("|".join(alternatives)) if alternatives else None
        _cache = (key, extra, pattern, names)
        return pattern, names


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every secret replaced (see the module docstring)."""
    if not text:
        return text
    pattern, names = _compiled(secrets(environ), _extra)
    if pattern is not None:
        text = pattern.sub(lambda m: f"[redacted:{names[m.group(0)]}]", text)
        text = _fragments(text, names)
    for extra in _extra:
        text = re.sub(extra, "[redacted:pattern]", text)
    if "://" in text:
        text = _URL_PASSWORD.sub(r"\1[redacted]\3", text)
    if "=" in text:
        text = _SECRET_QUERY.sub(r"\1[redacted]", text)
    return text


def _fragments(text: str, names: dict[str, str]) -> str:
    """Redact the pieces of secrets that a truncation left at a cut (see the module docstring)."""
    spans: list[tuple[int, int, str]] = []
    for value, name in names.items():
        if len(value) <= FRAGMENT_CHARS:
            continue
        head, i = value[:FRAGMENT_CHARS], text.find(value[:FRAGMENT_CHARS])
        while i != -1:  # a head of the value, cut off after n characters
            n = FRAGMENT_CHARS
            while n < len(value) and i + n < len(text) and text[i + n] == value[n]:
                n += 1
            if text.startswith(_CUT_AFTER, i + n) or i + n == len(text):
                spans.append((i, i + n, name))
            i = text.find(head, i + 1)
        tail, j = value[-FRAGMENT_CHARS:], text.find(value[-FRAGMENT_CHARS:])
        while j != -1:  # a tail of the value, its first characters cut off
            end, n = j + FRAGMENT_CHARS, FRAGMENT_CHARS
            while n < len(value) and end - n - 1 >= 0 and text[end - n - 1] == value[-n - 1]:
                n += 1
            start = end - n
            if start == 0 or text.endswith(_CUT_BEFORE, 0, start):
                spans.append((start, end, name))
            j = text.find(tail, j + 1)
    merged: list[tuple[int, int, str]] = []
    for start, end, name in sorted(spans):
        if merged and start < merged[-1][1]:  # overlapping pieces: one redaction
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]), merged[-1][2])
        else:
            merged.append((start, end, name))
    for start, end, name in reversed(merged):
        text = f"{text[:start]}[redacted:{name}]{text[end:]}"
    return text


def subprocess_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a command the agent runs: this one without the API key."""
    env = dict(os.environ if environ is None else environ)
    env.pop(API_KEY_VAR, None)
    return env


__all__ = [
    "API_KEY_VAR",
    "MIN_CHARS",
    "SECRET_NAME",
    "add_secret",
    "patterns",
    "redact",
    "remove_secret",
    "secrets",
    "set_patterns",
    "subprocess_env",
]
