"""When the code saved in a notebook's output may run: Jupyter's notebook trust, and ``Shiro.replay``.

A turn recorded on this machine (its session record) replays under ``auto`` and ``notebook``: that code ran
here, with the user's approval. A turn known only from the bundle saved in the notebook is code hidden in an
output of a file anyone could have written; it replays only when

* the notebook is **trusted**: its signature is in this machine's signature store (Jupyter signs a notebook
  when the user saves it, ``jupyter trust NAME.ipynb`` signs one by hand), and ``Shiro.replay`` is ``auto``;
* or ``Shiro.replay`` is ``notebook`` (``SHIRO_REPLAY=notebook``: CI, ``shiro check``), trusted or not — and
  set **outside the notebook** (:func:`outside_setting`): in the environment the kernel started with, or in
  the user's own IPython config or the kernel's command line. A ``%config Shiro.replay = 'notebook'`` or
  ``%env SHIRO_REPLAY=notebook`` cell of the untrusted notebook itself counts as ``auto``: a file cannot vouch
  for the code hidden in its own outputs.

``off`` never replays. The signature is checked as the server checks it
(``nbformat.sign.NotebookNotary().check_signature``), against ``JUPYTER_DATA_DIR/nbsignatures.db``; nbformat is
imported only here, when a replay from the notebook is about to happen.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

SETTINGS = ("auto", "notebook", "off")

UNTRUSTED = (
    "not replayed: this cell's turn ({calls}) is saved in the notebook's output, but {name} is not trusted on "
    "this machine, so code hidden in an output does not run. Read the notebook, then run `jupyter trust "
    "{name}` (or File → Trust Notebook) and run the cell again; in CI, set SHIRO_REPLAY=notebook; "
    "{again} asks the model instead."
)
SET_INSIDE = (
    " Shiro.replay = 'notebook' was set inside this kernel (a %config or %env cell), and that does not count for "
    "an untrusted notebook: only SHIRO_REPLAY=notebook in the environment the kernel starts with, or "
    "c.Shiro.replay = 'notebook' in your own IPython config, allows it."
)


def _data_dir() -> Path:
    from jupyter_core.paths import jupyter_data_dir

    return Path(jupyter_data_dir())


def notebook_trusted(path: str | os.PathLike[str]) -> bool:
    """Whether the notebook at ``path``, as saved, is signed in this machine's signature store. False when it
    cannot be read, or nothing was ever signed here (no secret, no store: neither is created by asking)."""
    import warnings

    from ..notebook.file import read_notebook

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


def _started_environment() -> dict[str, str] | None:
    """The environment this process started with (the launcher's: CI's, ``shiro check``'s), which no cell can
    change: ``/proc/self/environ`` holds it as it was at ``exec``, whatever ``%env`` or ``os.environ`` did since.
    None where there is no such file (not Linux)."""
    try:
        with open("/proc/self/environ", "rb") as fh:
            raw = fh.read()
    except OSError:
        return None
    pairs = (item.split(b"=", 1) for item in raw.split(b"\0") if b"=" in item)
    return {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in pairs}


#: SHIRO_REPLAY as this module first saw it: where the start environment cannot be read (not Linux), the
#: nearest to it (the replay modules are imported by ``%load_ext``'s warm-up)
_FIRST_SEEN = os.environ.get("SHIRO_REPLAY")


def _started_config(shell: Any) -> Any:
    """The configuration the kernel started with (the user's IPython config files and the kernel's command
    line), which no cell can change: ``%config`` gives each of ``shell.configurables`` an updated copy of its
    config, and the kernel that owns the shell (ipykernel's ``IPythonKernel``) is not one of them, so its
    config is still the one it was started with. None for a shell with no such owner (a plain or terminal
    IPython, whose application is one of the configurables)."""
    owner = getattr(shell, "parent", None)
    if owner is None or any(c is owner for c in getattr(shell, "configurables", ())):
        return None
    return getattr(owner, "config", None)


def outside_setting(shell: Any) -> str | None:
    """``Shiro.replay`` as set outside the notebook, or None: the kernel's starting configuration (the user's
    IPython config, the kernel's command line) when it sets it, else ``SHIRO_REPLAY`` in the environment the
    kernel started with. What a cell of the notebook set (``%config``, ``%env``) is not in either."""
    config = _started_config(shell)
    if config is not None and "Shiro" in config:
        value = config["Shiro"].get("replay")
        if isinstance(value, str) and value in SETTINGS:
            return value
    started = _started_environment()
    value = started.get("SHIRO_REPLAY") if started is not None else _FIRST_SEEN
    value = (value or "").strip().lower()
    return value if value in SETTINGS else None


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


def untrusted_refusal(
    path: str | os.PathLike[str] | None, prompt: str | None, calls: int, set_inside: bool = False
) -> str:
    """The cell's paragraph when a turn saved in an untrusted notebook is not replayed: how to allow it, and
    (``set_inside``) why the ``notebook`` setting a cell made does not."""
    name = Path(path).name if path else "the notebook"
    what = f"{calls} python call" + ("" if calls == 1 else "s")
    return UNTRUSTED.format(calls=what, name=name, again=again_hint(prompt)) + (SET_INSIDE if set_inside else "")


__all__ = [
    "SETTINGS",
    "again_hint",
    "may_replay_from_notebook",
    "may_replay_from_record",
    "notebook_trusted",
    "outside_setting",
    "untrusted_refusal",
]
