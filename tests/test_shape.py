"""The package's shape as gates (issues 24 and 34): no module over 800 lines (a ceiling against god modules), no function over 80 (scripts/sizes.py's
rule), no import circle counting every import (``TYPE_CHECKING`` ones and those inside functions), and the lower layers importing nothing above them
(session.py, errors.py and store/)."""

from __future__ import annotations

import ast
import runpy
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "shiro_kernel"
SIZES = Path(__file__).resolve().parents[1] / "scripts" / "sizes.py"


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        if "labextension" in path.parts:
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def imports(name: str, path: Path, known: dict[str, Path], *, anywhere: bool = True) -> set[str]:
    """What a module imports: every import it makes, at its top level, under ``if TYPE_CHECKING:`` and inside its
    functions (a lazy import is for speed at ``%load_ext``, never a way around a circle); ``anywhere=False``: the
    top level and ``if`` blocks only."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if anywhere:
        nodes = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    else:
        nodes = list(tree.body) + [n for s in tree.body if isinstance(s, ast.If) for n in s.body]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            prefix = (f"{base}.{node.module}" if node.module else base) if node.level else (node.module or "")
            for alias in node.names:
                target = f"{prefix}.{alias.name}"
                out.add(target if target in known else prefix)
    return {m for m in out if m in known and m != name}


def test_no_module_over_800_lines_and_no_function_over_80():
    over = runpy.run_path(str(SIZES))["over"](PACKAGE)
    assert over == []


def test_no_import_circle_counting_every_import():
    known = modules()
    graph = {name: imports(name, path, known) for name, path in known.items()}
    circles = []
    for start in graph:  # a depth-first walk from each module: any way back to it is a circle
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in graph[node]:
                if nxt == start:
                    circles.append(" -> ".join([*path, start]))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    assert circles == []


def test_the_lower_layers_import_nothing_above_them():
    known = modules()
    below = {"shiro_kernel.session", "shiro_kernel.errors", "shiro_kernel.ids"} | {
        m for m in known if m.startswith("shiro_kernel.store")
    }
    allowed = (
        "shiro_kernel.store",
        "shiro_kernel.transcript",
        "shiro_kernel.events",
        "shiro_kernel.tasks",
        "shiro_kernel.text",
        "shiro_kernel.errors",
        "shiro_kernel.config",
        "shiro_kernel.session",
        "shiro_kernel.egress",
        "shiro_kernel.ids",
    )
    wrong = {
        m: sorted(t for t in imports(m, known[m], known) if not t.startswith(allowed) and t != "shiro_kernel")
        for m in below
    }
    assert {m: t for m, t in wrong.items() if t} == {}
