"""Where things are: the notebook, its project root, and shiro's home.

The project root is the notebook's git repository — the *main* worktree's root, found through the
git common dir so every worktree and subdirectory shares it, without running ``git`` — otherwise
the notebook's directory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..config import environment


def home() -> Path:
    return environment().home


def notebook_path(user_ns: dict[str, Any] | None = None) -> Path | None:
    """The notebook this kernel serves, as Jupyter Server, nbclient (with JPY_SESSION_NAME) or
    VS Code tell it; None when unknown (terminal IPython)."""
    ns = user_ns or {}
    for candidate in (ns.get("__vsc_ipynb_file__"), ns.get("__session__"), os.environ.get("JPY_SESSION_NAME")):
        if isinstance(candidate, str) and candidate.endswith(".ipynb"):
            path = Path(candidate).expanduser()
            return path if path.is_absolute() else Path.cwd() / path
    return None


def _git_dir(folder: Path) -> Path | None:
    dotgit = folder / ".git"
    if dotgit.is_dir():
        return dotgit
    if dotgit.is_file():  # a worktree or submodule: "gitdir: <path>"
        text = dotgit.read_text(errors="replace").strip()
        if text.startswith("gitdir:"):
            target = Path(text[len("gitdir:") :].strip())
            return target if target.is_absolute() else (folder / target).resolve()
    return None


def project_root(start: Path | None) -> Path:
    """The main worktree's root of the repository holding ``start``, else ``start`` itself."""
    base = (start or Path.cwd()).resolve()
    if base.is_file() or base.suffix == ".ipynb":
        base = base.parent
    for folder in (base, *base.parents):
        git_dir = _git_dir(folder)
        if git_dir is None:
            continue
        common = git_dir
        commondir = git_dir / "commondir"
        if commondir.is_file():  # linked worktree: points at the main repository's .git
            rel = Path(commondir.read_text().strip())
            common = (git_dir / rel).resolve() if not rel.is_absolute() else rel
        return common.parent if common.name == ".git" else common
    return base


def project_slug(root: Path) -> str:
    """``<name>_<hash>``: the project folder's name and a SHA-256 prefix of its absolute path — the key
    of every per-project store under ``SHIRO_HOME`` (notes, named memories, prompt history)."""
    import hashlib

    absolute = str(Path(root).resolve())
    name = Path(absolute).name or "root"
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in name)
    return f"{safe}_{hashlib.sha256(absolute.encode()).hexdigest()[:16]}"


def git_commit(root: Path) -> str | None:
    """The commit checked out at ``root`` (read from ``.git``, no subprocess); None outside a repository."""
    git_dir = _git_dir(Path(root))
    if git_dir is None:
        return None
    try:
        head = (git_dir / "HEAD").read_text().strip()
        if not head.startswith("ref:"):
            return head or None
        ref = head[4:].strip()
        for base in (git_dir, _common_dir(git_dir)):
            loose = base / ref
            if loose.is_file():
                return loose.read_text().strip() or None
            packed = base / "packed-refs"
            if packed.is_file():
                for line in packed.read_text().splitlines():
                    if line.endswith(" " + ref):
                        return line.split(" ", 1)[0]
    except OSError:
        return None
    return None


def _common_dir(git_dir: Path) -> Path:
    commondir = git_dir / "commondir"
    if commondir.is_file():
        rel = Path(commondir.read_text().strip())
        return rel if rel.is_absolute() else (git_dir / rel).resolve()
    return git_dir
