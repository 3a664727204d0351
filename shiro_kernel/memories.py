"""Named memories (seed: samagotchi ``tools/memory.rb``, ``model_overlay.rb``, ``muted_memories.rb``).

Two scopes of markdown files, each with its own ``index.md``:

* system: ``SHIRO_HOME/memories/``
* project: ``SHIRO_HOME/memories/projects/<slug>/``

``memory_read`` / ``memory_write`` texts are returned verbatim from :class:`MemoryStore` (errors
start with ``Error:``). ``index.md`` is read-modify-written under an exclusive lock on
``<dir>/.index.lock``; every file is written atomically. Only the managed line of the written entry
changes; every other byte of the index is preserved.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from datetime import date
from pathlib import Path
from typing import Any

from . import paths, storage

SCOPES = ("project", "system")
INDEX = "index"
SEPARATOR = "\n\n---\n\n"
MAX_DESCRIPTION = 200
INDEX_HEADER = (
    "# Memory Index\n\n"
    "Managed entries below are auto-maintained by memory_write "
    "(name, scope, last-written date, size). Free-form sections are preserved."
)
NO_MEMORIES = "No memories stored yet."
NO_INDEX = "Stored memories (no index yet):\n"
#: per scope folder: name -> {sessionId, notebook, cell, gitCommit, writtenAt} of the last write
PROVENANCE = ".provenance.json"

#: a managed line (``- **name** · …``), a legacy ``- **name**: desc`` line, or a bare ``- **name**``
INDEX_LINE = re.compile(r"\A- \*\*(.+?)\*\*[ \t]*(?:[·•].*|:.*)?\Z")
_KEY_OK = re.compile(r"\A[a-z0-9-]+\Z")
_OVERLAY_NAME = re.compile(r"\.([a-z0-9-]+)\.md\Z")


# -- helpers shared with bundles.py and the CLI ---------------------------------------------------
def system_dir() -> Path:
    return paths.home() / "memories"


def project_dir(root: Path) -> Path:
    return system_dir() / "projects" / paths.project_slug(root)


def key_for(model: str | None) -> str | None:
    """The overlay key of a model name: lowercase, every non-``[a-z0-9]`` run becomes one ``-``,
    trimmed. ``qwen3.6-35b-a3b`` → ``qwen3-6-35b-a3b``. None for a blank name.

    (The seed drops a ``host:`` prefix first; shiro has no host prefix, and a colon in an Ollama tag
    such as ``qwen3:8b`` is part of the model name, so it is kept: ``qwen3-8b``.)"""
    if not model or not str(model).strip():
        return None
    key = re.sub(r"[^a-z0-9]+", "-", str(model).lower()).strip("-")
    return key or None


def name_error(name: str) -> str | None:
    """The seed's refusal for a name that could leave its scope folder, else None."""
    if "/" in name or "\\" in name or ".." in name or "\x00" in name:
        return f"Error: invalid memory name '{name}': use a plain name (no /, \\ or ..)"
    return None


def normalize_mute(raw: object) -> str | None:
    """``project/gh-helper``, ``gh-helper.md``, `` gh-helper `` → ``gh-helper``; None when blank."""
    value = ("" if raw is None else str(raw)).strip()
    if not value:
        return None
    if "/" in value:
        scope, rest = value.split("/", 1)
        if scope in SCOPES:
            value = rest
    base = value.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    if base.endswith(".md") and base != ".md":
        base = base[:-3]
    base = base.strip()
    return base or None


def normalize_mute_list(names: Iterable[object] | None) -> list[str]:
    """Names as given (comma lists allowed) → normalized, deduplicated, in order."""
    out: list[str] = []
    for raw in names or ():
        for part in ("" if raw is None else str(raw)).split(","):
            name = normalize_mute(part)
            if name is not None and name not in out:
                out.append(name)
    return out


def filter_index(text: str, muted: Iterable[str] | None) -> str:
    """The index text without the lines naming a muted memory (managed, legacy or bare-name lines);
    every other byte stays. With no mutes the very same object is returned."""
    muted = list(muted or ())
    if not muted or text is None:
        return text

    def hidden(line: str) -> bool:
        stripped = line.rstrip("\r\n")
        m = INDEX_LINE.match(stripped)
        name = m.group(1) if m else stripped
        if " " in name:
            return False
        key = normalize_mute(name)
        return key is not None and key in muted

    return "".join(line for line in text.splitlines(keepends=True) if not hidden(line))


def managed_line(name: str, scope: str, size: int, description: str | None, owner: str | None = None) -> str:
    line = f"- **{name}** · {scope} · {date.today().isoformat()} · {size}"
    if owner:
        line += f" · from {owner}"
    desc = (description or "").strip()
    return f"{line} — {desc}" if desc else line


def _managed_pattern(name: str) -> re.Pattern[str]:
    return re.compile(r"^- \*\*" + re.escape(name) + r"\*\*[ \t]*(?:[·•][^\r\n]*|:[^\r\n]*)?(\r?\n|\Z)", re.MULTILINE)


def _existing_description(line: str, name: str) -> str | None:
    m = re.search(r"\s—\s(.*?)\s*\Z", line)
    if m:
        return m.group(1)
    m = re.match(r"\A- \*\*" + re.escape(name) + r"\*\*[ \t]*:\s*(.*?)\s*\Z", line)
    return m.group(1) if m else None


def _existing_owner(line: str) -> str | None:
    head = line.split(" — ", 1)[0]
    m = re.search(r" · from (\S+)", head)
    return m.group(1) if m else None


def upsert_index_text(content: str | None, name: str, scope: str, size: int, description: str | None,
                      owner: str | None = None) -> str:
    """``content`` with the managed line of ``name`` replaced in place (or appended). A blank
    ``description`` keeps the old one; the bundle owner (``· from X``) is kept unless given."""
    if content is None or not content.strip():
        return INDEX_HEADER + "\n\n" + managed_line(name, scope, size, description, owner) + "\n"
    pattern = _managed_pattern(name)
    m = pattern.search(content)
    if m:
        old = m.group(0).rstrip("\r\n")
        desc = description if (description or "").strip() else _existing_description(old, name)
        line = managed_line(name, scope, size, desc, owner or _existing_owner(old))
        return content[: m.start()] + line + m.group(1) + content[m.end():]
    line = managed_line(name, scope, size, description, owner)
    return f"{content}{line}\n" if content.endswith("\n") else f"{content}\n{line}\n"


def remove_index_text(content: str, name: str) -> str:
    """``content`` without the managed line of ``name``; 3+ newlines collapse into 2."""
    new = _managed_pattern(name).sub("", content)
    return re.sub(r"\n{3,}", "\n\n", new)


def update_index(dir_: Path, change: Callable[[str | None], str | None]) -> None:
    """Read-modify-write ``<dir>/index.md`` under the exclusive lock on ``<dir>/.index.lock``."""
    dir_.mkdir(parents=True, exist_ok=True)
    index = dir_ / f"{INDEX}.md"
    with storage.locked(dir_ / ".index"):
        content = index.read_bytes().decode("utf-8", errors="replace") if index.exists() else None
        new = change(content)
        if new is not None and new != content:
            storage.write_atomic(index, new)


def read_provenance(dir_: Path) -> dict[str, Any]:
    """The scope folder's provenance sidecar; {} when missing or unreadable."""
    try:
        data = json.loads((dir_ / PROVENANCE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record_provenance(dir_: Path, name: str, source: dict[str, Any] | None) -> None:
    """Note where the write of ``name`` came from in ``<dir>/.provenance.json`` (read-modify-write
    under the index lock; an unreadable sidecar is replaced). Nothing is written without a source
    (the CLI, bundles). Never raises: provenance is a hint."""
    from .ids import now_iso

    if not source:
        return

    entry = {k: (source or {}).get(k) for k in ("sessionId", "notebook", "cell", "gitCommit")}
    entry["writtenAt"] = now_iso()
    try:
        dir_.mkdir(parents=True, exist_ok=True)
        with storage.locked(dir_ / ".index"):
            data = read_provenance(dir_)
            data[name] = entry
            storage.write_atomic(dir_ / PROVENANCE, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    except OSError:
        pass


def _is_overlay_file(path: Path) -> bool:
    m = _OVERLAY_NAME.search(path.name)
    return bool(m) and (path.parent / (path.name[: m.start()] + ".md")).exists()


def clean_description(description: str | None) -> tuple[str | None, str | None]:
    """``(description, error)``: whitespace collapsed to one line; over 200 characters is refused."""
    if description is None:
        return None, None
    desc = " ".join(str(description).split())
    if len(desc) > MAX_DESCRIPTION:
        return None, (f"Error: description is too long ({len(desc)} characters; "
                      f"at most {MAX_DESCRIPTION}, on one line)")
    return (desc or None), None


class MemoryStore:
    """The named memories seen by one session: both scope folders, the model (for overlays) and
    the session's muted names."""

    def __init__(self, system_dir: Path, project_dir: Path, model: str | None = None,
                 muted: Iterable[str] | None = None) -> None:
        self.system_dir = Path(system_dir)
        self.project_dir = Path(project_dir)
        self.model = model
        self.muted: list[str] = normalize_mute_list(muted)
        #: where writes come from ({sessionId, notebook, cell, gitCommit}); set by the agent per turn
        self.provenance: dict[str, Any] | None = None

    def provenance_of(self, name: str, scope: str) -> dict[str, Any] | None:
        """The recorded provenance of the last write of ``name`` in ``scope``, if any."""
        entry = read_provenance(self.dir_for(scope)).get(name)
        return entry if isinstance(entry, dict) else None

    @classmethod
    def for_project(cls, root: Path, model: str | None = None, muted: Iterable[str] | None = None) -> MemoryStore:
        return cls(system_dir(), project_dir(root), model, muted)

    @property
    def model_key(self) -> str | None:
        return key_for(self.model)

    def dir_for(self, scope: str) -> Path:
        return self.project_dir if scope == "project" else self.system_dir

    @staticmethod
    def _scope(scope: str | None) -> tuple[str | None, str | None]:
        value = (scope or "").strip()
        if not value:
            return None, None
        if value in SCOPES:
            return value, None
        return None, f"Error: invalid scope '{scope}', expected one of: {', '.join(SCOPES)}"

    # -- indexes -------------------------------------------------------------------------------
    def index_text(self, scope: str) -> str:
        """The scope's ``index.md`` verbatim, else a listing of its entries, else ``No memories …``."""
        dir_ = self.dir_for(scope)
        index = dir_ / f"{INDEX}.md"
        if index.is_file():
            return index.read_bytes().decode("utf-8", errors="replace")
        files = sorted(p for p in dir_.glob("*.md") if p.is_file() and not _is_overlay_file(p)) if dir_.is_dir() else []
        if not files:
            return NO_MEMORIES
        return NO_INDEX + "\n".join(p.name[:-3] for p in files)

    def _visible_index(self, scope: str, annotate: bool = False) -> str:
        text = self.index_text(scope)
        if annotate:
            from . import bundles

            text = bundles.annotate_index(text, self.dir_for(scope))
        return filter_index(text, self.muted)

    def prompt_block(self) -> str:
        """The system-prompt injection: both indexes (muted lines dropped, bundle ``[needs …]``
        markers added for missing commands)."""
        return "\n".join(["Project memories:", self._visible_index("project", True), "",
                          "System memories:", self._visible_index("system", True)])

    def exists(self, name: str) -> bool:
        return any((self.dir_for(s) / f"{name}.md").is_file() for s in SCOPES)

    def mute_warnings(self, names: Iterable[str] | None = None) -> list[str]:
        """``Warning: --mute '<name>' matches no memory`` for each muted name with no file in either
        scope (the session starts anyway)."""
        names = self.muted if names is None else normalize_mute_list(names)
        return [f"Warning: --mute '{n}' matches no memory" for n in names if not self.exists(n)]

    # -- memory_read ---------------------------------------------------------------------------
    def read(self, name: str | None = "", scope: str | None = None) -> str:
        name = (name or "").strip()
        resolved, err = self._scope(scope)
        if err:
            return err
        if not name:
            if resolved:
                return self._visible_index(resolved)
            return "\n".join(["Project memories:", self._visible_index("project"), "",
                              "System memories:", self._visible_index("system")])
        names = [n.strip() for n in name.split(",") if n.strip()]
        if not names:
            return "Error: no memory names provided"
        for n in names:
            bad = name_error(n)
            if bad:
                return bad
        muted = [n for n in names if normalize_mute(n) in self.muted]
        allowed = [n for n in names if n not in muted]
        errors = [f"Error: memory '{n}' is muted for this session" for n in muted]
        if not allowed:
            return "\n".join(errors)
        text = self._read_names(allowed, resolved)
        return SEPARATOR.join([text, *errors]) if errors else text

    def _read_names(self, names: list[str], scope: str | None) -> str:
        key = self.model_key
        results: list[str] = []
        missing: list[str] = []
        for n in names:
            for s in ([scope] if scope else list(SCOPES)):
                path = self.dir_for(s) / f"{n}.md"
                if path.is_file():
                    body = path.read_text(encoding="utf-8", errors="replace")
                    overlay = self.dir_for(s) / f"{n}.{key}.md" if key else None
                    if overlay is not None and overlay.is_file():
                        body += (SEPARATOR + f"Model-specific guidance ({key}):\n"
                                 + overlay.read_text(encoding="utf-8", errors="replace"))
                    results.append(body)
                    break
            else:
                missing.append(n)
        if not results:
            return f"Error: memory not found: {', '.join(missing)}"
        text = SEPARATOR.join(results)
        return text + SEPARATOR + f"Error: memory not found: {', '.join(missing)}" if missing else text

    # -- memory_write --------------------------------------------------------------------------
    def write(self, scope: str | None, name: str | None, content: str | None, description: str | None = None,
              current_model_only: bool = False) -> str:
        name = (name or "").strip()
        body = "" if content is None else str(content)
        if not name:
            return "Error: entry name is required"
        if not (scope or "").strip():
            return "Error: scope is required"
        bad = name_error(name)
        if bad:
            return bad
        resolved, err = self._scope(scope)
        if err:
            return err
        assert resolved is not None
        desc, err = clean_description(description)
        if err:
            return err
        dir_ = self.dir_for(resolved)
        path = dir_ / f"{name}.md"
        if not body:
            if desc and name != INDEX and not current_model_only and path.is_file():
                size = path.stat().st_size
                update_index(dir_, lambda c: upsert_index_text(c, name, resolved, size, desc))
                record_provenance(dir_, name, self.provenance)
                return (f"Memory '{name}' description updated in {resolved} scope (file unchanged: {path})."
                        " Index line refreshed automatically.")
            return "Error: content is required"

        if current_model_only:
            key = self.model_key
            if not key:
                return "Error: model key is required for current_model_only writes"
            if not _KEY_OK.match(key):
                return "Error: invalid model key for current_model_only writes"
            if name == INDEX:
                return "Error: current_model_only is incompatible with the index entry"
            if not path.is_file():
                return (f"Error: no base entry '{name}' in {resolved} scope; a model overlay is only loaded "
                        "together with its base. Write the base entry first (without current_model_only), "
                        "then write the overlay.")
            overlay = dir_ / f"{name}.{key}.md"
            storage.write_atomic(overlay, body)
            record_provenance(dir_, f"{name}.{key}", self.provenance)
            size = len(body.encode("utf-8"))
            return (f"Model overlay '{name}' for {key} saved to {resolved} scope ({size} bytes). "
                    f"File written: {overlay}")

        size = len(body.encode("utf-8"))
        if name == INDEX:
            update_index(dir_, lambda _c: body)
            return f"Memory '{name}' saved to {resolved} scope ({size} bytes). File written: {path}"
        dir_.mkdir(parents=True, exist_ok=True)
        storage.write_atomic(path, body)
        update_index(dir_, lambda c: upsert_index_text(c, name, resolved, size, desc))
        record_provenance(dir_, name, self.provenance)
        return (f"Memory '{name}' saved to {resolved} scope ({size} bytes). File written: {path}"
                " Index line refreshed automatically.")

