"""File tools: ``read_file``, ``write_file``, ``edit_file``, ``list_files`` and ``grep``.

Every path the model gives goes through :meth:`ToolContext.resolve`, which confines it to the
project root (symlinks included). Writes are atomic: a temporary file in the same folder, then
``os.replace``, so a crash never leaves a half-written file.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..store.files import write_atomic
from .base import Effect, Image, Preview, Tool, ToolContext, ToolError, ToolOutput, Touches, TouchesOf, schema

DEFAULT_LIMIT = 2000  # lines read_file shows by default
LINE_CHARS = 2000  # longer lines are cut in read_file
MAX_LIST = 500  # list_files entries
MAX_MATCHES = 200  # grep matches
GREP_LINE_CHARS = 300
GREP_MAX_FILE_BYTES = 5_000_000
SNIFF_BYTES = 8192
#: folders never walked into by list_files and grep (unless the path itself points inside one)
SKIP_DIRS = frozenset(
    {
        ".git",
        "node_modules",
        "__pycache__",
        ".venv",
        ".ipynb_checkpoints",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
    }
)


# -- helpers -------------------------------------------------------------------------------------
def _rel(ctx: ToolContext, path: Path) -> str:
    root = Path(os.path.realpath(ctx.root))
    try:
        rel = path.relative_to(root).as_posix()
    except ValueError:
        return str(path)
    return rel or "."


def _is_binary(head: bytes) -> bool:
    return b"\x00" in head


def _read_text(ctx: ToolContext, path: Path, what: str) -> str:
    """The whole file as text (newlines kept as they are); refuses folders, binaries, bad encodings."""
    _regular(ctx, path)
    data = path.read_bytes()
    if _is_binary(data[:SNIFF_BYTES]):
        raise ToolError(f"{_rel(ctx, path)} is a binary file; {what} only works on text files")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ToolError(
            f"{_rel(ctx, path)} is not valid UTF-8 text ({exc.reason} at byte {exc.start}); "
            f"{what} only works on UTF-8 text files"
        ) from None


def _atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` atomically, keeping an existing file's permissions (new files get the umask's)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    write_atomic(path, data, mode=mode)


def _optional_int(args: dict[str, Any], name: str, default: int, minimum: int = 1) -> int:
    value = args.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ToolError(f"{name} must be a whole number")
    if value < minimum:
        raise ToolError(f"{name} must be at least {minimum}, not {value}")
    return value


def _required_str(args: dict[str, Any], name: str, allow_empty: bool = False) -> str:
    value = args.get(name)
    if not isinstance(value, str):
        raise ToolError(f"{name} must be a string")
    if not allow_empty and not value:
        raise ToolError(f"{name} is empty")
    return value


# -- read_file -----------------------------------------------------------------------------------
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".gif": "image/gif",
    ".webp": "image/webp",
}
MAX_IMAGE_BYTES = 20_000_000


def _regular(ctx: ToolContext, path: Path) -> None:
    """Refuse what is not a regular file: reading a FIFO, a device or a socket would wait forever."""
    if not path.exists():
        raise ToolError(f"{_rel(ctx, path)} does not exist; use list_files to find the right path")
    if path.is_dir():
        raise ToolError(f"{_rel(ctx, path)} is a folder, not a file; use list_files to see what it holds")
    if not path.is_file():
        raise ToolError(f"{_rel(ctx, path)} is not a regular file (a pipe, device or socket); it cannot be read")


def _read_image(ctx: ToolContext, path: Path) -> ToolOutput:
    size = path.stat().st_size
    rel = _rel(ctx, path)
    if size > MAX_IMAGE_BYTES:
        raise ToolError(f"{rel} is a {size:,}-byte image, over the {MAX_IMAGE_BYTES:,}-byte limit for reading it")
    mime = IMAGE_TYPES[path.suffix.lower()]
    return ToolOutput(
        f"{rel}: a {mime} image of {size:,} bytes, attached as an image",
        images=[Image(path.read_bytes(), mime, alt=f"the image file {rel}")],
    )


def read_file(args: dict[str, Any], ctx: ToolContext) -> str | ToolOutput:
    path = ctx.resolve(_required_str(args, "path"))
    offset = _optional_int(args, "offset", 1)
    limit = _optional_int(args, "limit", DEFAULT_LIMIT)
    rel = _rel(ctx, path)
    _regular(ctx, path)
    if path.suffix.lower() in IMAGE_TYPES:
        return _read_image(ctx, path)
    shown: list[str] = []
    total = read = 0
    with open(path, "rb") as fh:
        if _is_binary(fh.read(SNIFF_BYTES)):
            size = path.stat().st_size
            raise ToolError(f"{rel} is a binary file ({size} bytes); read_file only shows text files")
        fh.seek(0)
        for total, raw in enumerate(fh, start=1):
            if offset <= total < offset + limit:
                read += len(raw)
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if len(line) > LINE_CHARS:
                    line = line[:LINE_CHARS] + f" ... [line cut: {len(line)} chars]"
                shown.append(f"{total:6d}\t{line}")
    if total == 0:
        return f"{rel} is empty (0 lines)."
    if offset > total:
        raise ToolError(f"offset {offset} is past the end of {rel}, which has {total} lines")
    last = offset + len(shown) - 1
    if offset == 1 and last == total:
        footer = f"[{rel}: {total} lines]"
    else:
        footer = f"[{rel}: lines {offset}-{last} of {total}"
        footer += f"; to read more, call read_file with offset={last + 1}]" if last < total else "]"
    return ToolOutput("\n".join(shown) + "\n" + footer, meta={"file": [rel, read]})  # the egress ledger's


# -- write_file / edit_file ----------------------------------------------------------------------
def write_file(args: dict[str, Any], ctx: ToolContext) -> str:
    path = ctx.resolve(_required_str(args, "path"))
    content = _required_str(args, "content", allow_empty=True)
    if path.is_dir():
        raise ToolError(f"{_rel(ctx, path)} is a folder; give a file path")
    existed = path.exists()
    data = content.encode("utf-8")
    try:
        _atomic_write(path, data)
    except (NotADirectoryError, FileExistsError):
        raise ToolError(f"cannot create {_rel(ctx, path)}: a part of its folder path is a file") from None
    lines = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    return f"Wrote {len(data)} bytes ({lines} lines) to {_rel(ctx, path)} ({'replaced' if existed else 'new file'})."


def edit_file(args: dict[str, Any], ctx: ToolContext) -> str:
    path = ctx.resolve(_required_str(args, "path"))
    old = _required_str(args, "old")
    new = _required_str(args, "new", allow_empty=True)
    rel = _rel(ctx, path)
    if old == new:
        raise ToolError("old and new are identical; nothing to change")
    text = _read_text(ctx, path, "edit_file")
    count = text.count(old)
    if count == 0 and "\r\n" in text and "\n" in old and "\r\n" not in old:
        # the file uses Windows line endings; the model almost always sends "\n"
        old, new = old.replace("\n", "\r\n"), new.replace("\r\n", "\n").replace("\n", "\r\n")
        count = text.count(old)
    if count == 0:
        raise ToolError(
            f"old text not found in {rel} (0 matches); read the file and copy the exact text, "
            "including whitespace and indentation"
        )
    if count > 1:
        raise ToolError(
            f"old text occurs {count} times in {rel}; include more surrounding lines so it matches exactly once"
        )
    start = text.index(old)
    updated = text[:start] + new + text[start + len(old) :]
    _atomic_write(path, updated.encode("utf-8"))
    first = text.count("\n", 0, start) + 1
    changed = new.count("\n") + 1
    lines = updated.splitlines()
    lo, hi = max(1, first - 2), min(len(lines), first + changed + 1)
    snippet = "\n".join(f"{n:6d}\t{lines[n - 1][:LINE_CHARS]}" for n in range(lo, hi + 1))
    return f"Edited {rel}: replaced 1 occurrence at line {first}. Lines {lo}-{hi} now:\n{snippet}"


# -- list_files ----------------------------------------------------------------------------------
_MAGIC = re.compile(r"[*?\[]")


def _glob_regex(pattern: str) -> re.Pattern[str]:
    """Translate a glob (``**`` spans folders, ``*``/``?``/``[...]`` stay within one) to a regex."""
    out = []
    i, n = 0, len(pattern)
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[":
            j = pattern.find("]", i + 2 if pattern[i + 1 : i + 2] in ("!", "]") else i + 1)
            if j == -1:
                out.append(re.escape(c))
                i += 1
            else:
                body = pattern[i + 1 : j]
                if body.startswith("!"):
                    body = "^" + body[1:]
                out.append("[" + body.replace("\\", "\\\\") + "]")
                i = j + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out) + r"\Z", re.DOTALL)


def _walk(base: Path, max_depth: int | None = None) -> Iterator[tuple[Path, bool]]:
    """(path, is_dir) under ``base``, sorted, skipping SKIP_DIRS; symlinked folders are not entered."""

    def visit(folder: Path, depth: int) -> Iterator[tuple[Path, bool]]:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError:
            return
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if is_dir and entry.name in SKIP_DIRS:
                continue
            yield Path(entry.path), is_dir
            if is_dir and (max_depth is None or depth + 1 < max_depth):
                yield from visit(Path(entry.path), depth + 1)

    yield from visit(base, 0)


def _inside_root(ctx: ToolContext, path: Path) -> bool:
    try:
        ctx.resolve(str(path))
        return True
    except ToolError:
        return False


def list_files(args: dict[str, Any], ctx: ToolContext) -> str:
    pattern = _required_str(args, "pattern").strip().replace("\\", "/")
    if not pattern:
        raise ToolError("pattern is empty; try '**/*' for everything or '*.py' for one folder")
    parts = pattern.split("/")
    split = next((i for i, p in enumerate(parts) if _MAGIC.search(p)), len(parts))
    if any(p == ".." for p in parts[split:]):
        raise ToolError("the pattern may not contain '..' after a wildcard; patterns are relative to the project root")
    base_text = "/".join(parts[:split]) or ("/" if pattern.startswith("/") else ".")
    base = ctx.resolve(base_text)  # refuses absolute paths and '..' outside the root
    rest = "/".join(p for p in parts[split:] if p not in ("", "."))
    note = ""
    if not rest:  # no wildcard: a file, or a folder (then list what it holds)
        if not base.exists():
            return f"No files match {pattern!r} ({_rel(ctx, base)} does not exist)."
        if not base.is_dir():
            return _rel(ctx, base)
        rest, note = "*", f"({_rel(ctx, base)} is a folder; listing what it holds)\n"
    if not base.is_dir():
        return f"No files match {pattern!r} ({_rel(ctx, base)} is not a folder)."
    regex = _glob_regex(rest)
    max_depth = None if "**" in rest else rest.count("/") + 1
    matches: list[str] = []
    total = 0
    for path, is_dir in _walk(base, max_depth):
        rel_to_base = path.relative_to(base).as_posix()
        if not regex.match(rel_to_base):
            continue
        if path.is_symlink() and not _inside_root(ctx, path):
            continue  # a link leading out of the project
        total += 1
        if len(matches) < MAX_LIST:
            matches.append(_rel(ctx, path) + ("/" if is_dir else ""))
    if not matches:
        return f"No files match {pattern!r}."
    matches.sort()
    text = note + "\n".join(matches)
    if total > len(matches):
        text += f"\n[{total} matches; showing the first {len(matches)} — narrow the pattern to see the rest]"
    return text


# -- grep ----------------------------------------------------------------------------------------
def _grep_files(ctx: ToolContext, target: Path) -> Iterator[Path]:
    if target.is_file():
        yield target
        return
    if target.exists() and not target.is_dir():
        return  # a pipe, device or socket: reading it could wait forever
    for path, is_dir in _walk(target):
        if is_dir or not path.is_file():  # not a regular file: skipped, never opened
            continue
        if path.is_symlink() and not _inside_root(ctx, path):
            continue
        yield path


def grep(args: dict[str, Any], ctx: ToolContext) -> str:
    pattern = _required_str(args, "pattern")
    path_arg = args.get("path")
    target = ctx.resolve(path_arg if isinstance(path_arg, str) and path_arg.strip() else ".")
    try:
        regex = re.compile(pattern)
    except re.error as exc:
        raise ToolError(
            f"invalid regular expression {pattern!r}: {exc}; escape special characters "
            "like ( [ . * with a backslash to match them literally"
        ) from None
    if not target.exists():
        raise ToolError(f"{_rel(ctx, target)} does not exist; use list_files to find the right path")
    single = target.is_file()
    out: list[str] = []
    skipped_binary = 0
    stopped = False
    for path in _grep_files(ctx, target):
        try:
            if path.stat().st_size > GREP_MAX_FILE_BYTES:
                continue
            data = path.read_bytes()
        except OSError:
            continue
        if _is_binary(data[:SNIFF_BYTES]):
            skipped_binary += 1
            continue
        for lineno, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
            if regex.search(line):
                if len(out) >= MAX_MATCHES:
                    stopped = True
                    break
                if len(line) > GREP_LINE_CHARS:
                    line = line[:GREP_LINE_CHARS] + " ..."
                out.append(f"{_rel(ctx, path)}:{lineno}: {line}")
        if stopped:
            break
    where = _rel(ctx, target)
    where = "the project root" if where == "." else where
    if single and skipped_binary:
        raise ToolError(f"{where} is a binary file; grep only searches text files")
    if not out:
        return f"No matches for {pattern!r} in {where}."
    text = "\n".join(out)
    if stopped:
        text += f"\n[stopped after {MAX_MATCHES} matches; narrow the pattern or the path to see the rest]"
    return text


# -- what a call touches, and what the user reads before a write ------------------------------------------------
def _named(args: dict[str, Any], key: str) -> tuple[str, ...]:
    value = args.get(key)
    return (value,) if isinstance(value, str) else ()


def _reads(key: str) -> TouchesOf:
    """The file (or glob) a reading call names in its argument ``key``."""
    return lambda args, ctx: Touches(reads=_named(args, key))


def _writes(args: dict[str, Any], ctx: ToolContext | None) -> Touches:
    """The one file a write names: its ``path``."""
    return Touches(writes=_named(args, "path"))


def _current(ctx: ToolContext, path: str) -> str | None:
    """The file's text now, when it is a readable text file the tools may use."""
    try:
        return ctx.resolve(path).read_text(encoding="utf-8")
    except (ToolError, OSError, UnicodeDecodeError, ValueError):
        return None


def _write_preview(args: dict[str, Any], ctx: ToolContext) -> Preview | None:
    path, content = args.get("path"), args.get("content")
    if not isinstance(path, str) or not isinstance(content, str):
        return None
    old = _current(ctx, path)
    if old is None:
        return Preview(f"create {path}", content, path=path)
    return Preview(f"overwrite {path}", content, path=path, old=old)


def _edit_preview(args: dict[str, Any], ctx: ToolContext) -> Preview | None:
    path, before = args.get("path"), args.get("old")
    if not isinstance(path, str) or not isinstance(before, str):
        return None
    after = str(args.get("new") or "")
    old = _current(ctx, path)
    if old is not None and old.count(before) == 1:
        return Preview(f"edit {path}", old.replace(before, after, 1), path=path, old=old)
    return Preview(f"edit {path}", after, path=path, old=before)


TOOLS = [
    Tool(
        name="read_file",
        description=(
            "Read a text file under the project root, with line numbers (like cat -n). Shows up to `limit` lines "
            "(default 2000) from line `offset` (1-based) and says how to read more; binary files are refused. "
            "An image file (.png, .jpg, .gif, .webp) comes back as an image you can look at."
        ),
        parameters=schema(
            {
                "path": {"type": "string", "description": "file path, relative to the project root"},
                "offset": {"type": "integer", "description": "first line to show (1-based); null for 1"},
                "limit": {"type": "integer", "description": "number of lines to show; null for 2000"},
            },
            optional=("offset", "limit"),
        ),
        run=read_file,
        effects=Effect.READS,
        touches=_reads("path"),
        served=4,
    ),
    Tool(
        name="write_file",
        description=(
            "Create or overwrite a text file under the project root with `content` (parent folders are created; "
            "the write is atomic). Prefer edit_file for changing part of an existing file."
        ),
        parameters=schema(
            {
                "path": {"type": "string", "description": "file path, relative to the project root"},
                "content": {"type": "string", "description": "the complete new file content"},
            }
        ),
        run=write_file,
        effects=Effect.FILES,
        touches=_writes,
        preview=_write_preview,
        served=5,
    ),
    Tool(
        name="edit_file",
        description=(
            "Replace one exact occurrence of `old` with `new` in a text file under the project root. `old` must "
            "match exactly once (whitespace included); otherwise nothing changes and the error says why."
        ),
        parameters=schema(
            {
                "path": {"type": "string", "description": "file path, relative to the project root"},
                "old": {"type": "string", "description": "the exact text to replace; must occur exactly once"},
                "new": {"type": "string", "description": "the replacement text"},
            }
        ),
        run=edit_file,
        effects=Effect.FILES,
        touches=_writes,
        preview=_edit_preview,
        served=6,
    ),
    Tool(
        name="list_files",
        description=(
            "List files matching a glob relative to the project root ('*.py', 'data/*.csv', '**/*.ipynb'; "
            "'**' spans folders). Sorted, at most 500; .git, node_modules, __pycache__ and .venv are skipped."
        ),
        parameters=schema(
            {
                "pattern": {"type": "string", "description": "glob pattern relative to the project root"},
            }
        ),
        run=list_files,
        effects=Effect.READS,
        touches=_reads("pattern"),
        served=7,
    ),
    Tool(
        name="grep",
        description=(
            "Search text files for a Python regular expression (use (?i) for case-insensitive); prints "
            "`file:line: text`, at most 200 matches. Searches the project root or the given file/folder, "
            "skipping binary files and .git, node_modules, __pycache__, .venv."
        ),
        parameters=schema(
            {
                "pattern": {"type": "string", "description": "Python regular expression"},
                "path": {"type": "string", "description": "file or folder under the project root; null for the root"},
            },
            optional=("path",),
        ),
        run=grep,
        effects=Effect.READS,
        touches=_reads("path"),
        served=8,
    ),
]
