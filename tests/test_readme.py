"""README.md's notebook snippets, run as written: every ```python block is a cell, in README order, run by
nbclient in a real kernel against the fake OpenAI server (issue 29, point 7)."""

from __future__ import annotations

import re
from pathlib import Path

from fakeopenai import Reply
from kernelutil import outputs_text, run_notebook

README = Path(__file__).resolve().parents[1] / "README.md"
KEY = "sk-test-readme-KEY-0000"
SALES = "region,2023,2024\nNorth,100,160\nSouth,120,130\nEast,90,95\n"


def notebook_snippets() -> list[str]:
    """The ```python blocks of README.md: all of them are notebook cells (``%load_ext``, ``%shiro``,
    ``%config``, ``%env``)."""
    return [block.strip("\n") for block in re.findall(r"^```python\n(.*?)^```$", README.read_text(), re.M | re.S)]


def test_the_quick_start_is_the_first_two_cells():
    first, second = notebook_snippets()[:2]
    assert first.splitlines()[0] == "%load_ext shiro_kernel"
    assert second.startswith("%shiro ") and second.endswith("?")
    # the trap of issue 29: a `%shiro … ?` line in the cell that loads the extension is read as help
    assert "%shiro" not in first


def test_readmes_snippets_run_as_written(fake_openai, tmp_path):
    fake_openai.enqueue(Reply(text="North grew the most: +60."))
    (tmp_path / "sales.csv").write_text(SALES)
    cells = notebook_snippets()
    env = {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": fake_openai.base_url, "SHIRO_MODEL": "gpt-4o-mini"}
    nb = run_notebook(tmp_path / "readme.ipynb", cells, env)

    assert [r.body["input"][0]["content"] for r in fake_openai.requests] == ["which region grew the most?"]
    shown = [outputs_text(cell) for cell in nb.cells]
    assert "North grew the most: +60." in shown[1]
    for cell, text in zip(nb.cells, shown):
        assert not [o for o in cell.outputs if o.get("output_type") == "error"], (cell.source, text)
        assert "not found" not in text and "Traceback" not in text, (cell.source, text)
    assert KEY not in "".join(shown)
