"""File-system helpers for tests (importable as ``fsutil``: tests/ is on sys.path)."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """Make ``folder`` unwritable for the duration, even for root (tests run as root in CI): ``chattr +i``
    where the file system supports it, else ``chmod 555`` for an ordinary user."""

    folder = Path(folder)
    immutable = False
    if os.geteuid() == 0 and shutil.which("chattr"):
        immutable = subprocess.run(["chattr", "+i", str(folder)], capture_output=True).returncode == 0
    if not immutable:
        os.chmod(folder, 0o555)
    probe = folder / ".write-probe"
    try:
        try:
            probe.touch()
        except OSError:
            pass
        else:
            probe.unlink()
            pytest.skip("cannot make a folder read-only here (root without chattr support)")
        yield
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(folder)], check=True)
        else:
            os.chmod(folder, 0o755)


def cut_short(path: Path, style: str) -> None:
    """Leave only the first half of the file at ``path``, as a crash mid-write would: truncated ``"in place"``,
    or (any other style) a half-written temporary file renamed over it."""
    text = Path(path).read_text()
    if style == "in place":
        with open(path, "r+") as fh:
            fh.truncate(len(text) // 2)
    else:
        tmp = Path(path).with_name(".cut.tmp")
        tmp.write_text(text[: len(text) // 2])
        os.replace(tmp, path)
