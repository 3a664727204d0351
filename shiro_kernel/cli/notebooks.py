"""``shiro export NOTEBOOK [-o OUT]`` (:mod:`shiro_kernel.rerun.export`) and ``shiro check NOTEBOOK``
(:mod:`shiro_kernel.rerun.check`).

Exit status: 0 when done (export) or when the notebook reproduces (check), 1 when it does not, 2 for a usage
error (no such notebook, not a notebook, a kernel that does not start).

What they print quotes the notebook (its outputs, errors, file name), which anyone may have written: every
line goes through :func:`~shiro_kernel.ui.sanitize.plain_text`, so no escape sequence in it reaches the
terminal (a window title, a clipboard write, a hyperlink, colours or cursor moves show as U+FFFD).
"""

from __future__ import annotations

import argparse
import json
import sys

from ..errors import RequestError
from ..ui.sanitize import plain_text
from .command import Command

USAGE = 2


def _say(text: str, error: bool = False) -> None:
    """Print ``text`` with no control character a terminal would obey (see the module's doc)."""
    print(plain_text(text), file=sys.stderr if error else sys.stdout)


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb to export")
    parser.add_argument(
        "-o", "--output", metavar="OUT", help="where to write it (default: NAME.export.ipynb beside it)"
    )


def _export_run(args: argparse.Namespace) -> int:
    from ..rerun.export import export_notebook

    try:
        result = export_notebook(args.notebook, args.output)
    except RequestError as exc:
        _say(f"shiro: {exc}", error=True)
        return USAGE
    _say(result.summary())
    return 0


def _check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("notebook", metavar="NOTEBOOK", help="the .ipynb to check")
    parser.add_argument("--timeout", type=float, default=600.0, metavar="S", help="seconds per cell (default 600)")
    parser.add_argument(
        "--kernel", metavar="NAME", help="the kernel to run it in (default: the notebook's, else python3)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def _check_run(args: argparse.Namespace) -> int:
    from ..rerun.check import check_notebook

    try:
        result = check_notebook(args.notebook, timeout=args.timeout, kernel_name=args.kernel)
    except RequestError as exc:
        _say(f"shiro: {exc}", error=True)
        return USAGE
    _say(json.dumps(result.to_json(), indent=2, ensure_ascii=False) if args.json else result.summary())
    return 0 if result.ok else 1


COMMANDS = [
    Command(
        "export",
        "write a plain notebook that runs without shiro_kernel (each %shiro turn as Markdown and its code)",
        _export_arguments,
        _export_run,
    ),
    Command(
        "check",
        "run the notebook in a fresh kernel, replaying its %shiro turns, and report cells that fail or differ",
        _check_arguments,
        _check_run,
    ),
]
