"""What the user reads before approving a call: the code as a highlighted, multi-line block (``python``,
``shell``), for ``write_file`` / ``edit_file`` a diff of the file as it would change, and for the memory
tools (``remember``, ``forget``, ``memory_write``) the exact text every later session would be told.

Pure functions returning HTML (pygments, which IPython already depends on, does the highlighting with
inline styles, so no stylesheet is needed). A file that cannot be read is shown as the new content.
"""

from __future__ import annotations

import difflib
import html
import json
from pathlib import Path
from typing import Any

from ..transcript import ToolCallPart

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


def _current(root: Path, path: str) -> str | None:
    """The file's text, when it is a readable text file under ``root``."""
    try:
        base = root.resolve()
        target = (base / path).resolve() if not Path(path).is_absolute() else Path(path).resolve()
        if target != base and base not in target.parents:
            return None
        return target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _diff(path: str, old: str, new: str) -> str:
    lines = list(
        difflib.unified_diff(
            old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=f"a/{path}", tofile=f"b/{path}", n=3
        )
    )
    return "".join(lines) if lines else "(no change)\n"


def preview(call: ToolCallPart, root: Path) -> tuple[str, str]:
    """``(title, HTML)`` of what approving ``call`` would do."""
    try:
        args: dict[str, Any] = call.parsed_arguments()
    except ValueError:
        return call.name, _highlight(call.arguments, "text")
    name = call.name
    if name == "python" and isinstance(args.get("code"), str):
        return "run this Python in your kernel", _highlight(args["code"], "python")
    if name == "shell" and isinstance(args.get("command"), str):
        timeout = args.get("timeout_s")
        title = "run this shell command" + (f" (timeout {timeout:g} s)" if isinstance(timeout, (int, float)) else "")
        return title, _highlight(args["command"], "bash")
    path = args.get("path")
    if name == "write_file" and isinstance(path, str) and isinstance(args.get("content"), str):
        old = _current(root, path)
        if old is None:
            return f"create {path}", _highlight(args["content"], _lexer_for(path))
        return f"overwrite {path}", _highlight(_diff(path, old, args["content"]), "diff")
    if name == "edit_file" and isinstance(path, str) and isinstance(args.get("old"), str):
        new = str(args.get("new") or "")
        old = _current(root, path)
        if old is not None and old.count(args["old"]) == 1:
            return f"edit {path}", _highlight(_diff(path, old, old.replace(args["old"], new, 1)), "diff")
        return f"edit {path}", _highlight(_diff(path, args["old"], new), "diff")
    memory = _memory_preview(name, args, root)
    if memory is not None:
        return memory
    shown = json.dumps({k: v for k, v in args.items() if v is not None}, indent=2, ensure_ascii=False)
    return f"call {name}", _highlight(shown, "json")


def _memory_preview(name: str, args: dict[str, Any], root: Path) -> tuple[str, str] | None:
    """What a memory call would store for later sessions: the note, the text to forget, or the memory's
    content (a diff when it exists already). None for other tools or arguments of the wrong type."""
    if name == "remember" and isinstance(args.get("text"), str):
        kind = args.get("kind") if isinstance(args.get("kind"), str) else "note"
        return f"remember this {kind} for every later session of this project", _highlight(args["text"], "text")
    if name == "forget" and isinstance(args.get("text"), str):
        return "forget every project note containing", _highlight(args["text"], "text")
    if name != "memory_write" or not isinstance(args.get("name"), str):
        return None
    from ..memory.index_file import name_problem, project_dir, system_dir

    memory, scope = args["name"], args.get("scope")
    where = "the system scope (every project)" if scope == "system" else f"the {scope or '?'} scope"
    if args.get("remove"):
        return f"remove the memory {memory} from {where} (moved to the trash)", ""
    content = args.get("content") if isinstance(args.get("content"), str) else ""
    if not content:
        description = args.get("description")
        body = _highlight(description, "text") if isinstance(description, str) else ""
        return f"change the index line of the memory {memory} in {where}", body
    old = None
    if scope in ("project", "system") and name_problem(memory) is None:
        folder = system_dir() if scope == "system" else project_dir(root)
        try:
            old = (folder / f"{memory}.md").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            old = None
    overlay = " (for this model only)" if args.get("current_model_only") else ""
    if old is None or overlay:
        return f"save the memory {memory} in {where}{overlay}", _highlight(content, "markdown")
    return f"overwrite the memory {memory} in {where}", _highlight(_diff(f"{memory}.md", old, content), "diff")


__all__ = ["preview"]
