"""When the code saved in a notebook's output may run: Jupyter's notebook trust, and ``Shiro.replay``.

A turn recorded on this machine (its session record) replays under ``auto`` and ``notebook``: that code ran
here, with the user's approval. A turn known only from the bundle saved in the notebook is code hidden in an
output of a file anyone could have written; it replays only when

* the notebook is **trusted**: its signature is in this machine's signature store (Jupyter signs a notebook
  when the user saves it, ``jupyter trust NAME.ipynb`` signs one by hand), and ``Shiro.replay`` is ``auto``;
* or ``Shiro.replay`` is ``notebook`` (``SHIRO_REPLAY=notebook``: CI, ``shiro check``), trusted or not.

``off`` never replays. The signature is checked as the server checks it
(``nbformat.sign.NotebookNotary().check_signature``), against ``JUPYTER_DATA_DIR/nbsignatures.db``; nbformat is
imported only here, when a replay from the notebook is about to happen.
"""

from __future__ import annotations

import os
from pathlib import Path

SETTINGS = ("auto", "notebook", "off")

UNTRUSTED = (
    "not replayed: this cell's turn ({calls}) is saved in the notebook's output, but {name} is not trusted on "
    "this machine, so code hidden in an output does not run. Read the notebook, then run `jupyter trust "
    "{name}` (or File → Trust Notebook) and run the cell again; in CI, set SHIRO_REPLAY=notebook; "
    "{again} asks the model instead."
)


def _data_dir() -> Path:
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir())


def notebook_trusted(path: str | os.PathLike[str]) -> bool:
    """Whether the notebook at ``path``, as saved, is signed in this machine's signature store. False when it
    cannot be read, or nothing was ever signed here (no secret, no store: neither is created by asking)."""
    import warnings

    from ..context.cells import read_notebook

    data_dir = _data_dir()
    if not (data_dir / "notebook_secret").is_file() or not (data_dir / "nbsignatures.db").is_file():
        return False
    try:
        raw = read_notebook(Path(path))
    except (OSError, ValueError):
        return False
    with warnings.catch_warnings():  # nbformat's warnings never reach the user's cell
        warnings.simplefilter("ignore")
        import nbformat
        from nbformat.sign import NotebookNotary

        notary = NotebookNotary(data_dir=str(data_dir))
        try:
            return bool(notary.check_signature(nbformat.from_dict(raw)))
        except Exception:  # a store that cannot be read trusts nothing
            return False
        finally:
            notary.close()


def may_replay_from_record(setting: str) -> bool:
    """Whether a turn recorded in this machine's session record may replay."""
    return setting in ("auto", "notebook")


def may_replay_from_notebook(setting: str, trusted: bool) -> bool:
    """Whether a turn known only from the notebook's saved bundle may replay (see the module's doc)."""
    return setting == "notebook" or (setting == "auto" and trusted)


def again_hint(prompt: str | None) -> str:
    """How to ask the model instead of replaying: ``%shiro --again PROMPT`` for a short one-line prompt."""
    if prompt and "\n" not in prompt and len(prompt) <= 100:
        return f"%shiro --again {prompt}"
    if prompt and "\n" in prompt:
        return "%%shiro --again (same body)"
    return "%shiro --again"


def untrusted_refusal(path: str | os.PathLike[str] | None, prompt: str | None, calls: int) -> str:
    """The cell's paragraph when a turn saved in an untrusted notebook is not replayed: how to allow it."""
    name = Path(path).name if path else "the notebook"
    what = f"{calls} python call" + ("" if calls == 1 else "s")
    return UNTRUSTED.format(calls=what, name=name, again=again_hint(prompt))


__all__ = [
    "SETTINGS",
    "again_hint",
    "may_replay_from_notebook",
    "may_replay_from_record",
    "notebook_trusted",
    "untrusted_refusal",
]
