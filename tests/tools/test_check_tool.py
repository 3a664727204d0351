"""``notebook_check`` runs the check its context gives (the agent gives the rerun wing's, :func:`shiro_kernel.agent.
check_saved`, tested end to end in tests/rerun/test_replay_magic.py); the tool knows nothing of how a notebook is
rerun."""

from __future__ import annotations

from pathlib import Path

import pytest

from shiro_kernel.tools import ToolContext, ToolError, all_tools
from shiro_kernel.tools.check_tool import CHECK_TIMEOUT_S


def test_the_tool_runs_the_check_its_context_gives(tmp_path: Path):
    saved = tmp_path / "a.ipynb"
    saved.write_text("{}")
    asked: list[tuple[Path, float]] = []

    def check(path: Path, timeout: float) -> str:
        asked.append((path, timeout))
        return "a.ipynb reproduces: 3 cells rerun"

    tool = all_tools()["notebook_check"]
    text = tool.run({}, ToolContext(root=tmp_path, notebook_path=saved, check=check))
    assert text.startswith("a.ipynb reproduces: 3 cells rerun\n(the saved file was checked")
    assert asked == [(saved, CHECK_TIMEOUT_S)]
    with pytest.raises(ToolError, match="no notebook check can run here"):
        tool.run({}, ToolContext(root=tmp_path, notebook_path=saved))
    with pytest.raises(ToolError, match="no saved notebook"):
        tool.run({}, ToolContext(root=tmp_path, notebook_path=tmp_path / "gone.ipynb", check=check))
