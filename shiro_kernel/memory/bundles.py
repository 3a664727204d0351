"""Memory bundles (seed: samagotchi ``memory_bundle/manifest.rb``, ``bundle_needs.rb``, docs/memory.md).

A bundle is a folder with ``manifest.yml`` and markdown memories (``SHIRO_HOME/bundles/<name>/`` or
any path). Installing copies its memories into a scope folder, adds their index lines with
``· from <bundle>`` and keeps a record in ``<scope dir>/.bundles/<name>/manifest.json`` with the
installed copies under ``bases/`` beside it (so an upgrade can tell a user's edit from the bundle's
text). ``needs:`` is advisory: commands are looked up on ``PATH`` (no subprocess), a missing one is
reported and the bundle installs anyway; the prompt marks the bundle's index lines.

Errors are :class:`BundleError` with the seed's texts; successes are lists of lines to print.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BundleError, CorruptFile
from ..store import paths
from ..store.files import read_json, write_atomic, write_json
from ..store.ids import now_iso
from . import index_file

MANIFEST = "manifest.yml"
RECORDS = ".bundles"
TRASH = ".trash"
_COMMAND = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]*")
_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
#: manifest keys samagotchi knows but shiro does not act on (parsed, reported once, ignored)
IGNORED_KEYS = ("hooks", "plugin", "trust_level", "requires_chi", "includes")


@dataclass(frozen=True)
class Need:
    command: str
    why: str | None = None
    hint: str | None = None


@dataclass
class Manifest:
    name: str
    version: str
    dir: Path
    scope: str | None = None
    description: str | None = None
    #: file name → {"sha256": "sha256:<hex>" | None, "description": str | None}
    files: dict[str, dict[str, str | None]] = field(default_factory=dict)
    needs: list[Need] = field(default_factory=list)
    needs_raw: Any = None
    ignored: list[str] = field(default_factory=list)


# -- needs ----------------------------------------------------------------------------------------
def _inspect(value: Any) -> str:
    """Roughly Ruby's ``inspect``, which the seed's error texts use."""
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (str, dict, list)):
        return json.dumps(value, ensure_ascii=False, default=str)
    return str(value)


def _blank_none(value: Any) -> str | None:
    text = "" if value is None else str(value).strip()
    return text or None


def parse_needs(raw: Any) -> list[Need]:
    """``needs:`` → needs (long and short forms), duplicates merged keeping the first why/hint."""
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise BundleError("needs: must be a list of commands")
    out: dict[str, Need] = {}
    for item in raw:
        if isinstance(item, str):
            command, why, hint = item.strip(), None, None
        elif isinstance(item, dict) and "command" in item:
            command = item["command"].strip() if isinstance(item["command"], str) else item["command"]
            why, hint = _blank_none(item.get("why")), _blank_none(item.get("hint"))
        else:
            raise BundleError(f"needs: each item must be a command name or a mapping with command:, not {_inspect(item)}")
        if not isinstance(command, str) or not _COMMAND.fullmatch(command):
            raise BundleError(f"needs: {_inspect(command)} is not a plain command name")
        out.setdefault(command, Need(command, why, hint))
    return list(out.values())


def found(command: str, path: str | None = None) -> bool:
    """True when some non-empty ``PATH`` entry holds an executable regular file named ``command``."""
    path = os.environ.get("PATH") if path is None else path
    if not path:
        return False
    for folder in path.split(os.pathsep):
        if not folder:
            continue
        candidate = os.path.join(folder, command)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return True
    return False


def missing(needs: list[Need], path: str | None = None) -> list[Need]:
    return [n for n in needs if not found(n.command, path)]


def marker(missing_needs: list[Need]) -> str | None:
    """``[needs gh, jq: not found on PATH]``, or None when nothing is missing (no em dash on purpose:
    the index's description is what follows `` — ``)."""
    if not missing_needs:
        return None
    return f"[needs {', '.join(n.command for n in missing_needs)}: not found on PATH]"


def missing_lines(needs: list[Need], path: str | None = None) -> list[str]:
    """Install/upgrade: one line per missing command."""
    lines = []
    for n in missing(needs, path):
        hint = f" ({n.hint})" if n.hint else ""
        lines.append(f"needs {n.command}: not found on PATH{hint}; installed anyway")
    return lines


def status_lines(needs: list[Need], path: str | None = None) -> list[str]:
    lines = []
    for n in needs:
        if found(n.command, path):
            why = f" ({n.why})" if n.why else ""
            lines.append(f"needs {n.command}{why} [ok]")
        else:
            lines.append(f"needs {n.command} [not found]" + (f": {n.hint}" if n.hint else ""))
    return lines


# -- manifest -------------------------------------------------------------------------------------
def bundle_dir(path: str | Path) -> Path:
    """The folder of a bundle given as a folder, its ``manifest.yml``, or a name under
    ``SHIRO_HOME/bundles/``."""
    candidate = Path(path).expanduser()
    if candidate.name == MANIFEST and candidate.is_file():
        return candidate.parent
    if not candidate.is_dir() and index_file.name_problem(str(path)) is None and str(path).strip():
        named = paths.home() / "bundles" / str(path)
        if named.is_dir():
            return named
    return candidate


def load_manifest(path: str | Path) -> Manifest:
    import yaml

    folder = bundle_dir(path)
    file = folder / MANIFEST
    if not file.is_file():
        raise BundleError(f"manifest.yml not found in {folder}")
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise BundleError(f"manifest.yml in {folder} is not valid YAML: {exc}") from None
    if not isinstance(data, dict):
        raise BundleError(f"manifest.yml in {folder} must be a mapping")
    for key in ("name", "version"):
        value = data.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and key == "version":
            data[key] = value = str(value)
        if not isinstance(value, str) or not value.strip():
            raise BundleError(f"manifest missing required field: {key}")
    name = data["name"].strip()
    if not _PLAIN.fullmatch(name):
        raise BundleError(f"manifest name {_inspect(name)} is not a plain name (letters, digits, . _ -)")
    scope = data.get("scope")
    scope = scope.strip().lower() if isinstance(scope, str) else None
    manifest = Manifest(
        name=name,
        version=data["version"].strip(),
        dir=folder,
        scope=scope if scope in index_file.SCOPES else None,
        description=_blank_none(data.get("description")),
        needs=parse_needs(data.get("needs")),
        needs_raw=data.get("needs"),
        ignored=[k for k in IGNORED_KEYS if k in data],
    )
    manifest.files = _manifest_files(data.get("files"), folder)
    return manifest


def _manifest_files(raw: Any, folder: Path) -> dict[str, dict[str, str | None]]:
    if raw is None:
        names = sorted(p.name for p in folder.glob("*.md") if p.is_file())
        raw = {n: None for n in names}
    if isinstance(raw, list):
        raw = {n: None for n in raw}
    if not isinstance(raw, dict):
        raise BundleError("files: must be a mapping of file name to sha256")
    files: dict[str, dict[str, str | None]] = {}
    for fname, spec in raw.items():
        fname = str(fname)
        if (index_file.name_problem(fname) or not fname.endswith(".md") or fname == f"{index_file.INDEX}.md"
                or not _PLAIN.fullmatch(fname)):
            raise BundleError(f"files: {_inspect(fname)} is not a plain .md memory file name")
        if isinstance(spec, dict):
            digest, desc = spec.get("sha256"), _blank_none(spec.get("description"))
        else:
            digest, desc = spec, None
        digest = _blank_none(digest)
        if digest and not digest.startswith("sha256:"):
            digest = "sha256:" + digest
        src = folder / fname
        if not src.is_file():
            raise BundleError(f"files: {fname} is listed in the manifest but not found in {folder}")
        if digest:
            actual = "sha256:" + hashlib.sha256(src.read_bytes()).hexdigest()
            if actual.lower() != digest.lower():
                raise BundleError(f"files: {fname} does not match its checksum (manifest {digest}, file {actual})")
        files[fname] = {"sha256": digest, "description": desc}
    return files


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


def _trash_dir(dir_: Path, label: str) -> Path:
    base = dir_ / RECORDS / TRASH / f"{label}-{time.strftime('%Y%m%d-%H%M%S')}"
    target, n = base, 1
    while target.exists():
        target = base.with_name(f"{base.name}-{n}")
        n += 1
    return target


# -- install / upgrade ----------------------------------------------------------------------------
def install(path: str | Path, scope: str | None = None, dry_run: bool = False, force: bool = False, *,
            project: Path | None = None, env_path: str | None = None) -> list[str]:
    """Install a bundle; returns the lines to print. A same-name memory that is not this bundle's is
    ``Skipped`` (it stays the user's) unless ``force``."""
    return _install(path, scope, dry_run, force, project, env_path, upgrade=False)


def upgrade(path: str | Path, scope: str | None = None, dry_run: bool = False, force: bool = False, *,
            project: Path | None = None, env_path: str | None = None) -> list[str]:
    """Upgrade an installed bundle: its files are replaced, except ones the user edited since the
    install (``Skipped`` unless ``force``); files the new version dropped go to the trash."""
    return _install(path, scope, dry_run, force, project, env_path, upgrade=True)


def _install(path: str | Path, scope: str | None, dry_run: bool, force: bool, project: Path | None,
             env_path: str | None, upgrade: bool) -> list[str]:
    manifest = load_manifest(path)
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
    owned = set(record.get("files", [])) if record else set()
    bases = _record_dir(dir_, manifest.name) / "bases"
    would = "Would " if dry_run else ""
    skip = "Would skip" if dry_run else "Skipped"

    lines: list[str] = []
    written: list[str] = []
    skipped: list[str] = []
    for fname in manifest.files:
        target = dir_ / fname
        if target.exists() and not force:
            if fname not in owned:
                skipped.append(fname)
                lines.append(f"{skip} {fname}: a memory of that name already exists in {scope} scope "
                             "and is not from this bundle; it stays yours (--force overwrites it)")
                continue
            base = bases / fname
            if upgrade and base.is_file() and base.read_bytes() != target.read_bytes():
                skipped.append(fname)
                lines.append(f"{skip} {fname}: changed since it was installed; "
                             "your version stays (--force overwrites it)")
                continue
        written.append(fname)
    dropped = sorted(owned - set(manifest.files)) if upgrade else []

    old = record.get("version") if record else None
    what = ", ".join(written) if written else "no files"
    if upgrade:
        lines.insert(0, f"{'Would upgrade' if dry_run else 'Upgraded'} {manifest.name} {old} → "
                        f"{manifest.version} in {scope} scope: {what}")
    else:
        lines.insert(0, f"{'Would install' if dry_run else 'Installed'} {manifest.name} {manifest.version} "
                        f"into {scope} scope: {what}")
    if dropped:
        lines.append(f"{would}Move to the trash (no longer in the bundle): {', '.join(dropped)}")
    lines += missing_lines(manifest.needs, env_path)
    if manifest.ignored:
        lines.append(f"Note: manifest fields shiro does not use were ignored: {', '.join(manifest.ignored)}")
    if dry_run:
        return lines

    dir_.mkdir(parents=True, exist_ok=True)
    rec_dir = _record_dir(dir_, manifest.name)
    for fname in written:
        data = (manifest.dir / fname).read_bytes()
        write_atomic(dir_ / fname, data)
        write_atomic(rec_dir / "bases" / fname, data)
        stem = fname[:-3]
        desc = manifest.files[fname]["description"]
        index_file.update_index(dir_, lambda c, stem=stem, size=len(data), desc=desc: index_file.upsert_index_text(
            c, stem, scope, size, desc, owner=manifest.name))
    if dropped:
        trash = _trash_dir(dir_, manifest.name)
        moved = _move_files(dir_, dropped, trash)
        for fname in dropped:
            (rec_dir / "bases" / fname).unlink(missing_ok=True)
        at = lines.index(f"Move to the trash (no longer in the bundle): {', '.join(dropped)}")
        lines[at] = (f"Moved to the trash: {', '.join(moved)} ({trash})" if moved
                     else f"No longer in the bundle (already gone): {', '.join(dropped)}")
    keep_owned = (owned - set(dropped)) | set(written)
    now = now_iso()
    write_json(rec_dir / "manifest.json", {
        "name": manifest.name,
        "version": manifest.version,
        "scope": scope,
        "description": manifest.description,
        "source": str(manifest.dir),
        "files": sorted(keep_owned),
        "skipped": sorted(skipped),
        "needs": manifest.needs_raw,
        "installedAt": (record or {}).get("installedAt", now),
        "updatedAt": now,
    })
    return lines


def _move_files(dir_: Path, names: list[str], trash: Path) -> list[str]:
    moved = []
    for fname in names:
        src = dir_ / fname
        if src.is_file():
            trash.mkdir(parents=True, exist_ok=True)
            os.replace(src, trash / fname)
            moved.append(fname)
        index_file.update_index(dir_, lambda c, stem=fname[:-3]: None if c is None else index_file.remove_index_text(c, stem))
    return moved


# -- status / uninstall ---------------------------------------------------------------------------
def status(name: str, *, project: Path | None = None, env_path: str | None = None) -> list[str]:
    scope, _dir, record = find_installed(name, project)
    lines = [f"{record.get('name', name)} {record.get('version', '?')} ({scope} scope), installed "
             f"{str(record.get('installedAt', '?'))[:10]}",
             "files: " + (", ".join(record.get("files", [])) or "none")]
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
        return [f"Would uninstall {name} {record.get('version', '?')} from {scope} scope",
                f"Would move to the trash: {', '.join(present) or 'no files'} ({dir_ / RECORDS / TRASH})"]
    trash = _trash_dir(dir_, name)
    moved = _move_files(dir_, files, trash)
    trash.mkdir(parents=True, exist_ok=True)
    os.replace(_record_dir(dir_, name), trash / ".record")
    return [f"Uninstalled {name} {record.get('version', '?')} from {scope} scope",
            f"Moved to the trash: {', '.join(moved) or 'no files'} ({trash})"]


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
                line = f"{body} {marks[m.group(1)]}{line[len(body):]}"
            out.append(line)
        return "".join(out)
    except Exception:
        return text


def installed(scope_dir_: Path) -> list[str]:
    records = Path(scope_dir_) / RECORDS
    return sorted(p.name for p in records.iterdir() if p.is_dir() and p.name != TRASH) if records.is_dir() else []


__all__ = ["BundleError", "Manifest", "Need", "annotate_index", "found", "install", "installed", "load_manifest",
           "marker", "missing", "parse_needs", "status", "uninstall", "upgrade"]
