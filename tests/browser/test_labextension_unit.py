"""The labextension's TypeScript unit tests (labextension/test/, node's built-in test runner)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

LABEXTENSION = Path(__file__).resolve().parents[2] / "labextension"


def test_typescript_unit_tests_pass() -> None:
    npm = shutil.which("npm")
    assert npm, "npm is needed for labextension/ (see README)"
    if not (LABEXTENSION / "node_modules").is_dir():  # a fresh clone before `pip install -e .`
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund"], cwd=LABEXTENSION, check=True, capture_output=True, timeout=240
        )
    done = subprocess.run([npm, "test", "--silent"], cwd=LABEXTENSION, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "# fail 0" in done.stdout
