"""Notebook trust as the server checks it (a temporary signature store), the replay policy, the setting."""

from __future__ import annotations

import json

import nbformat
import pytest
from nbformat.sign import NotebookNotary
from replayutil import code_cell, notebook, write

from shiro_kernel.config import Shiro
from shiro_kernel.rerun.trust import (
    may_replay_from_notebook,
    may_replay_from_record,
    notebook_trusted,
    untrusted_refusal,
)


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
    """The signature store in a temporary JUPYTER_DATA_DIR (never the user's)."""
    folder = tmp_path / "jupyter-data"
    folder.mkdir()
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(folder))
    return folder


def _sign(path, data_dir):
    with NotebookNotary(data_dir=str(data_dir)) as notary:
        notary.sign(nbformat.read(path, as_version=4))  # as the server signs what it saves


def test_signed_and_unsigned_notebooks(tmp_path, data_dir):
    signed = write(tmp_path / "signed.ipynb", notebook([code_cell("x = 1"), code_cell("%shiro make monthly")]))
    other = write(tmp_path / "other.ipynb", notebook([code_cell("y = 2")]))
    assert not notebook_trusted(signed)
    assert not any(data_dir.iterdir())  # asking creates neither a secret nor a store
    _sign(signed, data_dir)
    assert (data_dir / "nbsignatures.db").is_file()
    assert notebook_trusted(signed)
    assert not notebook_trusted(other)
    # one changed output makes it another notebook: no longer trusted
    nb = json.loads(signed.read_text())
    nb["cells"][0]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "injected\n"}]
    signed.write_text(json.dumps(nb))
    assert not notebook_trusted(signed)
    assert not notebook_trusted(tmp_path / "missing.ipynb")


def test_another_machines_store_trusts_nothing(tmp_path, data_dir, monkeypatch):
    path = write(tmp_path / "n.ipynb", notebook([code_cell("x = 1")]))
    _sign(path, data_dir)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(elsewhere))
    assert not notebook_trusted(path)


def test_policy():
    assert [may_replay_from_record(s) for s in ("auto", "notebook", "off")] == [True, True, False]
    table = {(s, t): may_replay_from_notebook(s, t) for s in ("auto", "notebook", "off") for t in (True, False)}
    assert table == {
        ("auto", True): True,
        ("auto", False): False,
        ("notebook", True): True,
        ("notebook", False): True,
        ("off", True): False,
        ("off", False): False,
    }


def test_the_refusal_says_how_to_allow_it():
    text = untrusted_refusal("/work/analysis.ipynb", "which region grew the most?", 2)
    assert text.startswith("not replayed: this cell's turn (2 python calls) is saved in the notebook's output")
    assert "`jupyter trust analysis.ipynb`" in text and "SHIRO_REPLAY=notebook" in text
    assert "%shiro --again which region grew the most? asks the model instead" in text
    assert "\n" not in text
    assert "%%shiro --again (same body)" in untrusted_refusal(None, "line one\nline two", 1)


def test_the_replay_setting(monkeypatch):
    assert Shiro().replay == "auto"
    monkeypatch.setenv("SHIRO_REPLAY", "Notebook")
    assert Shiro().replay == "notebook"
    monkeypatch.setenv("SHIRO_REPLAY", "sometimes")
    assert Shiro().replay == "auto"
    monkeypatch.setenv("SHIRO_REPLAY", "notebook")
    config = Shiro()
    config.replay = "off"  # an explicit %config wins over the environment
    assert config.replay == "off"
    with pytest.raises(Exception, match="replay"):
        config.replay = "always"
