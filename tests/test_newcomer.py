"""A newcomer's first minutes, as README.md tells them (issue 32, point 1): clone the repository, run
``./scripts/run.sh`` with the machine's own ``python3``, and run the demo it opens top to bottom (Restart & Run
All) with no key and no model. Every cell must run without an error and the recorded turns must replay.

The test venv has pandas and matplotlib (the test extra), so a demo importing what run.sh does not install passes
every other test; only a venv set up exactly as run.sh sets it up shows it. So this test clones the repository,
runs ``./scripts/run.sh --setup-only`` there (a fresh ``.venv``: pip's cache makes it take a minute or two, the
labextension's npm build included), and runs ``binder/demo.ipynb`` with that venv's ``jupyter nbconvert``.

It clones what is *committed* (HEAD of this checkout): uncommitted changes are not seen by it."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import nbformat
import pytest
from kernelutil import outputs_text

if sys.version_info >= (3, 11):
    import tomllib
else:  # the test extra installs tomli there
    import tomli as tomllib

REPO = Path(__file__).resolve().parents[1]
DEMO = Path("binder") / "demo.ipynb"
# what a newcomer's shell does not have: no key, no server, no model, no replay override, no venv of ours
DROPPED = ("OPENAI_", "SHIRO_", "JUPYTER", "JPY_", "IPYTHONDIR", "VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "MPL")


def demo_imports() -> set[str]:
    """The top-level modules binder/demo.ipynb imports: in its code cells, and in the code of its recorded turns'
    ``python`` calls, which a replay runs again."""
    nb = nbformat.read(REPO / DEMO, as_version=4)
    sources = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        sources.append("\n".join(line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))))
        for out in cell.get("outputs", []):
            turn = out.get("data", {}).get("application/vnd.shiro.turn+json", {})
            sources += [e["code"] for e in turn.get("entries", []) if e.get("name") == "python" and e.get("code")]
    modules = set()
    for source in sources:
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                modules |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module.split(".")[0])
    return modules


def project_name(requirement: str) -> str:
    return re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip().lower().replace("_", "-")


def extras_installed(script: Path) -> list[set[str]]:
    """The extras of each ``pip install … '.[EXTRAS]'`` line of a setup script."""
    found = re.findall(r"pip install [^\n]*'\.\[([\w,-]+)\]'", script.read_text())
    return [set(extras.split(",")) for extras in found]


def newcomer_env(tmp: Path) -> dict[str, str]:
    """The environment of a newcomer's shell, with everything Jupyter, IPython, matplotlib and shiro write kept
    in ``tmp`` (pip's and npm's caches stay where they are: the real home's, so a rerun installs from them)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(DROPPED)}
    ours = str(Path(sys.executable).parent)  # the test venv's bin: run.sh must find the machine's python3
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p and p != ours)
    for var, name in (
        ("SHIRO_HOME", "shiro-home"),
        ("IPYTHONDIR", "ipython"),
        ("JUPYTER_DATA_DIR", "jupyter-data"),  # where run.sh's `jupyter trust` signs the demo, and the run reads it
        ("JUPYTER_CONFIG_DIR", "jupyter-config"),
        ("MPLCONFIGDIR", "matplotlib"),
    ):
        (tmp / name).mkdir(exist_ok=True)
        env[var] = str(tmp / name)
    return env


def clone(source: Path, dest: Path, rev: str = "HEAD") -> Path:
    """``git clone`` of ``source``'s commit ``rev`` (its committed files only) into ``dest``."""
    subprocess.run(["git", "clone", "--quiet", str(source), str(dest)], check=True, capture_output=True, text=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "--quiet", rev], check=True, capture_output=True, text=True)
    return dest


def set_up(checkout: Path, env: dict[str, str]) -> None:
    """``./scripts/run.sh --setup-only`` in ``checkout``, as a newcomer runs it (without the flag it then opens
    JupyterLab on the demo)."""
    done = subprocess.run(
        ["./scripts/run.sh", "--setup-only"], cwd=checkout, env=env, capture_output=True, text=True, timeout=900
    )
    assert done.returncode == 0, f"run.sh failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"


def run_demo(checkout: Path, env: dict[str, str], out_dir: Path) -> nbformat.NotebookNode:
    """The demo run top to bottom in a fresh kernel by ``checkout``'s own venv, as Restart & Run All in the
    JupyterLab run.sh opens: that server tells the kernel its notebook (``JPY_SESSION_NAME``), so nbconvert's is
    told too; every cell runs (``--allow-errors``), so each failing cell is seen."""
    notebook = checkout / DEMO
    done = subprocess.run(
        [
            str(checkout / ".venv" / "bin" / "jupyter"),
            "nbconvert",
            "--to",
            "notebook",
            "--execute",
            "--allow-errors",
            "--ExecutePreprocessor.timeout=300",
            "--output-dir",
            str(out_dir),
            str(notebook),
        ],
        cwd=checkout,
        env={**env, "JPY_SESSION_NAME": str(notebook)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, f"nbconvert failed ({done.returncode}):\n{done.stderr}"
    return nbformat.read(out_dir / notebook.name, as_version=4)


def errors_shown(nb: nbformat.NotebookNode) -> list[str]:
    """One line per cell output that is an error: an exception, or a traceback written to stderr."""
    found = []
    for index, cell in enumerate(nb["cells"]):
        first = cell.source.splitlines()[0] if cell.source else ""
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error":
                found.append(f"cell {index} ({first}): {out.get('ename')}: {out.get('evalue')}")
            elif out.get("output_type") == "stream" and out.get("name") == "stderr" and "Traceback" in out["text"]:
                found.append(f"cell {index} ({first}): a traceback on stderr: {out['text'][-400:]}")
    return found


def kernel_of(checkout: Path, env: dict[str, str]) -> dict[str, Any]:
    """The ``python3`` kernel spec ``checkout``'s venv starts the demo with."""
    listed = subprocess.run(
        [str(checkout / ".venv" / "bin" / "jupyter"), "kernelspec", "list", "--json"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    spec: dict[str, Any] = json.loads(listed.stdout)["kernelspecs"]["python3"]
    return spec


def test_run_sh_and_binder_install_the_demo_extra_which_holds_what_the_demo_imports():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    demo = {project_name(r) for r in project["optional-dependencies"].get("demo", [])}
    provided = demo | {project_name(r) for r in project["dependencies"]}
    distributions = importlib.metadata.packages_distributions()
    imported = demo_imports() - set(sys.stdlib_module_names) - {"shiro_kernel"}
    assert {"pandas", "matplotlib"} <= imported  # the scan reads the cells and the recorded turns' code
    missing = {m for m in imported if not {project_name(d) for d in distributions.get(m, [m])} & provided}
    assert missing == set(), f"binder/demo.ipynb imports {sorted(missing)}, which the demo extra does not install"
    for script in (REPO / "scripts" / "run.sh", REPO / "binder" / "postBuild"):
        assert any("demo" in extras for extras in extras_installed(script)), f"{script.name} skips the demo extra"


def a_newcomers_run(checkout: Path, env: dict[str, str], out_dir: Path) -> None:
    """run.sh's setup in ``checkout``, then its demo top to bottom: no error in any cell, the turns replayed."""
    set_up(checkout, env)

    # The kernel is the clone's venv's Python: its spec is ipykernel's own (argv "python", which jupyter_client
    # replaces by the Python running nbconvert) found in that venv, not one elsewhere on the machine.
    spec = kernel_of(checkout, env)
    assert Path(spec["resource_dir"]).is_relative_to(checkout / ".venv"), spec
    assert spec["spec"]["argv"][0] in ("python", str(checkout / ".venv" / "bin" / "python")), spec

    nb = run_demo(checkout, env, out_dir)
    assert errors_shown(nb) == []
    # the recorded turns replayed (trusted by run.sh, no key) and the cell after them works
    loaded, asked, plotted, after = (outputs_text(nb.cells[i]) for i in (1, 2, 3, 4))
    assert "coffee" in loaded and "revenue" in loaded
    assert "replayed 1 python call of this turn without the model (from the turn saved in this notebook)" in asked
    assert "**Coffee** grew the most" in asked
    assert "replayed 1 python call" in plotted and "image/png" in str(nb.cells[3].outputs)
    assert after.splitlines()[:2] == ["product", "coffee    0.131"]
    assert "No API key" not in asked + plotted


@pytest.mark.timeout(1200)  # the first run on a machine fills pip's and npm's caches; later ones take ~2 minutes
def test_a_newcomers_run_of_the_demo_shows_no_error(tmp_path):
    env = newcomer_env(tmp_path)
    checkout = clone(REPO, tmp_path / "shiro_kernel")
    try:
        a_newcomers_run(checkout, env, tmp_path / "ran")
    finally:  # the clone's venv and node_modules weigh ~1 GB: pytest keeps its last three runs' folders
        shutil.rmtree(checkout, ignore_errors=True)
