"""What a tool call displayed (figures, DataFrame HTML, Markdown, images, Plotly/Vega-Lite JSON), drawn
under its tool row: as HTML (nbconvert, GitHub, nbviewer), Markdown, plain text (one placeholder line per
output), and kept in the turn bundle for the labextension.

An output is ``{"data": {mime: value}, "metadata": {...}}`` as the ``python`` tool captured it
(:mod:`shiro_kernel.tools.displays`). A turn keeps at most :data:`TURN_OUTPUT_BYTES` of outputs in the
notebook; what does not fit is replaced by a note saying so.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from .sanitize import md_code, md_to_html

#: all the outputs of one turn kept in the saved notebook, at most (per rendering)
TURN_OUTPUT_BYTES = 20_000_000
_IMAGES = ("image/png", "image/jpeg", "image/gif")
_JSON_VIEWS = {
    "application/vnd.plotly.v1+json": "Plotly chart",
    "application/vnd.vegalite.v5+json": "Vega-Lite chart",
    "application/vnd.vegalite.v4+json": "Vega-Lite chart",
    "application/vnd.vega.v5+json": "Vega chart",
}


def _size(output: dict[str, Any]) -> int:
    return len(json.dumps(output.get("data") or {}, default=str))


def within_budget(outputs: list[dict[str, Any]], budget: int) -> tuple[list[dict[str, Any]], int]:
    """The outputs that fit ``budget`` bytes (in order), a note output for each that does not, and the
    budget left."""
    kept: list[dict[str, Any]] = []
    for output in outputs:
        size = _size(output)
        if size > budget:
            mimes = ", ".join(m for m in (output.get("data") or {}) if m != "text/plain")
            kept.append(
                {
                    "data": {
                        "text/plain": f"[{mimes} output of {size / 1e6:.1f} MB left out: the turn's "
                        f"outputs are capped at {TURN_OUTPUT_BYTES / 1e6:.0f} MB]"
                    },
                    "metadata": {},
                }
            )
            continue
        budget -= size
        kept.append(output)
    return kept, budget


def describe(output: dict[str, Any]) -> str:
    """One line naming an output, for a text-only frontend: ``[figure: …]``, ``[image/png 640×480]``…"""
    data = output.get("data") or {}
    plain = data.get("text/plain")
    if isinstance(plain, list):
        plain = "".join(plain)
    meta = output.get("metadata") or {}
    for mime in _IMAGES:
        if mime in data:
            size = meta.get(mime)
            dims = (
                f" {size['width']}×{size['height']}"
                if isinstance(size, dict) and "width" in size and "height" in size
                else ""
            )
            what = plain if isinstance(plain, str) and plain.startswith("<Figure") else mime
            return f"[{what}{dims}]"
    for mime, name in _JSON_VIEWS.items():
        if mime in data:
            return f"[{name}]"
    if "text/html" in data and isinstance(plain, str) and plain.strip():
        return plain.strip()
    if "image/svg+xml" in data:
        return "[SVG image]"
    kinds = ", ".join(m for m in data if m != "text/plain")
    return plain.strip() if isinstance(plain, str) and plain.strip() else f"[{kinds}]"


def _b64(value: Any) -> str:
    return "".join(value) if isinstance(value, list) else str(value)


def to_html(output: dict[str, Any]) -> str:
    """An output as HTML: an image, the HTML itself (a DataFrame), Markdown, SVG, or a placeholder."""
    data = output.get("data") or {}
    for mime in _IMAGES:
        if mime in data:
            return (
                f'<img class="shiro-output" src="data:{mime};base64,{html.escape(_b64(data[mime]), quote=True)}" '
                f'style="max-width:100%" alt="{html.escape(describe(output), quote=True)}"/>'
            )
    if "image/svg+xml" in data:
        return f'<div class="shiro-output">{_b64(data["image/svg+xml"])}</div>'
    if "text/html" in data:
        return f'<div class="shiro-output">{_b64(data["text/html"])}</div>'
    if "text/markdown" in data:
        return f'<div class="shiro-output">{md_to_html(_b64(data["text/markdown"]), images=True)}</div>'
    return f'<pre class="shiro-output">{html.escape(describe(output))}</pre>'


def to_markdown(output: dict[str, Any]) -> str:
    """An output as Markdown: an image, the Markdown it displayed (as a cell would show it), or its plain
    text as inline code that holds no markup (plain text is text, whatever characters it holds)."""
    data = output.get("data") or {}
    for mime in _IMAGES:
        if mime in data:
            alt = re.sub(r"[\[\]<>\\`]", "", describe(output).strip("[]"))
            return f"![{alt}](data:{mime};base64,{re.sub(r'[^A-Za-z0-9+/=]', '', _b64(data[mime]))})"
    if "text/markdown" in data:
        return _b64(data["text/markdown"])
    return md_code(describe(output))


__all__ = ["TURN_OUTPUT_BYTES", "describe", "to_html", "to_markdown", "within_budget"]
