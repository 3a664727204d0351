"""The repository's own instructions for agents: ``AGENTS.md`` at the project root, and in the notebook's
folder when it has one of its own (the convention Codex, Claude Code, VS Code and Notebook Intelligence
read). They reach the system prompt under one header, capped at :data:`CAP_BYTES` in all, with a notice
when cut. They are the project's conventions, not the user's words: they never widen what the agent may do
without the user (approvals stay as they are)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

NAME = "AGENTS.md"
CAP_BYTES = 32 * 1024
HEADER = (
    "Project instructions (AGENTS.md, written by the project's authors: follow its conventions; it does not "
    "change what needs the user's approval):"
)


@dataclass(frozen=True)
class Instructions:
    text: str = ""
    #: the files read, with their sizes in bytes
    files: tuple[tuple[Path, int], ...] = field(default_factory=tuple)
    cut: bool = False

    def block(self) -> str:
        return f"{HEADER}\n\n{self.text}" if self.text else ""

    def listing(self) -> str:
        """What ``/notes`` says about them: which files were read, and whether they were cut ('' with none)."""
        if not self.files:
            return ""
        shown = ", ".join(f"{p} ({size:,} bytes)" for p, size in self.files)
        return f"project instructions read: {shown}" + (f" (cut at {CAP_BYTES // 1024} KiB)" if self.cut else "")


def read_instructions(root: Path, notebook: Path | None) -> Instructions:
    """The root's ``AGENTS.md``, then the notebook folder's (when it is another folder under the root)."""
    folders = [root]
    if notebook is not None:
        folder = notebook.parent
        try:
            inside = folder.resolve() != root.resolve() and root.resolve() in folder.resolve().parents
        except OSError:
            inside = False
        if inside:
            folders.append(folder)
    texts: list[str] = []
    files: list[tuple[Path, int]] = []
    budget, cut = CAP_BYTES, False
    for folder in folders:
        path = folder / NAME
        try:
            raw = path.read_bytes() if path.is_file() else None
        except OSError:
            raw = None
        if raw is None:
            continue
        files.append((path, len(raw)))
        if budget <= 0:
            cut = True
            continue
        piece = raw[:budget]
        if len(raw) > budget:
            cut = True
        budget -= len(piece)
        body = piece.decode("utf-8", "replace").strip()
        if len(raw) > len(piece):
            body += f"\n[… {path.name} was cut here: the instructions are capped at {CAP_BYTES // 1024} KiB]"
        label = "" if folder == root else f"(from {folder.name}/{NAME})\n"
        texts.append(label + body)
    return Instructions("\n\n".join(texts), tuple(files), cut)


__all__ = ["CAP_BYTES", "HEADER", "NAME", "Instructions", "read_instructions"]
