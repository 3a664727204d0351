"""The real ``%shiro`` replays in real kernels (nbclient), against the fake OpenAI server: a notebook whose
``%shiro`` cell made ``monthly`` reruns top to bottom in a fresh kernel with no model call, and the next cell
works — from this machine's record, from the notebook's own bundle (``SHIRO_REPLAY=notebook``, a trusted
notebook), never from an untrusted one; ``--again`` asks the model."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest
from fakeopenai import Call, Reply
from kernelutil import NOTEBOOK_KEY as KEY
from kernelutil import outputs_text, run_notebook
from nbclient import NotebookClient

CODE = (
    "import pandas as pd\n"
    "sales = pd.DataFrame({'month': [1, 1, 2, 2], 'amount': [10, 20, 5, 7]})\n"
    "monthly = sales.groupby('month').amount.sum()\n"
    "print(monthly.to_dict())"
)
WRITES = "open('written-by-replay.txt', 'w').write('x')\nflag = 1"
PROMPT = "make monthly totals"


def env(fake: Any, home: Path, **more: str) -> dict[str, str]:
    return {
        "OPENAI_API_KEY": KEY,
        "OPENAI_BASE_URL": fake.base_url,
        "SHIRO_MODEL": "gpt-4o-mini",
        "SHIRO_HOME": str(home),
        **more,
    }


def rerun(path: Path, environ: dict[str, str]) -> nbformat.NotebookNode:
    """Run the notebook as saved (Restart & Run All, papermill) in a fresh kernel, then save it; the file
    keeps its previous outputs until the run ends, as a saved notebook does."""
    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(
        nb, timeout=60, kernel_name="python3", allow_errors=True, resources={"metadata": {"path": str(path.parent)}}
    )
    base = {k: v for k, v in os.environ.items() if k not in ("OPENAI_API_KEY", "SHIRO_REPLAY")}
    client.execute(env={**base, **environ, "JPY_SESSION_NAME": str(path)})
    nbformat.write(nb, path)
    return nb


def recorded(fake: Any, tmp_path: Path, home: Path, code: str = CODE) -> Path:
    """A notebook whose ``%shiro`` cell made a variable (one python call, approved), then used by the next cell."""
    fake.enqueue(Reply(tool_calls=[Call("python", {"code": code})]), Reply(text="Made `monthly`: **{1: 30, 2: 12}**."))
    path = tmp_path / "sales.ipynb"
    cells = [
        "%load_ext shiro_kernel",
        '%config Shiro.approval = "auto"',
        f"%shiro {PROMPT}",
        "print('next cell', monthly.sum())" if code == CODE else "print('next cell', flag)",
    ]
    nb = run_notebook(path, cells, env(fake, home))
    assert "next cell 42" in outputs_text(nb.cells[3]) or code != CODE
    assert len(fake.requests) == 2
    return path


def test_restart_and_run_all_replays_from_the_record_with_no_model_call(fake_openai, tmp_path):
    home = tmp_path / "home"
    path = recorded(fake_openai, tmp_path, home)
    before = len(fake_openai.requests)
    nb = rerun(path, env(fake_openai, home))
    assert len(fake_openai.requests) == before  # no model call
    shown = outputs_text(nb.cells[2])
    assert "replayed 1 python call of this turn without the model (recorded in session " in shown
    assert f"%shiro --again {PROMPT} asks the model instead" in shown
    assert "Made `monthly`" in shown and "{1: 30, 2: 12}" in shown  # the recorded answer, the call's output
    assert outputs_text(nb.cells[3]).strip() == "next cell 42"
    bundle = next(o["data"]["application/vnd.shiro.turn+json"] for o in nb.cells[2].outputs if "data" in o)
    assert bundle["end"]["reason"] == "replayed" and bundle["prompt"] == PROMPT
    assert [c["code"] for c in bundle["replay"]] == [CODE]  # the replay's bundle can be replayed again
    # and again: a second rerun replays the replay's bundle, still without the model
    nb = rerun(path, env(fake_openai, home))
    assert len(fake_openai.requests) == before and outputs_text(nb.cells[3]).strip() == "next cell 42"


def test_a_colleague_without_key_or_record_replays_from_the_notebook_in_ci(fake_openai, tmp_path):
    path = recorded(fake_openai, tmp_path, tmp_path / "home")
    before = len(fake_openai.requests)
    fresh = {"SHIRO_HOME": str(tmp_path / "colleague"), "OPENAI_BASE_URL": "", "SHIRO_REPLAY": "notebook"}
    nb = rerun(path, fresh)
    assert len(fake_openai.requests) == before
    shown = outputs_text(nb.cells[2])
    assert "replayed 1 python call of this turn without the model (from the turn saved in this notebook)" in shown
    assert outputs_text(nb.cells[3]).strip() == "next cell 42"
    assert "Could not reach" not in shown and "NameError" not in json.dumps(nb.cells[3].outputs)


def test_an_untrusted_notebook_runs_no_code_from_its_outputs(fake_openai, tmp_path):
    path = recorded(fake_openai, tmp_path, tmp_path / "home", code=WRITES)
    (tmp_path / "written-by-replay.txt").unlink()
    before = len(fake_openai.requests)
    nb = rerun(path, {"SHIRO_HOME": str(tmp_path / "colleague"), "OPENAI_BASE_URL": ""})
    assert not (tmp_path / "written-by-replay.txt").exists()
    assert len(fake_openai.requests) == before
    shown = outputs_text(nb.cells[2])
    assert shown.startswith("not replayed: this cell's turn (1 python call) is saved in the notebook's output, but ")
    assert "jupyter trust sales.ipynb" in shown and "SHIRO_REPLAY=notebook" in shown
    assert "NameError" in outputs_text(nb.cells[3])  # nothing ran: the next cell fails, as it would


def test_a_trusted_notebook_replays_from_its_own_bundle(fake_openai, tmp_path, monkeypatch):
    from nbformat.sign import NotebookNotary

    data = tmp_path / "jupyter-data"
    data.mkdir()
    monkeypatch.setenv("JUPYTER_DATA_DIR", str(data))
    path = recorded(fake_openai, tmp_path, tmp_path / "home", code=WRITES)
    (tmp_path / "written-by-replay.txt").unlink()
    nb = nbformat.read(path, as_version=4)
    NotebookNotary(data_dir=str(data)).sign(nb)  # what `jupyter trust sales.ipynb` does
    before = len(fake_openai.requests)
    nb = rerun(path, {"SHIRO_HOME": str(tmp_path / "colleague"), "OPENAI_BASE_URL": "", "JUPYTER_DATA_DIR": str(data)})
    assert (tmp_path / "written-by-replay.txt").exists()
    assert len(fake_openai.requests) == before
    assert outputs_text(nb.cells[3]).strip() == "next cell 1"


def test_again_asks_the_model_and_replay_off_too(fake_openai, tmp_path):
    home = tmp_path / "home"
    path = recorded(fake_openai, tmp_path, home)
    nb = nbformat.read(path, as_version=4)
    nb.cells[2].source = f"%shiro --again {PROMPT}"
    nbformat.write(nb, path)
    fake_openai.enqueue(Reply(text="asked again"))
    nb = rerun(path, env(fake_openai, home))
    assert len(fake_openai.requests) == 3 and "asked again" in outputs_text(nb.cells[2])
    users = [i["content"] for i in fake_openai.requests[-1].body["input"] if i.get("role") == "user"]
    assert users[-1] == PROMPT  # it continued the session
    fake_openai.enqueue(Reply(text="asked with replay off"))
    nb.cells[2].source = f"%shiro {PROMPT}"
    nbformat.write(nb, path)
    nb = rerun(path, env(fake_openai, home, SHIRO_REPLAY="off"))
    assert len(fake_openai.requests) == 4 and "asked with replay off" in outputs_text(nb.cells[2])


@pytest.mark.parametrize("same_kernel", [True])
def test_a_cell_rerun_in_the_kernel_that_ran_it_asks_the_model(fake_openai, tmp_path, same_kernel):
    fake_openai.enqueue(Reply(text="one"), Reply(text="two"))
    path = tmp_path / "twice.ipynb"
    nb = run_notebook(
        path, ["%load_ext shiro_kernel", f"%shiro {PROMPT}", f"%shiro {PROMPT}"], env(fake_openai, tmp_path)
    )
    assert len(fake_openai.requests) == 2  # the second is a new turn with the same prompt, not a replay
    assert "one" in outputs_text(nb.cells[1]) and "two" in outputs_text(nb.cells[2])


def test_export_and_check_from_the_notebook_and_the_agent_tool(fake_openai, tmp_path):
    """``/export`` writes a plain notebook of the saved one; ``/check`` and the agent's ``notebook_check`` tool
    rerun the saved notebook in a fresh kernel and say it reproduces (its %shiro cell replayed)."""
    path = recorded(fake_openai, tmp_path, tmp_path / "home")
    nb = nbformat.read(path, as_version=4)
    nb.cells += [nbformat.v4.new_code_cell(c) for c in ("%shiro /export", "%shiro /check")]
    nb.cells.append(nbformat.v4.new_code_cell("%shiro --again does it rerun?"))
    nbformat.write(nb, path)
    fake_openai.enqueue(Reply(tool_calls=[Call("notebook_check", {})]), Reply(text="it reruns"))
    nb = rerun(path, env(fake_openai, tmp_path / "home"))
    assert "\nwrote " in outputs_text(nb.cells[4]) and path.with_name("sales.export.ipynb").exists()
    assert "sales.ipynb reproduces" in outputs_text(nb.cells[5])
    told = [i["output"] for i in fake_openai.requests[-1].body["input"] if i.get("type") == "function_call_output"]
    assert len(told) == 2 and "sales.ipynb reproduces" in told[-1], (told, outputs_text(nb.cells[6]))
    exported = nbformat.read(path.with_name("sales.export.ipynb"), as_version=4)
    assert not any("shiro" in c.source for c in exported.cells if c.cell_type == "code")
    assert CODE in [c.source for c in exported.cells]


def test_the_current_sessions_turns_are_found_in_memory(shiro_shell, fake_openai, monkeypatch):
    """In a kernel whose session holds the turn (resumed, or run here before its variables were lost), the
    record is read from memory, not from disk: the replay works with the record file gone."""
    from IPython.utils.capture import capture_output

    fake_openai.enqueue(Reply(tool_calls=[Call("python", {"code": CODE})]), Reply(text="made monthly"))
    shiro_shell.run_cell('%config Shiro.approval = "auto"')
    shiro_shell.run_cell(f"%shiro {PROMPT}")
    magics = shiro_shell.magics_manager.registry["ShiroMagics"]
    agent = magics.agent
    assert len(agent.current.session.turns) == 1 and agent.current.session.turns[0]["prompt"] == PROMPT
    agent.current.autosaver.flush()
    agent.current.store.path_for(agent.current.session.id).unlink()  # only memory has it now
    del shiro_shell.user_ns["monthly"]
    agent.turns_here.clear()  # as in a kernel where this turn has not run
    magics._ordinals = None
    with capture_output() as cap:
        shiro_shell.run_cell(f"%shiro {PROMPT}")
    assert len(fake_openai.requests) == 2  # no model call
    shown = cap.stdout + "".join(o.data.get("text/plain", "") for o in cap.outputs)
    assert "replayed 1 python call of this turn without the model (recorded in session " in shown
    assert shiro_shell.user_ns["monthly"].to_dict() == {1: 30, 2: 12}
