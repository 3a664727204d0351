"""The notebook file as saved on disk, read for showing its cells: as plain JSON, since nbformat 4 is plain JSON
(:func:`read_notebook`); only an older format goes through nbformat, imported lazily. :func:`read_notebook_shared`
parses a file again only when it changed. Its readers: the cells changed outside the agent
(:mod:`~shiro_kernel.context.cell_changes`), the ``notebook_read`` tool, and the rerun wing (finding a cell's
recorded turn, ``shiro check``, ``shiro export``, the notebook's trust)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_cache: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}


def read_notebook_shared(path: Path) -> dict[str, Any]:
    """:func:`read_notebook`, parsed again only when the file changed (its size or modification time): the
    turn's path reads the notebook at each ``%shiro`` (which cells changed, which recorded turn a cell has)
    and a saved notebook with figures can be megabytes. The dict is shared: read it, never change it."""
    st = path.stat()
    key, stamp = str(path), (st.st_mtime_ns, st.st_size)
    hit = _cache.get(key)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    nb = read_notebook(path)
    if len(_cache) > 8:  # a kernel serves one notebook; a few more (tests, /check of another) are kept
        _cache.clear()
    _cache[key] = (stamp, nb)
    return nb


class TooDeep(ValueError):
    """A file nested too deeply for the JSON parser: no notebook (a ``ValueError`` like any unreadable one)."""


def read_notebook(path: Path) -> dict[str, Any]:
    """The notebook at ``path`` as a v4 dict, for showing its cells. Read as plain JSON, not with
    ``nbformat.read``: that validates against the schema (~2 s on its first call, the validator's import)
    and warns into the user's cell (``MissingIDFieldWarning`` for a notebook without cell ids); showing
    cells needs neither. An older format (cells inside worksheets) is converted by nbformat, imported
    only then, its warnings silenced. Raises ``ValueError`` saying what is wrong, or ``OSError``."""
    raw = path.read_bytes()
    try:
        loaded = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise ValueError(f"it is not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno})") from None
    except UnicodeDecodeError:
        raise ValueError("it is not UTF-8 text") from None
    except RecursionError:  # a file nested 100,000 deep: no notebook, and never a traceback
        raise TooDeep("it is nested too deeply to be a notebook") from None
    if not isinstance(loaded, dict):
        raise ValueError(f"it is not a notebook (a JSON {type(loaded).__name__}, not an object)")
    nb: dict[str, Any] = loaded
    version = nb.get("nbformat")
    if not isinstance(version, int) or version < 4 or not isinstance(nb.get("cells"), list):
        nb = _upgrade(raw)
    for index, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict):
            raise ValueError(f"its cell {index} is not a JSON object")
    return nb


def _upgrade(raw: bytes) -> dict[str, Any]:
    """An older notebook converted to v4 by nbformat (imported here only: it costs ~1 s, which the usual
    v4 notebook does not pay); its warnings are kept out of the user's cell."""
    import warnings

    import nbformat
    from nbformat import reader

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nb = nbformat.convert(reader.reads(raw.decode("utf-8-sig")), 4)
    except Exception as exc:  # nbformat's readers raise many kinds on a damaged old notebook
        raise ValueError(f"nbformat cannot read it ({type(exc).__name__}: {exc})") from None
    if not isinstance(nb.get("cells"), list):
        raise ValueError("it is not a notebook (it has no list of cells)")
    return dict(nb)
