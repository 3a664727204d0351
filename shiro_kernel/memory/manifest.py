"""A memory bundle's ``manifest.yml`` and its ``needs:`` (seed: samagotchi ``memory_bundle/manifest.rb``,
``bundle_needs.rb``, docs/memory.md).

:func:`load_manifest` reads and checks a bundle folder's manifest (the fields shiro uses, checksums of
the listed files); :func:`parse_needs` and the helpers below it say which of a bundle's outside
commands are missing from ``PATH`` (a lookup, no subprocess) in the seed's words. Installing lives in
:mod:`~shiro_kernel.memory.bundles`. Errors are :class:`~shiro_kernel.errors.BundleError` with the
seed's texts.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..errors import BundleError
from ..store import paths
from . import index_file

MANIFEST = "manifest.yml"
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
            raise BundleError(
                f"needs: each item must be a command name or a mapping with command:, not {_inspect(item)}"
            )
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
        if (
            index_file.name_problem(fname)
            or not fname.endswith(".md")
            or fname == f"{index_file.INDEX}.md"
            or not _PLAIN.fullmatch(fname)
        ):
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


__all__ = [
    "MANIFEST",
    "Manifest",
    "Need",
    "bundle_dir",
    "found",
    "load_manifest",
    "marker",
    "missing",
    "missing_lines",
    "parse_needs",
    "status_lines",
]
