"""A real JupyterLab (with the built labextension) and Debian's Chromium, driven by Playwright.

One JupyterLab server and one browser serve the whole folder; each test gets a fresh page. The
server's kernels talk to a fake OpenAI-compatible provider (tests/fakeopenai.py) that every test
enqueues replies on. Screenshots go to test-artifacts/.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fakeopenai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
CHROMIUM = next(
    (p for p in ("/usr/bin/chromium", "/usr/lib/chromium/chromium") if Path(p).exists()), "/usr/bin/chromium"
)
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
KEY = "sk-test-BROWSERKEY-never-in-outputs-7"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Lab:
    def __init__(self, url: str, root: Path, fake: FakeOpenAI, env: dict[str, str]) -> None:
        self.url, self.root, self.fake, self.env = url, root, fake, env


@pytest.fixture(scope="session")
def lab_fake() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI().start()
    try:
        yield fake
    finally:
        fake.stop()
    assert not fake.handler_errors, fake.handler_errors


@pytest.fixture(scope="session")
def lab(lab_fake: FakeOpenAI, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with serve_lab(tmp_path_factory.mktemp("lab"), lab_fake) as served:
        yield served


@contextmanager
def serve_lab(base: Path, lab_fake: FakeOpenAI, *, rtc: bool = False) -> Iterator[Lab]:
    """A JupyterLab server working in ``base`` whose kernels talk to ``lab_fake``; with jupyter-collaboration
    installed, real-time collaboration is on only where ``rtc`` asks for it (tests/browser/test_lab_windows.py)."""
    root = base / "notebooks"
    root.mkdir()
    ipython = base / "ipython" / "profile_default"
    ipython.mkdir(parents=True)
    for name in ("ipython_config.py", "ipython_kernel_config.py"):
        (ipython / name).write_text('c.HistoryManager.hist_file = ":memory:"\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "SHIRO_", "JPY_"))}
    env.update(
        {
            "SHIRO_HOME": str(base / "shiro_home"),
            "IPYTHONDIR": str(base / "ipython"),
            "JUPYTER_CONFIG_DIR": str(base / "jupyter_config"),
            "JUPYTER_DATA_DIR": str(base / "jupyter_data"),  # the notebooks' signatures, the file ids
            "JUPYTER_RUNTIME_DIR": str(base / "runtime"),
            "JUPYTERLAB_SETTINGS_DIR": str(base / "settings"),
            "JUPYTERLAB_WORKSPACES_DIR": str(base / "workspaces"),
            "OPENAI_BASE_URL": lab_fake.base_url,
            "OPENAI_API_KEY": KEY,
            "SHIRO_MODEL": "gpt-4o-mini",
        }
    )
    # no "get notified about Jupyter news?" toast over the notebook
    notification = base / "settings" / "@jupyterlab" / "apputils-extension"
    notification.mkdir(parents=True)
    (notification / "notification.jupyterlab-settings").write_text('{"fetchNews": "false"}')
    port = _free_port()
    log = open(base / "lab.log", "wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "jupyterlab",
            "--no-browser",
            "--allow-root",
            "--ip",
            "127.0.0.1",
            "--port",
            str(port),
            "--IdentityProvider.token=",
            "--ServerApp.password=",
            "--LabApp.expose_app_in_browser=True",
            "--ServerApp.disable_check_xsrf=True",
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
            f"--YDocExtension.disable_rtc={not rtc}",  # ignored without jupyter-collaboration
        ],
        cwd=root,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/status", timeout=2) as r:
                if r.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail("JupyterLab did not start:\n" + (base / "lab.log").read_text()[-3000:])
        time.sleep(0.2)
    try:
        yield Lab(url, root, lab_fake, env)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        pytest.fail(f"Chromium is missing at {CHROMIUM}: apt-get install -y chromium (see .ci/run)")
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture
def page(browser: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.console_errors = errors  # type: ignore[attr-defined]
    try:
        yield page
    finally:
        ARTIFACTS.mkdir(exist_ok=True)
        try:
            page.screenshot(path=str(ARTIFACTS / f"{request.node.name}-end.png"), full_page=True)
        except Exception:
            pass
        context.close()
