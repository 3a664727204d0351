r"""The secrets it knows never leave the kernel: the one filter every tool result passes before it is sent to the model,
recorded in the session, drawn in the notebook or saved (applied in :func:`shiro_kernel.tools.run_tool`), and
every request passes again at the boundary where it leaves (:mod:`shiro_kernel.provider.client`).

What is replaced, by ``[redacted:NAME]``:

* the configured API key (``OPENAI_API_KEY``);
* the secrets shiro itself holds, registered by name with :func:`add_secret` (the ``/mcp serve`` bearer
  token, ``[redacted:SHIRO_MCP_TOKEN]``) until :func:`remove_secret`;
* the value of every environment variable whose name looks secret — it contains ``KEY``, ``TOKEN``,
  ``SECRET``, ``PASSWORD``, ``PASSWD`` or ``CREDENTIAL`` (any case) — when the value has 8 or more
  characters (shorter values are too likely to occur by chance) and is not a plain word (:func:`plain`:
  ``PRIMARY_KEY=customer_id`` names a column, it is no secret; such a value is skipped and said once,
  :func:`notices`);
* each of those secrets in every form text shows it in (:func:`forms`): its ``repr`` (``ab\\cd`` for
  ``ab\cd``, as a ``KeyError`` shows it, quotes escaped or not), its JSON (``json.dumps``: ``\u00e4`` for
  ``ä``, ``\"``, ``\n``), the ``repr`` of its UTF-8 bytes, its HTML escape, those forms escaped once more
  (JSON inside JSON, a repr of JSON), and each line of a multi-line value (a PEM key line by line);
* values shaped like a key wherever they come from (a DataFrame cell, a ``.env`` file never loaded):
  ``sk-…`` and ``sk-proj-…`` API keys (``[redacted:api-key]``), ``ghp_…``/``gho_…``/``github_pat_…``
  (``[redacted:github-token]``), ``AKIA…``/``ASIA…`` AWS key ids (``[redacted:aws-key-id]``), ``xoxb-…``/
  ``xoxp-…`` Slack tokens (``[redacted:slack-token]``), ``hf_…`` (``[redacted:huggingface-token]``),
  ``AIza…`` Google keys (``[redacted:google-api-key]``) and PEM private keys, ``-----BEGIN … PRIVATE
  KEY-----`` to ``-----END … PRIVATE KEY-----`` (``[redacted:private-key]``);
* the value of a ``NAME=value`` line (a ``.env`` file, ``export NAME=…``) whose name looks secret, unless the
  value is a plain word, a number or code (``[redacted:NAME]``): a ``.env`` file that was never loaded;
* matches of the regular expressions in ``Shiro.redact`` (``[redacted:pattern]``);
* the password of a URL (``https://user:[redacted]@host``) and the values of URL query parameters named
  like a secret (``?token=[redacted]``, ``X-Amz-Signature=[redacted]``);
* a piece of a secret (6+ characters) that a tool's own truncation left at a cut — right before or after
  a ``...``/``…`` marker or at either end of the text — since a tool may shorten its output before the
  filter sees it.

The same secret always becomes the same placeholder (a request's prefix stays byte-stable). All the
secrets' forms and the key shapes are one compiled regular expression — the forms as a trie, so a position
costs one branch whatever the number of secrets — built when the secrets or patterns change and cached.
The environment is read at each call (a variable set in the notebook counts at once). A secret that was
transformed otherwise (base64, hashed, split mid-line, URL-encoded) is not recognised.
"""

from __future__ import annotations

import html
import json
import os
import re
import threading
from collections.abc import Iterable, Mapping
from functools import lru_cache

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
#: a line that sets a variable named like a secret, as a ``.env`` file, a shell or an INI file writes it
#: (``export DB_PASSWORD="hunter2hunter2"``; after a line number, as ``read_file`` shows it): the value, unless it is a plain word, a number or code (brackets, ``$``)
_ASSIGNMENT = re.compile(
    r"^([ \t]*(?:[0-9]+[ \t:|]+)?(?:export[ \t]+)?([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*=[ \t]*)(['\"]?)([^\s'\"()\[\]{}$]{8,})(\3[ \t]*\r?)$",
    re.MULTILINE,
)
_NUMBER = re.compile(r"[-+]?[0-9][0-9_.,]*(?:[eE][-+]?[0-9]+)?")

#: the shortest piece of a secret, left at a truncation point, that is still redacted
FRAGMENT_CHARS = 6
# what follows a head that was cut, and what precedes a tail that was kept (a repr may quote the pieces)
_CUT_AFTER = tuple(q + m for q in ("", "'", '"') for m in ("...", "\u2026", "\n[...", "\n[\u2026"))
_CUT_BEFORE = tuple(m + q for q in ("", "'", '"', "b'", 'b"') for m in ("...", "\u2026", "...]\n", "\u2026]\n"))

#: a plain word: letters in words joined by ``_ - . / : `` or spaces, no digit, the case changing at most once
#: in three letters (``customer_id``, ``sortOrder``, ``solarized-dark``); anything else of 8+ characters is a
#: secret when its variable's name says so (``hunter2hunter2``, ``Tr0ub4dor&3``, ``aBcDeFgHiJ``)
_PLAIN = re.compile(r"[ _./:-]*[A-Za-z]+(?:[ _./:-]+[A-Za-z]+)*[ _./:-]*")
_CASE_CHANGE = re.compile(r"[a-z](?=[A-Z])|[A-Z](?=[a-z])")

#: values shaped like a key, redacted wherever they come from: ``(placeholder name, expression)``. Each
#: expression starts with a literal character (its "not inside a longer word" check comes after it), so the
#: compiled alternation skips every position whose character starts no secret and no shape.
SHAPES: tuple[tuple[str, str], ...] = (
    ("api-key", r"s(?<![A-Za-z0-9_-]s)k-(?=[A-Za-z0-9_-]*[0-9])[A-Za-z0-9_-]{20,}"),
    ("github-token", r"g(?<![A-Za-z0-9_]g)(?:h[pousr]_[A-Za-z0-9]{20,}|ithub_pat_[A-Za-z0-9_]{20,})"),
    ("aws-key-id", r"A(?<![A-Za-z0-9]A)(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])"),
    ("slack-token", r"x(?<![A-Za-z0-9]x)ox[abposr]-(?=[A-Za-z0-9-]*[0-9])[A-Za-z0-9-]{10,}"),
    ("huggingface-token", r"h(?<![A-Za-z0-9_]h)f_(?=[a-z]*[A-Z0-9])[A-Za-z0-9]{30,}"),
    ("google-api-key", r"A(?<![A-Za-z0-9_-]A)Iza[0-9A-Za-z_-]{35}"),
    # a whole block (up to its END line, escaped newlines and all), or what is left of one that was cut
    (
        "private-key",
        r"-(?<!--)----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[\s\S]{0,20000}?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:\s|\\+[nr]|[A-Za-z0-9+/=])*)",
    ),
)
_SHAPES = tuple((name, re.compile(pattern)) for name, pattern in SHAPES)

_extra: tuple[str, ...] = ()
#: the patterns an administrator's policy always redacts (:func:`set_floor`), whatever ``Shiro.redact`` says
_floor: tuple[str, ...] = ()
#: ``(name, value)`` of the secrets registered with :func:`add_secret`, sorted (replaced whole, never changed
#: in place: turns on other threads read it while the kernel's thread registers a token)
_held: tuple[tuple[str, str], ...] = ()
_cache_lock = threading.Lock()
_cache: tuple[tuple[tuple[str, str], ...], tuple[str, ...], re.Pattern[str], dict[str, str], _Pieces] | None = None


def set_patterns(patterns: Iterable[str]) -> None:
    """The extra patterns (``Shiro.redact``). Raises ``re.error`` for one that does not compile."""
    global _extra
    new = tuple(patterns)
    for pattern in new:
        re.compile(pattern)
    _extra = new


def set_floor(patterns: Iterable[str]) -> None:
    """The patterns the policy redacts (:func:`~shiro_kernel.policy.redact_floor`), applied before the user's."""
    global _floor
    _floor = tuple(patterns)


def patterns() -> tuple[str, ...]:
    """Every extra pattern redacted: the policy's, then ``Shiro.redact``'s."""
    return _floor + tuple(p for p in _extra if p not in _floor)


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


def plain(value: str) -> bool:
    """Whether ``value`` is a plain word or identifier, not a secret (see :data:`_PLAIN`)."""
    if not _PLAIN.fullmatch(value):
        return False
    letters = sum(c.isalpha() for c in value)
    return len(_CASE_CHANGE.findall(value)) * 3 <= letters


def _scan(env: Mapping[str, str]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The environment's ``(name, value)`` secrets, and those whose values are plain words (skipped)."""
    found: list[tuple[str, str]] = []
    skipped: list[tuple[str, str]] = []
    for name in sorted(env):
        value = env.get(name) or ""
        if name != API_KEY_VAR and len(value) >= MIN_CHARS and SECRET_NAME.search(name):
            (skipped if plain(value) else found).append((name, value))
    return found, skipped


def secrets(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``(name, value)`` of every secret: the API key first, then those registered with :func:`add_secret`,
    then the environment's by name (its plain words left out: :func:`skipped`)."""
    env = os.environ if environ is None else environ
    found: list[tuple[str, str]] = []
    key = env.get(API_KEY_VAR)
    if key and len(key) >= MIN_CHARS:
        found.append((API_KEY_VAR, key))
    found += _held
    return found + _scan(env)[0]


def skipped(environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """``(name, value)`` of the environment variables named like a secret whose values are plain words
    (:func:`plain`), which are not redacted."""
    return _scan(os.environ if environ is None else environ)[1]


_said_lock = threading.Lock()
_said: set[tuple[str, str]] = set()


def notices(environ: Mapping[str, str] | None = None) -> list[str]:
    """What to tell the user, once per variable and value in this process: the variables named like a secret
    whose plain-word values are sent as they are (the value itself is not repeated)."""
    with _said_lock:
        new = [item for item in skipped(environ) if item not in _said]
        _said.update(new)
    if not new:
        return []
    names = ", ".join(name for name, _ in new)
    many = len(new) > 1
    return [
        f"{names} {'are' if many else 'is'} named like a secret but {'their values are' if many else 'its value is'} "
        f"a plain word, so {'they are' if many else 'it is'} not redacted (add a pattern with "
        "%config Shiro.redact to redact it anyway)"
    ]


def _lines(value: str) -> list[str]:
    """The lines of a multi-line value that are secret on their own (a PEM key's body, not its BEGIN line)."""
    if "\n" not in value and "\r" not in value:
        return []
    out = []
    for line in value.splitlines():
        line = line.strip()
        if len(line) >= MIN_CHARS and not line.startswith("-----") and not plain(line):
            out.append(line)
    return out


def escaped(piece: str) -> set[str]:
    """The forms one string takes inside a ``repr``, JSON, bytes' ``repr`` or HTML (quotes not included)."""
    single = repr(piece + "'\"")[1:-4]  # as inside a repr that escapes its single quotes (the piece has both)
    return {
        piece,
        repr(piece)[1:-1],
        single,
        repr(piece.encode("utf-8", "surrogatepass"))[2:-1],
        json.dumps(piece)[1:-1],
        json.dumps(piece, ensure_ascii=False)[1:-1],
        html.escape(piece),
        html.escape(piece, quote=False),
    }


@lru_cache(maxsize=1024)
def forms(value: str) -> frozenset[str]:
    """Every form of the secret ``value`` that is redacted: the value and each secret line of it, each as it
    shows raw, in a ``repr``, in JSON, in a bytes' ``repr``, in HTML, and each of those escaped once more
    (JSON inside JSON, the repr of a JSON text); forms shorter than :data:`MIN_CHARS` are left out."""
    out: set[str] = set()
    for piece in (value, *_lines(value)):
        first = escaped(piece)
        out |= first
        for form in first:
            if "\\" in form or '"' in form or "'" in form:
                out.add(json.dumps(form)[1:-1])
                out.add(repr(form)[1:-1])
    return frozenset(form for form in out if len(form) >= MIN_CHARS)


#: a trie node: each next character's node; ``""`` marks the end of a word
_Node = dict[str, "_Node"]


def _trie(words: Iterable[str]) -> list[str]:
    """The top-level alternatives of a regular expression matching any of ``words``, the longest where
    several match at one place: a trie, so each alternative starts with its own literal character."""
    root: _Node = {}
    for word in words:
        node = root
        for ch in word:
            node = node.setdefault(ch, {})
        node[""] = {}
    return [re.escape(ch) + _emit(child) for ch, child in sorted(root.items())]


def _emit(node: _Node) -> str:
    chain = []
    while len(node) == 1 and "" not in node:  # a run with no branch (most of a long secret): plain text
        ((ch, node),) = node.items()
        chain.append(re.escape(ch))
    branches = [re.escape(ch) + _emit(child) for ch, child in sorted(node.items()) if ch]
    if not branches:
        tail = ""
    elif len(branches) == 1:
        tail = f"(?:{branches[0]})?" if "" in node else branches[0]
    else:
        tail = f"(?:{'|'.join(branches)}){'?' * ('' in node)}"
    return "".join(chain) + tail


def _compiled(found: list[tuple[str, str]], extra: tuple[str, ...]) -> tuple[re.Pattern[str], dict[str, str], _Pieces]:
    """The one expression for every form of every secret and every key shape, each form's name, and where
    their pieces start."""
    global _cache
    key = tuple(found)
    with _cache_lock:
        if _cache is not None and _cache[0] == key and _cache[1] == extra:
            return _cache[2], _cache[3], _cache[4]
        names: dict[str, str] = {}
        for name, value in found:  # the first name wins for a value (or a form) several secrets share
            names.setdefault(value, name)
            for form in sorted(forms(value)):
                names.setdefault(form, name)
        # the secrets' forms first: a key in the environment goes under its own name, not its shape's
        pattern = re.compile("|".join([*_trie(names), *(shape for _, shape in SHAPES)]))
        pieces = _Pieces(names)
        _cache = (key, extra, pattern, names, pieces)
        return pattern, names, pieces


def _shape(text: str) -> str:
    """The placeholder name of a key-shaped match."""
    return next((name for name, shape in _SHAPES if shape.fullmatch(text)), "key")


def redact(text: str, environ: Mapping[str, str] | None = None) -> str:
    """``text`` with every secret replaced (see the module docstring)."""
    if not text:
        return text
    extras = patterns()
    pattern, names, pieces = _compiled(secrets(environ), extras)
    text = pattern.sub(lambda m: f"[redacted:{names.get(m.group(0)) or _shape(m.group(0))}]", text)
    text = _fragments(text, pieces)
    for extra in extras:
        text = re.sub(extra, "[redacted:pattern]", text)
    if "://" in text and "@" in text:
        text = _URL_PASSWORD.sub(r"\1[redacted]\3", text)
    if "=" in text:
        text = _SECRET_QUERY.sub(r"\1[redacted]", text)
        text = _ASSIGNMENT.sub(_assigned, text)
    return text


def _assigned(m: re.Match[str]) -> str:
    """A ``NAME=value`` line with the value redacted when the name looks secret and the value is not a plain word."""
    name, value = m.group(2), m.group(4)
    if not SECRET_NAME.search(name) or plain(value) or _NUMBER.fullmatch(value) or value.startswith("[redacted"):
        return m.group(0)
    return f"{m.group(1)}{m.group(3)}[redacted:{name}]{m.group(5)}"


class _Pieces:
    """Where the pieces of secrets a cut may leave start: every :data:`FRAGMENT_CHARS`-character head and tail
    of each form, found by one expression (searched again from the next character after each hit, so
    overlapping ones are all found) only near the places a piece may be: the text's two ends and its cut
    markers."""

    def __init__(self, names: dict[str, str]) -> None:
        self.heads: dict[str, list[tuple[str, str]]] = {}
        self.tails: dict[str, list[tuple[str, str]]] = {}
        for value, name in names.items():
            if len(value) > FRAGMENT_CHARS:
                self.heads.setdefault(value[:FRAGMENT_CHARS], []).append((value, name))
                self.tails.setdefault(value[-FRAGMENT_CHARS:], []).append((value, name))
        alternatives = _trie({*self.heads, *self.tails})
        self.starts = re.compile("|".join(alternatives)) if alternatives else None
        #: how far from a cut a piece's head or tail may start
        self.reach = max(map(len, names), default=0) + 4

    def windows(self, text: str) -> list[tuple[int, int]]:
        """The merged stretches of ``text`` within :attr:`reach` of its ends and of each cut marker."""
        marks = [0, len(text)]
        for marker in ("...", "\u2026"):
            i = text.find(marker)
            while i != -1:
                marks.append(i)
                i = text.find(marker, i + len(marker))
        out: list[tuple[int, int]] = []
        for mark in sorted(marks):
            start, end = max(0, mark - self.reach), min(len(text), mark + self.reach)
            if out and start <= out[-1][1]:
                out[-1] = (out[-1][0], end)
            else:
                out.append((start, end))
        return out


def _starts(text: str, starts: re.Pattern[str], windows: list[tuple[int, int]]) -> Iterable[int]:
    """Where ``starts`` matches in the ``windows`` of ``text``, overlapping matches included."""
    for begin, end in windows:
        m = starts.search(text, begin, end)
        while m is not None:
            yield m.start()
            m = starts.search(text, m.start() + 1, end)


def _fragments(text: str, pieces: _Pieces) -> str:
    """Redact the pieces of secrets that a truncation left at a cut (see the module docstring)."""
    if pieces.starts is None:
        return text
    spans: list[tuple[int, int, str]] = []
    for i in _starts(text, pieces.starts, pieces.windows(text)):
        six = text[i : i + FRAGMENT_CHARS]
        for value, name in pieces.heads.get(six, ()):  # a head of the value, cut off after n characters
            n = FRAGMENT_CHARS
            while n < len(value) and i + n < len(text) and text[i + n] == value[n]:
                n += 1
            if text.startswith(_CUT_AFTER, i + n) or i + n == len(text):
                spans.append((i, i + n, name))
        for value, name in pieces.tails.get(six, ()):  # a tail of the value, its first characters cut off
            end, n = i + FRAGMENT_CHARS, FRAGMENT_CHARS
            while n < len(value) and end - n - 1 >= 0 and text[end - n - 1] == value[-n - 1]:
                n += 1
            start = end - n
            if start == 0 or text.endswith(_CUT_BEFORE, 0, start):
                spans.append((start, end, name))
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
    "SHAPES",
    "add_secret",
    "escaped",
    "forms",
    "notices",
    "patterns",
    "plain",
    "redact",
    "remove_secret",
    "secrets",
    "set_patterns",
    "skipped",
    "subprocess_env",
]
