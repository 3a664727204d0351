"""The ``shiro`` console script: shiro's stores from a terminal."""

from __future__ import annotations

import argparse
import sys

from . import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="shiro", description="shiro_kernel: the %shiro notebook agent's stores.")
    parser.add_argument("--version", action="version", version=f"shiro_kernel {__version__}")
    parser.add_subparsers(dest="command")
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
