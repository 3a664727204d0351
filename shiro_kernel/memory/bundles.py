"""Memory bundles (seed: samagotchi ``memory_bundle/installer.rb``, ``uninstaller.rb``, ``trash.rb``,
docs/memory.md): install, upgrade, status, uninstall and the prompt's ``[needs …]`` marker.

A bundle is a folder with ``manifest.yml`` and markdown memories (``SHIRO_HOME/bundles/<name>/`` or
any path; read by :mod:`~shiro_kernel.memory.manifest`). Installing copies its memories into a scope
folder, adds their index lines with ``· from <bundle>`` and keeps a record in
``<scope dir>/.bundles/<name>/manifest.json`` with the installed copies under ``bases/`` beside it (so
an upgrade can tell a user's edit from the bundle's text). ``needs:`` is advisory: a missing command
is reported and the bundle installs anyway; the prompt marks the bundle's index lines. What a bundle
operation takes away is moved, never deleted, into ``<scope dir>/.bundles/.trash/<label>-<time>/``
(:func:`trash_dir`, which ``memory_write``'s ``remove`` uses too).

Errors are :class:`BundleError` with the seed's texts; successes are lists of lines to print.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from ..errors import BundleError, CorruptFile
from ..ids import now_iso
from ..store import paths
from ..store.files import read_json, write_atomic, write_json
from ..store.private import make_dirs
from . import index_file
from .manifest import Manifest, load_manifest, marker, missing, missing_lines, parse_needs, status_lines

RECORDS = ".bundles"
TRASH = ".trash"


# -- where things go ------------------------------------------------------------------------------
def scope_dir(scope: str, project: Path | None = None) -> Path:
    if scope == "project":
        return index_file.project_dir(paths.project_root(project or Path.cwd()))
    return index_file.system_dir()


def _record_dir(dir_: Path, name: str) -> Path:
    return dir_ / RECORDS / name


def read_record(dir_: Path, name: str) -> dict[str, Any] | None:
    try:
        data = read_json(_record_dir(dir_, name) / "manifest.json")
    except CorruptFile:
        return None
    return data if isinstance(data, dict) else None


def find_installed(name: str, project: Path | None = None) -> tuple[str, Path, dict[str, Any]]:
    if index_file.name_problem(name) or not name.strip():
        raise BundleError(f"invalid bundle name '{name}': use a plain name (no /, \\ or ..)")
    for scope in ("system", "project"):
        dir_ = scope_dir(scope, project)
        record = read_record(dir_, name)
        if record is not None:
            return scope, dir_, record
    raise BundleError(f"bundle '{name}' is not installed")


def trash_dir(dir_: Path, label: str) -> Path:
    """A new folder (not created yet) for one operation's files in ``dir_``'s trash:
    ``<dir>/.bundles/.trash/<label>-<YYYYmmdd-HHMMSS>`` (``-1``, ``-2``… when taken)."""
    base = dir_ / RECORDS / TRASH / f"{label}-{time.strftime('%Y%m%d-%H%M%S')}"
    target, n = base, 1
    while target.exists():
        target = base.with_name(f"{base.name}-{n}")
        n += 1
    return target


def owner_of(dir_: Path, fname: str) -> str | None:
    """The installed bundle of ``dir_`` whose record lists ``fname`` (``x.md``), or None."""
    for name in installed(dir_):
        record = read_record(dir_, name)
        if record is not None and fname in (record.get("files") or []):
            return str(record.get("name") or name)
    return None


# -- install / upgrade ----------------------------------------------------------------------------
def install(
    path: str | Path,
    scope: str | None = None,
    dry_run: bool = False,
    force: bool = False,
    *,
    project: Path | None = None,
    env_path: str | None = None,
) -> list[str]:
    """Install a bundle; returns the lines to print. A same-name memory that is not this bundle's is
    ``Skipped`` (it stays the user's) unless ``force``."""
    return _install(path, scope, dry_run, force, project, env_path, upgrade=False)


def upgrade(
    path: str | Path,
    scope: str | None = None,
    dry_run: bool = False,
    force: bool = False,
    *,
    project: Path | None = None,
    env_path: str | None = None,
) -> list[str]:
    """Upgrade an installed bundle: its files are replaced, except ones the user edited since the
    install (``Skipped`` unless ``force``); files the new version dropped go to the trash."""
    return _install(path, scope, dry_run, force, project, env_path, upgrade=True)


def _install(
    path: str | Path,
    scope: str | None,
    dry_run: bool,
    force: bool,
    project: Path | None,
    env_path: str | None,
    upgrade: bool,
) -> list[str]:
    manifest = load_manifest(path)
    scope, dir_, record = _where(manifest, scope, project, upgrade)
    owned = set(record.get("files", [])) if record else set()
    written, skipped = _choose(manifest, dir_, scope, owned, force=force, upgrade=upgrade, dry_run=dry_run)
    dropped = sorted(owned - set(manifest.files)) if upgrade else []
    notes = missing_lines(manifest.needs, env_path)
    if manifest.ignored:
        notes.append(f"Note: manifest fields shiro does not use were ignored: {', '.join(manifest.ignored)}")
    lines = [_headline(manifest, scope, record, written, upgrade=upgrade, dry_run=dry_run), *skipped.values()]
    if dry_run:
        if dropped:
            lines.append(f"Would Move to the trash (no longer in the bundle): {', '.join(dropped)}")
        return lines + notes
    make_dirs(dir_)
    _write_files(manifest, dir_, scope, written)
    if dropped:
        lines.append(_trash_dropped(dir_, manifest.name, dropped))
    _write_record(manifest, dir_, scope, record, (owned - set(dropped)) | set(written), sorted(skipped))
    return lines + notes


def _where(
    manifest: Manifest, scope: str | None, project: Path | None, upgrade: bool
) -> tuple[str, Path, dict[str, Any] | None]:
    """The scope a bundle goes to (the one asked for; on an upgrade, the one it is installed in; else
    the manifest's; else system), that scope's folder and the bundle's record there (None if none)."""
    if scope is not None and scope not in index_file.SCOPES:
        raise BundleError(f"invalid scope '{scope}', expected one of: {', '.join(index_file.SCOPES)}")
    if upgrade and scope is None:
        try:
            scope = find_installed(manifest.name, project)[0]
        except BundleError:
            pass
    scope = scope or manifest.scope or "system"
    dir_ = scope_dir(scope, project)
    record = read_record(dir_, manifest.name)
    if upgrade and record is None:
        raise BundleError(f"bundle '{manifest.name}' is not installed in {scope} scope; use install")
    return scope, dir_, record


def _choose(
    manifest: Manifest, dir_: Path, scope: str, owned: set[str], *, force: bool, upgrade: bool, dry_run: bool
) -> tuple[list[str], dict[str, str]]:
    """The bundle's files to write, and the ones skipped with the line saying why: a same-name memory
    that is not the bundle's, or (on an upgrade) one the user changed since the install; none if
    ``force``."""
    skip = "Would skip" if dry_run else "Skipped"
    bases = _record_dir(dir_, manifest.name) / "bases"
    written: list[str] = []
    skipped: dict[str, str] = {}
    for fname in manifest.files:
        target = dir_ / fname
        if target.exists() and not force:
            if fname not in owned:
                skipped[fname] = (
                    f"{skip} {fname}: a memory of that name already exists in {scope} scope "
                    "and is not from this bundle; it stays yours (--force overwrites it)"
                )
                continue
            base = bases / fname
            if upgrade and base.is_file() and base.read_bytes() != target.read_bytes():
                skipped[fname] = (
                    f"{skip} {fname}: changed since it was installed; your version stays (--force overwrites it)"
                )
                continue
        written.append(fname)
    return written, skipped


def _headline(
    manifest: Manifest, scope: str, record: dict[str, Any] | None, written: list[str], *, upgrade: bool, dry_run: bool
) -> str:
    what = ", ".join(written) if written else "no files"
    if upgrade:
        old = record.get("version") if record else None
        verb = "Would upgrade" if dry_run else "Upgraded"
        return f"{verb} {manifest.name} {old} → {manifest.version} in {scope} scope: {what}"
    verb = "Would install" if dry_run else "Installed"
    return f"{verb} {manifest.name} {manifest.version} into {scope} scope: {what}"


def _write_files(manifest: Manifest, dir_: Path, scope: str, written: list[str]) -> None:
    """Copy each file into the scope folder and the record's ``bases/``, and write its index line."""
    bases = _record_dir(dir_, manifest.name) / "bases"
    for fname in written:
        data = (manifest.dir / fname).read_bytes()
        write_atomic(dir_ / fname, data)
        write_atomic(bases / fname, data)
        _index_line(dir_, fname[:-3], scope, len(data), manifest.files[fname]["description"], manifest.name)


def _trash_dropped(dir_: Path, name: str, dropped: list[str]) -> str:
    """Move the files an upgrade dropped to the trash (and forget their bases); the line saying so."""
    trash = trash_dir(dir_, name)
    moved = _move_files(dir_, dropped, trash)
    for fname in dropped:
        (_record_dir(dir_, name) / "bases" / fname).unlink(missing_ok=True)
    if moved:
        return f"Moved to the trash: {', '.join(moved)} ({trash})"
    return f"No longer in the bundle (already gone): {', '.join(dropped)}"


def _write_record(
    manifest: Manifest, dir_: Path, scope: str, record: dict[str, Any] | None, files: set[str], skipped: list[str]
) -> None:
    """The bundle's record in ``<scope dir>/.bundles/<name>/manifest.json`` (its first install time kept)."""
    now = now_iso()
    write_json(
        _record_dir(dir_, manifest.name) / "manifest.json",
        {
            "name": manifest.name,
            "version": manifest.version,
            "scope": scope,
            "description": manifest.description,
            "source": str(manifest.dir),
            "files": sorted(files),
            "skipped": skipped,
            "needs": manifest.needs_raw,
            "installedAt": (record or {}).get("installedAt", now),
            "updatedAt": now,
        },
    )


def _index_line(dir_: Path, name: str, scope: str, size: int, description: str | None, owner: str) -> None:
    """Write (or refresh) a bundle memory's managed line in its scope's ``index.md``."""
    index_file.update_index(
        dir_, lambda content: index_file.upsert_index_text(content, name, scope, size, description, owner=owner)
    )


def _drop_index_line(dir_: Path, name: str) -> None:
    def change(content: str | None) -> str | None:
        return None if content is None else index_file.remove_index_text(content, name)

    index_file.update_index(dir_, change)


def _move_files(dir_: Path, names: list[str], trash: Path) -> list[str]:
    moved = []
    for fname in names:
        src = dir_ / fname
        if src.is_file():
            make_dirs(trash)
            os.replace(src, trash / fname)
            moved.append(fname)
        _drop_index_line(dir_, fname[:-3])
    return moved


# -- status / uninstall ---------------------------------------------------------------------------
def status(name: str, *, project: Path | None = None, env_path: str | None = None) -> list[str]:
    scope, _dir, record = find_installed(name, project)
    lines = [
        f"{record.get('name', name)} {record.get('version', '?')} ({scope} scope), installed "
        f"{str(record.get('installedAt', '?'))[:10]}",
        "files: " + (", ".join(record.get("files", [])) or "none"),
    ]
    if record.get("skipped"):
        lines.append("skipped (kept the user's file): " + ", ".join(record["skipped"]))
    try:
        lines += status_lines(parse_needs(record.get("needs")), env_path)
    except BundleError as exc:
        lines.append(f"needs: unreadable ({exc})")
    return lines


def uninstall(name: str, dry_run: bool = False, *, project: Path | None = None) -> list[str]:
    scope, dir_, record = find_installed(name, project)
    files = [f for f in record.get("files", []) if isinstance(f, str) and index_file.name_problem(f) is None]
    present = [f for f in files if (dir_ / f).is_file()]
    if dry_run:
        return [
            f"Would uninstall {name} {record.get('version', '?')} from {scope} scope",
            f"Would move to the trash: {', '.join(present) or 'no files'} ({dir_ / RECORDS / TRASH})",
        ]
    trash = trash_dir(dir_, name)
    moved = _move_files(dir_, files, trash)
    make_dirs(trash)
    os.replace(_record_dir(dir_, name), trash / ".record")
    return [
        f"Uninstalled {name} {record.get('version', '?')} from {scope} scope",
        f"Moved to the trash: {', '.join(moved) or 'no files'} ({trash})",
    ]


# -- the prompt's marker --------------------------------------------------------------------------
def annotate_index(text: str, scope_dir: Path, env_path: str | None = None) -> str:
    """``text`` (one scope's index) with `` [needs gh, jq: not found on PATH]`` after every line of an
    installed bundle's memory whose needs are missing. Every other byte stays; any problem returns
    ``text`` unchanged."""
    try:
        records = Path(scope_dir) / RECORDS
        if not records.is_dir():
            return text
        marks: dict[str, str] = {}
        for rec in sorted(records.iterdir()):
            if rec.name == TRASH or not rec.is_dir():
                continue
            record = read_record(Path(scope_dir), rec.name)
            if record is None:
                continue
            try:
                mark = marker(missing(parse_needs(record.get("needs")), env_path))
            except BundleError:
                continue
            if mark:
                for fname in record.get("files", []):
                    if isinstance(fname, str) and fname.endswith(".md"):
                        marks.setdefault(fname[:-3], mark)
        if not marks:
            return text
        out = []
        for line in text.splitlines(keepends=True):
            body = line.rstrip("\r\n")
            m = index_file.INDEX_LINE.match(body)
            if m and m.group(1) in marks:
                line = f"{body} {marks[m.group(1)]}{line[len(body) :]}"
            out.append(line)
        return "".join(out)
    except Exception:
        return text


def installed(scope_dir_: Path) -> list[str]:
    records = Path(scope_dir_) / RECORDS
    return sorted(p.name for p in records.iterdir() if p.is_dir() and p.name != TRASH) if records.is_dir() else []


__all__ = [
    "annotate_index",
    "find_installed",
    "install",
    "installed",
    "owner_of",
    "read_record",
    "scope_dir",
    "status",
    "trash_dir",
    "uninstall",
    "upgrade",
]
