"""One subcommand of the ``shiro`` console script: its name, its help, the options it declares and what it runs
(:mod:`shiro_kernel.cli` gathers them; each module of the CLI holds its own)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


__all__ = ["Command"]
