"""The one map of the code (docs/architecture.md) stays true: every path it names exists, and every dotted name
(``turn.TurnOptions``, ``client.Provider.stream``, ``ui/render.TurnLog.feed``) is a module's attribute or a class's."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from typing import Any

import shiro_kernel

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "shiro_kernel"
MAP = ROOT / "docs" / "architecture.md"

_CODE = re.compile(r"`([^`]+)`")
_PATH = re.compile(r"^[\w.-]+(?:/[\w.-]*)*$")
_DOTTED = re.compile(r"^(?:[\w]+/)*[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+(?:\(.*\))?$")


def _modules() -> dict[str, list[Any]]:
    """Every module of the package by its last name, and every class defined in one by its name."""
    names: dict[str, list[Any]] = {}
    for info in pkgutil.walk_packages(shiro_kernel.__path__, "shiro_kernel."):
        if info.name.endswith(".__main__"):
            continue  # running it is the CLI
        module = importlib.import_module(info.name)
        names.setdefault(info.name.rsplit(".", 1)[-1], []).append(module)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                names.setdefault(cls.__name__, []).append(cls)
    return names


def _resolves(token: str, names: dict[str, list[Any]]) -> bool:
    token = token.split("(", 1)[0]
    if "/" in token:  # ui/render.TurnLog.feed: the module by its path, then its attributes
        path, _, rest = token.partition(".")
        try:
            heads = [importlib.import_module("shiro_kernel." + path.replace("/", "."))]
        except ImportError:
            return False
        parts = rest.split(".") if rest else []
    else:
        first, *parts = token.split(".")
        heads = names.get(first, [])
    for obj in heads:
        for part in parts:
            obj = getattr(obj, part, None)
            if obj is None:
                break
        else:
            return True
    return False


def _path_exists(token: str, package: str | None) -> bool:
    token = token.rstrip("/") or token
    bases = [ROOT, PACKAGE] + ([PACKAGE / package] if package else [])
    return any((base / token).exists() or (base / f"{token}.py").exists() for base in bases)


def _named() -> list[tuple[str, str | None]]:
    """Each code span of the map, with the package its table row is about (the row's first path ending in /)."""
    found: list[tuple[str, str | None]] = []
    for line in MAP.read_text(encoding="utf-8").splitlines():
        tokens = _CODE.findall(line)
        package = None
        if line.startswith("| `"):
            first = _CODE.findall(line.split("|")[1])
            package = next((t.rstrip("/") for t in first if t.endswith("/")), None)
        found += [(t, package) for t in tokens]
    return found


def test_every_path_and_name_the_map_gives_exists():
    names = _modules()
    missing = []
    for token, package in _named():
        if token.endswith((".py", ".md", ".ts", "/")) or ("/" in token and _PATH.match(token)):
            known = _path_exists(token, package) or _resolves(token, names)
        else:
            known = not _DOTTED.match(token) or token.endswith((".json", ".ipynb")) or _resolves(token, names)
        if not known:
            missing.append(token)
    assert missing == []


def test_the_map_holds_every_module_of_the_package():
    text = MAP.read_text(encoding="utf-8")
    unnamed = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if path.name.startswith("_") or rel.parts[0] in ("cli", "labextension"):
            continue  # private modules, package inits and the CLI's commands are named by their package's row
        if f"`{path.name}`" not in text and f"`{rel.with_suffix('').as_posix()}" not in text:
            unnamed.append(rel.as_posix())
    assert unnamed == []


def test_readme_links_the_map_and_keeps_no_layout_of_its_own():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    layout = readme[readme.index("## Layout") :]
    assert "(docs/architecture.md)" in layout and "| where | what |" not in readme
