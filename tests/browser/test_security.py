"""The model's text never runs as script, in a real JupyterLab and Chromium, whatever the notebook's trust
(issue 23, point 1): HTML and script URLs in an answer, a tool row's code and output, a notice or an error
are sanitized, shown as text or made inert in every rendering — the live widget view, the labextension's
rendering of the final bundle, and the ``text/markdown`` and ``text/html`` renderings JupyterLab draws when
the extension is absent — live and after the notebook is saved, closed and reopened (trusted). What the
user's approved ``python`` call displayed keeps a cell output's trust: its figure, its DataFrame, its HTML.

Every vector carries an id ``<where>~<vector>~<form>``. Its script, if it ever ran, requests
``/shiro-pwned/<id>`` (seen on the whole browser context, so a script in an iframe or a new window counts
too) and sets ``top['__pwned_<id>']``; ``img-onerror`` also writes a file through ``/api/contents``, as the
issue's reproduction does. Every link or button a vector draws is clicked. A vector that left a script URL
or a command link in the page counts as run even when no click ran it.
"""

from __future__ import annotations

import html
import json
import re
import time
from typing import Any

import pytest
from conftest import Lab  # tests/browser/conftest.py (its folder is on sys.path)
from fakeopenai import Call, Reply
from faultlog import record
from labutil import cell_output, open_notebook, save_notebook, shot, write_notebook

pytestmark = pytest.mark.timeout(240)

NOTEBOOK = "security.ipynb"
#: the cell holding the %shiro turn, and the cell showing the kernel's own Markdown and HTML renderings
TURN_CELL, BUNDLE_CELL = 2, 3
ID = re.compile(r"(?:a1|a2|turn|md|html)~[a-z-]+~[a-z]+")


def beacon(lab: Lab, vid: str) -> str:
    """JavaScript that proves vector ``vid`` ran. The URL is cut in two so that no renderer loads or links it
    as plain text: only running the script requests it."""
    return f"new Image().src='{lab.url}/shiro-'+'pwned/{vid}';top['__pwned_{vid}']=1"


def vectors(lab: Lab, where: str, form: str) -> dict[str, str]:
    """The vectors of one answer, by name; ``where`` names the answer, ``form`` how it is written."""

    def js(name: str) -> str:
        return beacon(lab, f"{where}~{name}~{form}")

    def url_js(name: str) -> str:  # in a URL: no spaces (a Markdown link target); %20 is decoded when it runs
        return js(name).replace(" ", "%20")

    body = "JSON.stringify({type:'file',format:'text',content:'x'})"
    put = f"fetch('/api/contents/pwned-{where}-{form}.txt',{{method:'PUT',body:{body}}})"  # the repro
    args = json.dumps({"id": f"{where}~command-link~{form}"}).replace('"', "&quot;")
    return {
        "img-onerror": f'<img src=x onerror="{js("img-onerror")};{put}">',
        "script": f"<script>{js('script')}</script>",
        "iframe-srcdoc": f'<iframe srcdoc="<script>{js("iframe-srcdoc")}</script>"></iframe>',
        "svg-onbegin": f'<svg><animate onbegin="{js("svg-onbegin")}" attributeName="x" dur="1s"/></svg>',
        "svg-onload": f'<svg onload="{js("svg-onload")}"><circle r="4"/></svg>',
        "md-js-link": f"[x-md-js-link](javascript:void({url_js('md-js-link')}))",
        "md-entity-js-link": f"[x-md-entity-js-link](JaVa&#115;cript&#58;void({url_js('md-entity-js-link')}))",
        "a-js-href": f'<a href="javascript:void({js("a-js-href")})">x-a-js-href</a>',
        "a-data-html": f'<a href="data:text/html,%3Cscript%3E{url_js("a-data-html")}%3C/script%3E">x-a-data-html</a>',
        "command-link": f'<button data-commandlinker-command="help:about" data-commandlinker-args="{args}">'
        "x-command-link</button>",
        "tex-href": f"$\\href{{javascript:void({url_js('tex-href')})}}{{x-tex-href}}$",
        # JupyterLab lifts math out before parsing Markdown: math around a fence line hides it from marked
        "math-fence": f'$ math\n   ```\n   $ <img src=x onerror="{js("math-fence")}">\n   ```',
    }


def answer(lab: Lab, where: str) -> str:
    """An answer with each vector twice — inline after a label, and alone as a block — and ordinary
    Markdown, which must still render."""
    inline = "\n\n".join(f"{name}: {v}" for name, v in vectors(lab, where, "i").items())
    blocks = "\n\n".join(vectors(lab, where, "b").values())
    return (
        f"Here, **bold {where}** and `a < b` in code.\n\n{inline}\n\n{blocks}\n\n"
        "| region | sales |\n|---|---|\n| north | 3 |\n\n"
        "~~~html\n<b>shown as code</b>\n~~~\n\n"
        f"[a real link](https://example.com/{where})"
    )


def per_answer(lab: Lab) -> int:
    return 2 * len(vectors(lab, "", ""))


#: a turn's other entries with model text in them: the call's arguments, an error result, a notice, an error
ENTRY_VECTORS = ("tool-args", "refusal", "notice", "error")


def tool_code(lab: Lab) -> str:
    """The approved call: a vector in its code and one in its output, then real displays."""
    return (
        "import matplotlib.pyplot as plt\n"
        "import pandas as pd\n"
        "from IPython.display import HTML, display\n"
        f'# <img src=x onerror="{beacon(lab, "turn~tool-code~i")}">\n'
        f"print('<img src=x onerror=\"' + \"{beacon(lab, 'turn~tool-output~i')}\" + '\">')\n"
        "display(pd.DataFrame({'region': ['north', 'south'], 'sales': [3, 5]}))\n"
        'display(HTML(\'<b class="approved-html">approved</b>'
        "<script>top.__approved = (top.__approved || 0) + 1</script>'))\n"
        "plt.plot([1, 2, 3], [1, 4, 9])\n"
        "plt.show()"
    )


def bundle_cell(lab: Lab) -> str:
    """A cell drawing the kernel's own Markdown and HTML of a turn with vectors in every kind of entry, as
    plain outputs: what JupyterLab or Notebook 7 shows when the labextension is absent (the cell was run, so
    the outputs are trusted: JupyterLab does not sanitize them)."""
    logs = {}
    for where in ("md", "html"):
        v = {name: f'<img src=x onerror="{beacon(lab, f"{where}~{name}~i")}">' for name in ENTRY_VECTORS}
        logs[where] = {
            "text": answer(lab, where),
            "code": f"x = 1  # {v['tool-args']}",
            "refusal": "Error: " + v["refusal"],
            "notice": v["notice"],
            "error": v["error"],
        }
    return (
        "import json\n"
        "from shiro_kernel.events import Notice, TextDelta, ToolEnd, ToolStart, TurnEnd, Usage\n"
        "from shiro_kernel.transcript import ToolCallPart, ToolResultPart\n"
        "from shiro_kernel.ui.render import TurnLog, to_html, to_markdown\n"
        "def turn_log(e):\n"
        "    log = TurnLog()\n"
        "    log.feed(TextDelta(e['text']))\n"
        "    call = ToolCallPart('c1', 'python', json.dumps({'code': e['code']}))\n"
        "    log.feed(ToolStart(call))\n"
        "    log.feed(ToolEnd(call, ToolResultPart('c1', 'python', e['refusal'], is_error=True), 0.1))\n"
        "    log.feed(Notice(e['notice']))\n"
        "    log.feed(TurnEnd('error', Usage(), error=e['error']))\n"
        "    return log\n"
        f"logs = {logs!r}\n"
        "display({'text/markdown': to_markdown(turn_log(logs['md']))}, raw=True)\n"
        "display({'text/html': to_html(turn_log(logs['html']))}, raw=True)"
    )


class Watch:
    """Which vectors ran: requests for /shiro-pwned/ from any page or frame of the browser context, the
    page's ``__pwned_*`` flags, the files ``img-onerror`` would write, script URLs and command links left in
    an area, the About dialog a command link opens when clicked."""

    def __init__(self, page: Any, lab: Lab) -> None:
        self.page, self.lab = page, lab
        self.seen: set[str] = set()
        page.context.on("request", self._request)

    def _request(self, request: Any) -> None:
        if "/shiro-pwned/" in request.url:
            self.seen.add(request.url.rsplit("/", 1)[-1].replace("%7E", "~"))

    def collect(self) -> set[str]:
        flags = self.page.evaluate("Object.keys(window).filter(k => k.startsWith('__pwned_'))")
        self.seen |= {f[len("__pwned_") :] for f in flags}
        for path in self.lab.root.glob("pwned-*"):
            where, form = path.stem.split("-")[1:]
            self.seen.add(f"{where}~img-onerror~{form}")
        return set(self.seen)

    def check(self, area: Any, where: str) -> int:
        """Look at ``area`` (what it left, what clicking it runs); how many links and buttons were clicked."""
        for entry in script_urls(area):  # left in the page: counts as run
            self.seen |= set(ID.findall(entry)) or {f"{where}~unknown~left"}
        targets = area.locator("a, button").filter(has_text="x-")
        n = targets.count()
        for i in range(n):
            target = targets.nth(i)
            before = self.page.locator(".jp-Dialog").count()
            try:
                target_html = str(target.evaluate("el => el.outerHTML"))
                target.click(timeout=2_000, force=True, no_wait_after=True)
            except Exception:  # hidden now (a row collapsed): nothing to run
                continue
            self.page.wait_for_timeout(200)
            if self.page.locator(".jp-Dialog").count() > before:  # a command link's `help:about` ran
                self.seen |= set(ID.findall(html.unescape(target_html))) or {f"{where}~command-link~clicked"}
                self.page.keyboard.press("Escape")
        return n


def script_urls(area: Any) -> list[str]:
    """Attributes in ``area`` that still hold a script URL or a command link, or a handler in model text."""
    return list(
        area.evaluate(
            """root => { const bad = [];
              for (const el of root.querySelectorAll('*')) {
                for (const a of el.attributes) {
                  const v = a.value.replace(/[\\u0000-\\u0020]/g, '').toLowerCase();
                  if (/^(javascript|vbscript|data:text\\/html)/.test(v) || a.name.startsWith('data-commandlinker')
                      || (a.name.startsWith('on') && el.closest('.shiro-text, .shiro-tool-row, .shiro-notice')))
                    bad.push(`${a.name}=${a.value} in ${el.outerHTML.slice(0, 400)}`);
                } }
              return bad; }"""
        )
    )


def settle(page: Any) -> None:
    """Let what a rendering started finish: image errors, SVG timelines, iframes, typesetting."""
    page.wait_for_timeout(1_500)


def renderings(lab: Lab) -> dict[str, tuple[set[str], int]]:
    """Each rendering of the final turn: the ``where`` of its vectors, and how many vectors it draws."""
    return {
        "labextension": ({"a1", "a2", "a*", "turn"}, 2 * per_answer(lab) + 2),  # two answers, the call's code, output
        "kernel Markdown (text/markdown)": ({"md"}, per_answer(lab) + len(ENTRY_VECTORS)),
        "kernel HTML (text/html)": ({"html"}, per_answer(lab) + len(ENTRY_VECTORS)),
    }


def test_model_text_never_runs_live_or_after_reopening(lab: Lab, page: Any) -> None:
    started = time.monotonic()
    watch = Watch(page, lab)
    lab.fake.enqueue(
        Reply(text=answer(lab, "a1"), tool_calls=[Call("python", {"code": tool_code(lab)})]),
        Reply(text=answer(lab, "a2")),
    )
    write_notebook(
        lab.root / NOTEBOOK,
        [
            "%matplotlib inline\n%load_ext shiro_kernel",
            '%config Shiro.approval = "ask"',
            "%shiro show me the sales",
            bundle_cell(lab),
        ],
    )
    open_notebook(page, lab, NOTEBOOK)
    run_cells(page, 0, TURN_CELL + 1)
    figures: dict[str, tuple[int, set[str]]] = {}
    problems: dict[str, list[str]] = {}

    # 1. live, nothing approved yet: the widget view shows the first answer and the call it asks about
    view = cell_output(page, TURN_CELL).locator(".shiro-turn-view")
    approve = view.locator("button", has_text="Approve")
    approve.wait_for(state="visible", timeout=60_000)
    view.get_by_text("bold a1").wait_for(timeout=30_000)
    settle(page)
    clicked = watch.check(view, "a1")
    settle(page)
    figures["live widget view, nothing approved"] = (per_answer(lab) + 1, watch.collect())
    shot(page, "security-live-widget")

    # 2. approved: the call's displays render with a cell output's trust, the final bundle replaces the view;
    # then the kernel's own Markdown and HTML of such a turn, as plain trusted outputs
    approve.click()
    turn = cell_output(page, TURN_CELL).locator(".jp-RenderedShiroTurn")
    turn.get_by_text("bold a2").wait_for(timeout=60_000)
    turn.locator(".shiro-output img").wait_for(timeout=30_000)
    run_cells(page, BUNDLE_CELL, BUNDLE_CELL + 1)
    bundles = cell_output(page, BUNDLE_CELL)
    bundles.locator(".jp-RenderedHTMLCommon").nth(1).wait_for(timeout=60_000)
    turn.locator("details.shiro-tool summary").first.click()  # the call's code and output, expanded
    settle(page)
    clicked += watch.check(turn, "a*") + watch.check(bundles.locator(".jp-RenderedMarkdown"), "md")
    clicked += watch.check(bundles.locator(".jp-RenderedHTML"), "html")
    settle(page)
    seen = watch.collect() - figures["live widget view, nothing approved"][1]
    for name, (wheres, tried) in renderings(lab).items():
        figures[f"{name}, live"] = (tried, {s for s in seen if s.split("~")[0] in wheres})
    problems["live"] = rendering_problems(turn, bundles, list(vectors(lab, "", "")))
    approved_live = int(page.evaluate("top.__approved || 0"))
    shot(page, "security-live-final")

    # 3. saved (the server signs it), closed and reopened: a trusted notebook, drawn from its saved outputs
    save_notebook(page)
    page.evaluate("window.jupyterapp.commands.execute('application:close-all')")
    watch.seen.clear()
    open_notebook(page, lab, NOTEBOOK)
    assert page.evaluate(f"window.jupyterapp.shell.currentWidget.content.model.cells.get({TURN_CELL}).trusted")
    turn = cell_output(page, TURN_CELL).locator(".jp-RenderedShiroTurn")
    turn.get_by_text("bold a2").wait_for(timeout=60_000)
    turn.locator(".shiro-output img").wait_for(timeout=30_000)
    bundles = cell_output(page, BUNDLE_CELL)
    bundles.locator(".jp-RenderedHTMLCommon").nth(1).wait_for(timeout=60_000)
    settle(page)
    clicked += watch.check(turn, "a*") + watch.check(bundles.locator(".jp-RenderedMarkdown"), "md")
    clicked += watch.check(bundles.locator(".jp-RenderedHTML"), "html")
    settle(page)
    seen = watch.collect()
    for name, (wheres, tried) in renderings(lab).items():
        figures[f"{name}, reopened (trusted)"] = (tried, {s for s in seen if s.split("~")[0] in wheres})
    problems["reopened"] = rendering_problems(turn, bundles, list(vectors(lab, "", "")))
    approved_reopened = int(page.evaluate("top.__approved || 0"))
    shot(page, "security-reopened")

    seconds = time.monotonic() - started
    for phase, (tried, ran) in figures.items():
        record(
            f"security: model text in JupyterLab and Chromium, {phase}",
            tried,
            len(ran),
            f"{tried} vectors (img onerror, script, iframe srcdoc, svg onbegin and onload, javascript: and "
            f"data:text/html links, a command link, TeX \\href, math hiding a fence; in an answer, the call's code and output, a "
            f"notice, an error); {len(ran)} ran or left a script URL",
        )
        print(f"{phase}: {tried} tried, {len(ran)} ran {sorted(ran)}")
    print(f"{clicked} links and buttons clicked; {seconds:.0f} s")
    assert all(not ran for _, ran in figures.values()), {k: sorted(r) for k, (_, r) in figures.items()}
    assert clicked >= 3 * 8, clicked  # every rendering drew the link vectors (inert) and they were clicked
    assert not any(problems.values()), problems
    # the approved call's HTML kept a trusted cell output's trust (its script ran), live and reopened
    assert approved_live >= 1 and approved_reopened >= 1, (approved_live, approved_reopened)


def run_cells(page: Any, start: int, stop: int) -> None:
    """Run cells ``start`` to ``stop - 1`` of the open notebook (as Shift+Enter on the selection does)."""
    page.evaluate(
        """([start, stop]) => { const notebook = window.jupyterapp.shell.currentWidget.content;
             notebook.activeCellIndex = start;
             notebook.deselectAll();
             notebook.extendContiguousSelectionTo(stop - 1);
             return window.jupyterapp.commands.execute('notebook:run-cell'); }""",
        [start, stop],
    )


def text_problems(text: Any, where: str, names: list[str]) -> list[str]:
    """What is missing of an answer's ordinary Markdown in a rendering of it ([] when all renders)."""
    shown = text.text_content() or ""
    checks = {
        "bold": text.locator("strong", has_text=f"bold {where}").count() == 1,
        "inline code": text.locator("code", has_text="a < b").count() == 1,
        "table": text.locator("table td", has_text="north").count() == 1,
        "fenced code": text.locator("pre", has_text="<b>shown as code</b>").count() == 1,
        "https link": text.locator(f'a[href="https://example.com/{where}"]').count() == 1,
        # the answer around the vectors is all there (a vector is sanitized away or shown as text)
        "answer": all(f"{name}:" in shown for name in names),
    }
    return [f"{where}: {name}" for name, ok in checks.items() if not ok]


def display_problems(turn: Any) -> list[str]:
    """What is missing of the approved call's displays and of its row ([] when all renders)."""
    checks = {
        "figure": turn.locator(".shiro-output img").evaluate("img => img.naturalWidth") > 100,
        "DataFrame": turn.locator(".shiro-output table td", has_text="north").count() >= 1,
        "approved HTML": turn.locator(".shiro-output b.approved-html").count() == 1,
        # the printed vector is in its row as text
        "tool output": "onerror" in json.dumps(turn.locator(".shiro-tool-output").all_text_contents()),
    }
    return [name for name, ok in checks.items() if not ok]


def rendering_problems(turn: Any, bundles: Any, names: list[str]) -> list[str]:
    """Ordinary Markdown in the labextension's rendering and in the kernel's Markdown and HTML, and the
    approved call's displays."""
    return (
        text_problems(turn.locator(".shiro-text").last, "a2", names)
        + text_problems(bundles.locator(".jp-RenderedMarkdown"), "md", names)
        + text_problems(bundles.locator(".jp-RenderedHTML"), "html", names)
        + display_problems(turn)
    )
