"""The size rule: no module of the package over 800 lines, no function over 80.

The module ceiling is a guard against god modules, never a reason to move code (issue 34): a module is split
when it holds several concepts, by concept, not when it nears a number.

Prints each one over, and exits 1 when there is any: ``.venv/bin/python scripts/sizes.py [FOLDER]``
(``shiro_kernel`` by default; the built labextension is skipped). A function's length is its
``def`` line to its last line, decorators left out, nested functions counted in their parent too.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

MODULE_LINES = 800
FUNCTION_LINES = 80


def over(root: Path) -> list[str]:
    """One line per module or function of ``root`` over its limit, in path order."""
    found: list[str] = []
    for path in sorted(root.rglob("*.py")):
        if "labextension" in path.parts:
            continue
        source = path.read_text(encoding="utf-8")
        lines = len(source.splitlines())
        if lines > MODULE_LINES:
            found.append(f"module   {path}: {lines} lines (> {MODULE_LINES})")
        for node in ast.walk(ast.parse(source, str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = (node.end_lineno or node.lineno) - node.lineno + 1
                if length > FUNCTION_LINES:
                    found.append(f"function {path}:{node.lineno} {node.name}: {length} lines (> {FUNCTION_LINES})")
    return found


def main(argv: list[str]) -> int:
    found = over(Path(argv[0] if argv else "shiro_kernel"))
    print("\n".join(found) if found else f"no module over {MODULE_LINES} lines, no function over {FUNCTION_LINES}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
