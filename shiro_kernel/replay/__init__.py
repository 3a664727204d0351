"""Replay: a ``%shiro`` cell rerun in a kernel where its recorded turn has not run (a fresh kernel, Restart &
Run All, papermill, nbclient) runs that turn's successful ``python`` calls again, in order, in the user's
namespace, shows the recorded answer, and calls no model.

* :mod:`.plan` — what a turn's calls become in a replay (run, skip silently, skip and say, stop before), and
  the fields a turn's bundle carries for it (``prompt``, ``cellId``, ``ordinal``, ``turnId``, ``replay``);
* :mod:`.run` — running a plan through the real ``python`` tool, with the events a live turn emits, and the
  one line starting ``replayed``;
* :mod:`.sites` — the ``%shiro`` lines of a notebook's cells, each with its prompt and ordinal;
* :mod:`.find` — finding the recorded turn of a running cell: the session record's ``turns``, or the bundle
  saved in the notebook;
* :mod:`.trust` — when the notebook's own bundle may run (Jupyter's notebook signature, ``Shiro.replay``);
* :mod:`.cell` — all of it for one running ``%shiro`` cell (what the magic calls).

Nothing here is imported by ``%load_ext``; nbformat is imported only to check a notebook's signature.
"""
