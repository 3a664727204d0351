"""A peer tool's own venv for a side-by-side benchmark (installed once, kept under benchmarks/, gitignored): the
peer's packages never mix with ours, and a changed requirement list installs it afresh."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path


def peer_python(venv: Path, requirements: list[str], imports: str, label: str) -> Path:
    """The interpreter of ``venv``, installing ``requirements`` there first if it is missing or out of date, then
    checking that ``imports`` (``"kishu, pandas"``) import."""
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    marker = venv / ".installed"
    want = json.dumps(requirements)
    if py.exists() and marker.exists() and marker.read_text() == want:
        return py
    print(f"installing {label} into {venv} (once) ...", file=sys.stderr)
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [str(py), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *requirements],
        check=True,
        stdout=sys.stderr,
    )
    subprocess.run([str(py), "-c", f"import {imports}"], check=True)
    marker.write_text(want)
    return py


def version_of(python: Path | str, dist: str) -> str:
    """The version of ``dist`` installed for ``python`` ('' when it is not)."""
    return subprocess.run(
        [str(python), "-c", f"import importlib.metadata as m; print(m.version({dist!r}))"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
