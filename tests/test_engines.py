"""scripts/engines.py without the network: where it caches, and that a model whose hash is wrong is never used."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from realengine import engines


def test_the_cache_is_where_the_environment_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    e = engines()
    monkeypatch.delenv("SHIRO_ENGINE_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert e.cache_dir() == tmp_path / "xdg" / "shiro-kernel" / "engines" and e.cache_dir().is_dir()
    monkeypatch.setenv("SHIRO_ENGINE_CACHE", str(tmp_path / "mine"))
    assert e.model_path("q05") == tmp_path / "mine" / "models" / e.MODELS["q05"].file
    assert e.server_path().parent.parent == tmp_path / "mine"


@pytest.mark.parametrize("size", ["right", "wrong"])
def test_a_model_whose_hash_is_wrong_is_deleted_and_not_used(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, size: str
) -> None:
    e = engines()
    monkeypatch.setenv("SHIRO_ENGINE_CACHE", str(tmp_path))
    spec = e.MODELS["q05"]
    path = e.model_path("q05")
    path.parent.mkdir(parents=True)
    with open(path, "wb") as out:  # a sparse file: the right size, the wrong bytes (hashed whole)
        out.truncate(spec.size if size == "right" else 1000)
    with pytest.raises(e.EngineError) as raised:
        e.model("q05")
    assert not path.exists()
    assert str(path) in str(raised.value) and "deleted, not used" in str(raised.value)
    assert spec.sha256 in str(raised.value)


def test_the_cli_names_what_it_builds() -> None:
    script = Path(__file__).resolve().parent.parent / "scripts" / "engines.py"
    done = subprocess.run([sys.executable, str(script), "nothing"], capture_output=True, text=True)
    assert done.returncode == 2 and "llama-server|q05|q15|all" in done.stderr
