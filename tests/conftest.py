"""Shared pytest fixtures."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Test helpers (fakeopenai, cassettes) are imported as top-level modules from tests/.
sys.path.insert(0, str(Path(__file__).parent))

from fakeopenai import FakeOpenAI
from realengine import llama_server  # noqa: F401  (a fixture: llama-server with Qwen2.5-Coder-0.5B)

# --- fake OpenAI server and environment isolation ----------------------------


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every test gets its own SHIRO_HOME / IPYTHONDIR / Jupyter folders and no real API settings,
    so no test can read or write the real home or reach a real endpoint."""
    home = tmp_path_factory.mktemp("shiro_home")
    monkeypatch.setenv("SHIRO_HOME", str(home))
    ipython_dir = tmp_path_factory.mktemp("ipython")
    # history in memory: shells and kernels started by tests leave no sqlite file behind to write at exit
    (ipython_dir / "profile_default").mkdir()
    (ipython_dir / "profile_default" / "ipython_config.py").write_text('c.HistoryManager.hist_file = ":memory:"\n')
    (ipython_dir / "profile_default" / "ipython_kernel_config.py").write_text(
        'c.HistoryManager.hist_file = ":memory:"\n'
    )
    monkeypatch.setenv("IPYTHONDIR", str(ipython_dir))
    # Jupyter's own files (kernels' connection files, the notebook signatures, a server's file ids and config)
    jupyter = tmp_path_factory.mktemp("jupyter")
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(jupyter / "data"))
    monkeypatch.setenv("JUPYTER_CONFIG_DIR", str(jupyter / "config"))
    for var in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "SHIRO_MODEL", "SHIRO_API", "SHIRO_POLICY"):
        monkeypatch.delenv(var, raising=False)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Close the widgets tests left open while ipywidgets is still whole: at interpreter exit each one's
    ``__del__`` would find the module's globals gone and print a traceback (two dozen per run)."""
    widgets = sys.modules.get("ipywidgets")
    if widgets is not None:
        widgets.Widget.close_all()
    _forget_shells_at_exit()


def _forget_shells_at_exit() -> None:
    """IPython registers each shell's ``atexit_operations``, which resets it and runs a full ``gc.collect()``:
    the hundreds of shells the tests made (a fresh one per test) cost about two minutes of collections after the
    last test. Nothing of theirs is left to save (their history is in memory), so they are forgotten."""
    import atexit
    import gc

    shells = sys.modules.get("IPython.core.interactiveshell")
    if shells is None:
        return
    for obj in gc.get_objects():
        if isinstance(obj, shells.InteractiveShell):
            atexit.unregister(obj.atexit_operations)


@pytest.fixture(scope="session", autouse=True)
def _reliability_doc() -> Iterator[None]:
    """With ``SHIRO_RELIABILITY_DOC`` set, the fault cases' figures are written there at the end."""
    yield
    import os

    import faultlog

    target = os.environ.get("SHIRO_RELIABILITY_DOC")
    if target and faultlog.ROWS:
        faultlog.write_doc(Path(target))


@pytest.fixture
def fake_openai() -> Iterator[FakeOpenAI]:
    """A running FakeOpenAI.  Fails the test at teardown if a request body broke the
    OpenAPI schema (unless the test set ``fake.expect_invalid = True``) or if the
    server itself raised (e.g. inside a callable reply)."""
    fake = FakeOpenAI().start()
    try:
        yield fake
    finally:
        fake.stop()
    problems: list[str] = list(fake.handler_errors)
    if fake.validation_errors and not fake.expect_invalid:
        problems += ["request body failed OpenAPI validation: " + e for e in fake.validation_errors]
    if problems:
        pytest.fail("FakeOpenAI:\n  " + "\n  ".join(problems), pytrace=False)


# --- an in-process IPython shell with the extension loaded ----------------------------------------


@pytest.fixture
def plain_shell(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """A real ``InteractiveShell`` (history in memory, its own IPYTHONDIR) without the extension: the kernel a
    tool runs in, for tests that call tools or turns directly."""
    from IPython.core.interactiveshell import InteractiveShell
    from traitlets.config import Config

    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    InteractiveShell.clear_instance()
    config = Config()
    config.HistoryManager.hist_file = ":memory:"
    yield InteractiveShell.instance(config=config)
    InteractiveShell.clear_instance()


@pytest.fixture
def shiro_shell(monkeypatch: pytest.MonkeyPatch, fake_openai: FakeOpenAI, tmp_path: Path) -> Iterator[Any]:
    """``InteractiveShell`` with ``%load_ext shiro_kernel``, pointed at the fake server (key
    ``sk-test-shell``, model gpt-4o-mini), working in a temp folder."""
    from IPython.core.interactiveshell import InteractiveShell

    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-shell")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_openai.base_url)
    monkeypatch.setenv("SHIRO_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("SHIRO_NO_WARMUP", "1")
    monkeypatch.chdir(tmp_path)
    InteractiveShell.clear_instance()
    shell = InteractiveShell.instance()
    shell.run_cell("%load_ext shiro_kernel")
    yield shell
    shell.run_cell("%unload_ext shiro_kernel")
    InteractiveShell.clear_instance()


# --- the real inference engine (llama-cpp-python's server with SmolLM2-135M) ------------------------------------


@pytest.fixture(scope="session")
def real_engine() -> Iterator[Any]:
    """Starts one engine per configuration, on a free loopback port, the first time a test asks for it
    (``real_engine(n_ctx=512)``, ``real_engine(chat_format="chatml-function-calling")``), and stops them all at
    the end of the session (see ``tests/realengine.py``)."""
    from realengine import Engine

    engines: dict[tuple[int, str | None], Engine] = {}

    def engine(n_ctx: int = 8192, chat_format: str | None = None) -> Engine:
        key = (n_ctx, chat_format)
        running = engines.get(key)
        if running is None or running.process is None or running.process.poll() is not None:
            running = engines[key] = Engine(n_ctx, chat_format).start()
        return running

    yield engine
    for running in engines.values():
        running.stop()
