"""What the user reads before approving a call, as its tool says (``Tool.preview``): the code as a highlighted,
multi-line block (``python``, ``shell``), for ``write_file`` / ``edit_file`` a diff of the file as it would
change, and for the memory tools (``remember``, ``forget``, ``memory_write``) the exact text every later session
would be told; a tool that says nothing shows its arguments.

Pure functions returning HTML (pygments, which IPython already depends on, does the highlighting with
inline styles, so no stylesheet is needed). A file that cannot be read is shown as the new content.
"""

from __future__ import annotations

import difflib
import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..transcript import ToolCallPart
from .render import FROM_TEXT

if TYPE_CHECKING:
    from ..tools.base import Preview

MAX_CHARS = 20_000
_BOX = "margin:4px 0;padding:4px 8px;max-height:28em;overflow:auto;border:1px solid #ddd;border-radius:3px"


def _highlight(code: str, lexer_name: str) -> str:
    from pygments import highlight
    from pygments.formatters import HtmlFormatter
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    try:
        lexer = get_lexer_by_name(lexer_name)
    except ClassNotFound:
        lexer = get_lexer_by_name("text")
    body = highlight(code[:MAX_CHARS], lexer, HtmlFormatter(noclasses=True, nowrap=True))
    more = f"\n… ({len(code) - MAX_CHARS:,} more characters)" if len(code) > MAX_CHARS else ""
    return f'<pre class="shiro-approval-code" style="{_BOX};white-space:pre">{body}{html.escape(more)}</pre>'


def _lexer_for(path: str) -> str:
    from pygments.lexers import get_lexer_for_filename
    from pygments.util import ClassNotFound

    try:
        return str(get_lexer_for_filename(path).aliases[0])
    except (ClassNotFound, IndexError):
        return "text"


def _diff(path: str, old: str, new: str) -> str:
    lines = list(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=f"a/{path}", tofile=f"b/{path}", n=3
        )
    )
    return "".join(lines) if lines else "(no change)\n"


def preview(call: ToolCallPart, root: Path) -> tuple[str, str]:
    """``(title, HTML)`` of what approving ``call`` would do: what its tool says the user reads
    (``Tool.preview``), highlighted; a tool that says nothing (an MCP server's) shows its arguments. A call read
    from the model's text says so in its title."""
    title, body = _preview(call, root)
    return (f"{title} {FROM_TEXT}" if call.meta.get("fromText") else title), body


def _preview(call: ToolCallPart, root: Path) -> tuple[str, str]:
    try:
        args: dict[str, Any] = call.parsed_arguments()
    except ValueError:
        return call.name, _highlight(call.arguments, "text")
    from ..tools import ToolContext, all_tools

    tool = all_tools().get(call.name)
    try:
        shown = tool.preview(args, ToolContext(root=root)) if tool is not None and tool.preview is not None else None
    except Exception:  # a preview's bug must not keep the question from being asked: the arguments instead
        shown = None
    if shown is not None:
        return shown.title, render(shown)
    text = json.dumps({k: v for k, v in args.items() if v is not None}, indent=2, ensure_ascii=False)
    return f"call {call.name}", _highlight(text, "json")


def render(shown: Preview) -> str:
    """A tool's :class:`~shiro_kernel.tools.base.Preview` as HTML: a diff of its file, or its text highlighted."""
    if shown.text is None:
        return ""
    if shown.old is not None:
        return _highlight(_diff(shown.path, shown.old, shown.text), "diff")
    return _highlight(shown.text, shown.lang or _lexer_for(shown.path))


__all__ = ["preview", "render"]
