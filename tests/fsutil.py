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
