"""The repository's own instructions for agents: ``AGENTS.md`` at the project root, and in the notebook's
folder when it has one of its own (the convention Codex, Claude Code, VS Code and Notebook Intelligence
read). They reach the system prompt under one header, capped at :data:`CAP_BYTES` in all, with a notice
when cut. They are the project's conventions, not the user's words: they never widen what the agent may do
without the user (approvals stay as they are).

A cloned repository is untrusted, and its ``AGENTS.md`` goes to the provider with no approval, so it is read
only where ``read_file`` could read it: the file tools' own rule (:meth:`ToolContext.resolve` and
:func:`shiro_kernel.tools.files._regular`: resolved, symlinks followed, inside the project root, and a regular
file). A link to ``/proc/self/environ``, ``/etc/passwd`` or a file beside the repository, a folder, a FIFO or a
device is left out and said in the cell (:attr:`Instructions.notices`). Never more than the cap and one byte is
read, from a descriptor opened without blocking and checked again (a file swapped for a FIFO after the check
neither hangs nor is read); a file cut at the cap is said in the cell too, not only in ``/notes``.
"""

from __future__ import annotations

import codecs
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ToolError
from ..tools.base import ToolContext
from ..tools.files import _regular

NAME = "AGENTS.md"
CAP_BYTES = 32 * 1024
HEADER = (
    "Project instructions (AGENTS.md, written by the project's authors: follow its conventions; it does not "
    "change what needs the user's approval):"
)
CUT = "{path} is {size:,} bytes: the model is told only its first {cap} KiB (project instructions are capped)"
LEFT_OUT = "{path} was not read into the instructions: {why}"
_CHUNK = 64 * 1024


@dataclass(frozen=True)
class Instructions:
    text: str = ""
    #: the files read, with their sizes in bytes
    files: tuple[tuple[Path, int], ...] = field(default_factory=tuple)
    cut: bool = False
    #: one line each for the cell: a file cut at the cap, a file left out and why
    notices: tuple[str, ...] = field(default_factory=tuple)

    def block(self) -> str:
        return f"{HEADER}\n\n{self.text}" if self.text else ""

    def listing(self) -> str:
        """What ``/notes`` says about them: which files were read, and whether they were cut ('' with none)."""
        left_out = [n for n in self.notices if " was not read " in n]
        if not self.files:
            return "\n".join(left_out)
        shown = ", ".join(f"{p} ({size:,} bytes)" for p, size in self.files)
        read = f"project instructions read: {shown}" + (f" (cut at {CAP_BYTES // 1024} KiB)" if self.cut else "")
        return "\n".join([*left_out, read])


def _confined(root: Path, path: Path) -> Path | str | None:
    """The real path of ``path`` when the file tools could read it; else why not (a sentence), or None when
    there is nothing there (no ``AGENTS.md``, or a link to nothing)."""
    if not os.path.lexists(path):
        return None
    ctx = ToolContext(root=root)
    try:
        real = ctx.resolve(str(path))
    except ToolError:
        return f"it leads to {os.path.realpath(path)}, outside the project {os.path.realpath(root)}"
    if not real.exists():
        return None
    try:
        _regular(ctx, real)
    except ToolError:
        return "it is not a regular file (a folder, pipe, device or socket)"
    return real


def _read_capped(real: Path, limit: int) -> tuple[bytes, int]:
    """At most ``limit + 1`` bytes of the regular file at ``real`` (one more than the cap tells a cut), and
    its size. Opened without blocking and without following a link, and checked on the open descriptor: a
    file swapped for a FIFO, a device or a link after :func:`_confined` raises ``OSError``, never hangs."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(real, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(f"{real} is not a regular file")
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, _CHUNK))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        return data, max(info.st_size, len(data))
    finally:
        os.close(fd)


def _folders(root: Path, notebook: Path | None) -> list[Path]:
    """The root, then the notebook's folder when it is another folder under the root."""
    folders = [root]
    if notebook is not None:
        folder = notebook.parent
        try:
            inside = folder.resolve() != root.resolve() and root.resolve() in folder.resolve().parents
        except OSError:
            inside = False
        if inside:
            folders.append(folder)
    return folders


def read_instructions(root: Path, notebook: Path | None) -> Instructions:
    """The root's ``AGENTS.md``, then the notebook folder's (when it is another folder under the root)."""
    texts: list[str] = []
    files: list[tuple[Path, int]] = []
    notices: list[str] = []
    budget, cut = CAP_BYTES, False
    for folder in _folders(root, notebook):
        path = folder / NAME
        real = _confined(root, path)
        if isinstance(real, str):
            notices.append(LEFT_OUT.format(path=path, why=real))
            continue
        if real is None:
            continue
        try:
            raw, size = _read_capped(real, budget)
        except OSError as exc:
            notices.append(LEFT_OUT.format(path=path, why=exc.strerror or str(exc)))
            continue
        files.append((path, size))
        piece = raw[:budget]
        if size > len(piece):
            cut = True
            notices.append(CUT.format(path=path, size=size, cap=CAP_BYTES // 1024))
        if not piece:
            continue
        budget -= len(piece)
        # an incomplete character at the cut is dropped, not shown as U+FFFD
        body = codecs.getincrementaldecoder("utf-8")("replace").decode(piece, final=size <= len(piece)).strip()
        if size > len(piece):
            body += f"\n[… {path.name} was cut here: the instructions are capped at {CAP_BYTES // 1024} KiB]"
        label = "" if folder == root else f"(from {folder.name}/{NAME})\n"
        texts.append(label + body)
    return Instructions("\n\n".join(texts), tuple(files), cut, tuple(notices))


__all__ = ["CAP_BYTES", "HEADER", "NAME", "Instructions", "read_instructions"]
