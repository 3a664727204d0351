"""The model's text made inert for every static rendering (issue 23): whatever the notebook's trust, the
answer, tool rows, notices and errors show as text in Markdown, HTML and plain text.

* :func:`inert_markdown` keeps ordinary Markdown (emphasis, lists, tables, code, http/https/mailto links)
  but escapes anything that could open an HTML tag, points a link with another scheme (``javascript:``,
  ``data:text/html``…) at ``#``, and turns every image into a link to it (:data:`IMAGE_LINK`: an image
  would be fetched with no click, a channel out for whatever the model put in its URL — issue 33); code
  fences keep their raw text only where every renderer agrees on them, and math delimiters (which
  JupyterLab pulls out before parsing) cannot hide a fence;
* :func:`inert_line` is the same for one-line fields (a tool's arguments, a notice), :func:`plain_text`
  for the terminal (control characters replaced);
* :func:`md_to_html` is Markdown to HTML with raw HTML escaped, the same URL rule and images as links (an
  inline ``data:`` image, which loads nothing, still draws), :func:`md_code` inline code that holds no markup.

What approved code displayed is not passed through here: it keeps the trust a cell output has.
"""

from __future__ import annotations

import html
import re
from typing import Any

_TAG_OPEN = re.compile(r"<(?=[A-Za-z/!?])")
_LINK_TARGET = re.compile(r"\](?:\(|:)[ \t]*(?:\r?\n[ \t]*)?<?")
_PLAIN_SCHEMES = frozenset({"http", "https", "mailto"})
_IMAGE_DATA = re.compile(r"data:image/(?:png|gif|jpeg|webp)[;,]")
_BACKSLASH_ESCAPE = re.compile(r"\\([!-/:-@\[-`{-~])")
_FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,})(.*)$")
_CONTAINER_FENCE = re.compile(r"^[ \t]*(?:(?:>|[-*+]|\d{1,9}[.)])[ \t]*)+(`{3,}|~{3,})")
#: what an image of the model's text becomes, before its alt text: ``![chart](https://…)`` is the link
#: ``[image: chart](https://…)``, which the user may follow (nothing is fetched until then)
IMAGE_LINK = "image: "


def plain_url(url: str) -> bool:
    """May the model's text link to (or show an image from) ``url``? Relative URLs, http, https and mailto,
    and inline PNG/GIF/JPEG/WebP images; read as a browser reads an attribute (entities and Markdown
    escapes decoded, controls and spaces ignored, any case), so ``JaVa&#115;cript&colon;`` is refused."""
    u = _bare_url(url)
    match = re.match(r"([a-z][a-z0-9+.\-]*):", u)
    if match is None:
        return True
    if match.group(1) == "data":
        return _IMAGE_DATA.match(u) is not None
    return match.group(1) in _PLAIN_SCHEMES


def _inert_targets(text: str) -> str:
    """A ``#`` before each link target (``[x](…)``, ``[x]: …``) that is not a plain URL."""
    out: list[str] = []
    last = 0
    for m in _LINK_TARGET.finditer(text):
        start = m.end()
        target = re.match(r"[^\s)>]*", text[start:])
        if target and not plain_url(target.group(0)):
            out.append(text[last:start])
            out.append("#")
            last = start
    out.append(text[last:])
    return "".join(out)


def _entities(text: str) -> str:
    """Every ASCII punctuation character as a numeric entity: inert as Markdown and as HTML."""
    return "".join(f"&#{ord(c)};" if c.isascii() and not c.isalnum() and c != " " else c for c in text)


def md_code(text: str) -> str:
    """``text`` as inline code that shows exactly ``text`` and can hold no markup: a backtick span when that
    is safe, else ``<code>`` with entities."""
    flat = " ".join(text.splitlines())
    if "`" in flat or _TAG_OPEN.search(flat) or not flat.strip():
        return f"<code>{_entities(flat)}</code>" if flat.strip() else ""
    return f"`{flat}`"


def _escaped(line: str, i: int) -> bool:
    """Is ``line[i]`` escaped by a backslash (an odd run of them before it)?"""
    j = i
    while j > 0 and line[j - 1] == "\\":
        j -= 1
    return (i - j) % 2 == 1


def _inert_spans(line: str) -> str:
    """One line of prose: `<` escaped, ``![`` made a link (:data:`IMAGE_LINK`), code spans holding either
    rewritten (:func:`md_code`)."""
    out: list[str] = []
    i, n = 0, len(line)
    while i < n:
        c = line[i]
        if c == "\\" and i + 1 < n and line[i + 1] == "`":  # an escaped backtick opens no span
            out.append(line[i : i + 2])
            i += 2
        elif c == "`":
            run = len(line[i:]) - len(line[i:].lstrip("`"))
            closer = re.compile(rf"(?<!`){'`' * run}(?!`)").search(line, i + run)
            if closer is None:
                out.append("`" * run)
                i += run
                continue
            content = line[i + run : closer.start()]
            # a span this scan pairs on one line may not be one for the renderer (a span across lines): one
            # holding markup is written so that it is inert either way
            if _TAG_OPEN.search(content) or "![" in content:
                if content.startswith(" ") and content.endswith(" ") and content.strip():
                    content = content[1:-1]
                out.append(f"<code>{_entities(content)}</code>")
            else:
                out.append(line[i : closer.end()])
            i = closer.end()
        elif c == "<" and _TAG_OPEN.match(line, i):
            out.append("&lt;")
            i += 1
        elif c == "!" and line.startswith("[", i + 1) and not _escaped(line, i):
            out.append("[" + IMAGE_LINK)  # an image would load with no click: a link to it instead
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _inert_prose(text: str) -> str:
    return "".join(_inert_spans(line) for line in _inert_targets(text).splitlines(keepends=True))


def _columns(lead: str) -> int:
    col = 0
    for c in lead:
        col = col + 4 - col % 4 if c == "\t" else col + 1
    return col


class _FenceScan:
    """Which lines of the model's Markdown are inside a fenced code block, as sure as any renderer
    (CommonMark, marked in JupyterLab, markdown-it) would agree: a fence opens at a line of 3+ backticks or
    tildes indented 0-3 spaces (4+ only after a blank line: an indented code block then, or a fence in a
    list item — code either way), and closes at a closing fence indented at most as far as it, up to 3.
    A line that could end it for one renderer and not another (less indented: a list item may have ended;
    a fence behind a list marker or `>`; a closing fence marked alone accepts; tabs) makes the scan unsure,
    and the rest of the text is then prose, escaped."""

    def __init__(self) -> None:
        self.fence: tuple[str, int, int] | None = None  # (character, length, indentation)
        self.unsure = False
        self.blank_before = True

    def inside(self, line: str) -> bool | None:
        """True: a line of code (kept as is); False: prose; None: a fence line (kept as is)."""
        body = line.rstrip("\r\n")
        blank = not body.strip()
        try:
            if self.unsure:
                return False
            lead = body[: len(body) - len(body.lstrip(" \t"))]
            stripped, indent = body[len(lead) :], _columns(lead)
            if self.fence is not None:
                return self._in_fence(stripped, lead, indent, blank)
            m = _FENCE.match(body)
            if m and not (m.group(2)[0] == "`" and "`" in m.group(3)):
                if "\t" in lead or (indent > 3 and not self.blank_before):
                    self.unsure = True
                    return False
                self.fence = (m.group(2)[0], len(m.group(2)), indent)
                return None
            if _CONTAINER_FENCE.match(body):
                self.unsure = True
            return False
        finally:
            self.blank_before = blank

    def _in_fence(self, stripped: str, lead: str, indent: int, blank: bool) -> bool | None:
        assert self.fence is not None
        char, length, opened = self.fence
        if blank:
            return True
        closing = re.fullmatch(rf"{re.escape(char)}{{{length},}}[ \t]*", stripped) is not None
        closing_in_marked = re.match(rf"{re.escape(char * length)}[~`]*[ \t]*$", stripped) is not None
        if indent < opened or "\t" in lead:
            self.unsure, self.fence = True, None
            return False
        if closing and opened <= indent <= max(3, opened):
            self.fence = None
            return None
        if (closing or closing_in_marked) and indent <= opened + 3:
            self.unsure, self.fence = True, None
            return False
        return True

    def close(self) -> str:
        """The closing fence to add when the text ended inside a block ('' otherwise)."""
        if self.fence is None:
            return ""
        char, length, opened = self.fence
        return " " * opened + char * length


#: what starts math for JupyterLab, which takes math out of the Markdown before parsing it (up to a blank line)
_MATH = re.compile(r"\$|\\\\[(\[]|\\begin\{")


def inert_markdown(text: str) -> str:
    """The model's Markdown with nothing any renderer would run or turn into markup; ordinary Markdown
    (emphasis, lists, tables, code, links to http/https/mailto) unchanged."""
    scan = _FenceScan()
    # JupyterLab lifts `$…$` (and \\( \\[ \\begin) out of the source before Markdown sees it, across
    # single line breaks: math around a fence line would hide it from the parser. A blank line before each
    # fence and after it stops that (math never crosses one); only added when the text has such delimiters.
    math = _MATH.search(text) is not None
    out: list[str] = []
    prose: list[str] = []
    lines = text.splitlines(keepends=True)
    for index, line in enumerate(lines):
        kind = scan.inside(line)
        if kind is False:
            prose.append(line)
            continue
        out.append(_inert_prose("".join(prose)))
        prose = []
        if kind is None:  # a fence line: its info string is text in an attribute; escape it all the same
            if math and index > 0 and lines[index - 1].strip() and scan.fence is not None:
                out.append("\n")
            out.append(_TAG_OPEN.sub("&lt;", line).replace("$", "\\$"))
            if math and scan.fence is None and index + 1 < len(lines) and lines[index + 1].strip():
                out.append("\n")
        else:
            out.append(line)
    out.append(_inert_prose("".join(prose)))
    end = scan.close()
    if end:  # so that no block runs on into what follows this text
        out.append(("" if "".join(out).endswith("\n") else "\n") + end)
    return "".join(out)


def inert_line(text: str) -> str:
    """A one-line piece of model text (a notice, an error, a tool's progress) for a Markdown line: on one
    line, so it can open no block, and inert like :func:`inert_markdown`'s prose."""
    return _inert_prose(" ".join(text.splitlines()))


_CONTROLS = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def plain_text(text: str) -> str:
    """Model text for a terminal or text/plain: control characters (ESC and the rest, which a terminal would
    obey: colours, cursor moves, hyperlinks, clipboard writes) shown as U+FFFD; line breaks kept."""
    return _CONTROLS.sub("\ufffd", text.replace("\r\n", "\n"))


_MARKDOWN: dict[bool, Any] = {}


def md_to_html(text: str, *, images: bool = False) -> str:
    """Markdown to HTML with mistune (installed with Jupyter Server's nbconvert), else escaped text. Raw
    HTML is escaped (shown, never injected) and a link or image whose URL is not :func:`plain_url` points
    at ``#harmful-link``, whatever mistune's own rule in the installed version. An image is a link to it
    (``image: <alt>``), unless it is inline data (which loads nothing); a link into the page has no title,
    and one to shiro's own anchors (``#shiro-call-…``, where a found number's mark leads) leads nowhere. With
    ``images`` (Markdown the user's approved code displayed), images and links are drawn as a cell would."""
    try:
        import mistune
    except ImportError:
        return f'<pre style="white-space:pre-wrap">{html.escape(text)}</pre>'
    if images not in _MARKDOWN:
        _MARKDOWN[images] = mistune.create_markdown(
            renderer=_renderer(mistune.HTMLRenderer, images)(escape=True), plugins=["table", "strikethrough"]
        )
    return str(_MARKDOWN[images](text))


def _renderer(base: Any, images: bool) -> Any:
    class Renderer(base):  # type: ignore[misc]
        def safe_url(self, url: str) -> str:
            return str(super().safe_url(url)) if plain_url(url) else "#harmful-link"

        def link(self, text: str, url: str, title: str | None = None) -> str:
            # a link into the page gets no title, and none leads to shiro's own anchors: a found number's mark
            # is such a link, titled with where the number was found (nothing of the model's text passes for it)
            if images:  # Markdown the approved code displayed: as a cell draws it
                return str(super().link(text, url, title))
            fragment = _bare_url(url).startswith("#")
            target = "#" if _bare_url(url).startswith("#shiro-") else url
            return str(super().link(text, target, None if fragment else title))

        def image(self, text: str, url: str, title: str | None = None) -> str:
            if images or _IMAGE_DATA.match(_bare_url(url)):
                return str(super().image(text, url, title))
            return str(self.link(html.escape(IMAGE_LINK) + text, url, title))

    return Renderer


def _bare_url(url: str) -> str:
    """``url`` as a browser reads an attribute: entities and Markdown escapes decoded, controls and spaces
    gone, lower case."""
    u = _BACKSLASH_ESCAPE.sub(r"\1", html.unescape(url))
    return re.sub(r"[\x00-\x20\x7f]", "", u).lower()
