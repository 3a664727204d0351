"""Rerun the notebook: a notebook with ``%shiro`` cells run again without the model, in a kernel (replay), in a
fresh kernel that compares outputs (``shiro check``), or as a plain notebook with no shiro at all
(``shiro export``).

A ``%shiro`` cell rerun in a kernel where its recorded turn has not run (a fresh kernel, Restart & Run All,
papermill, nbclient) runs that turn's successful ``python`` calls again, in order, in the user's namespace,
shows the recorded answer, and calls no model.

* what a rerun reads — :mod:`.sites`: the ``%shiro`` lines of a notebook's cells, each with its prompt and
  ordinal (read with the line's one grammar, :mod:`shiro_kernel.line`); :mod:`.find`: the recorded turn of a
  running cell, from the session record's ``turns`` or the bundle saved in the notebook (and recording a
  turn's span for it at the turn's end);
* what a replay does — :mod:`.replay_plan`: what a turn's calls become (run, skip silently, skip and say,
  stop before) and the fields a turn's bundle carries for it (``prompt``, ``cellId``, ``ordinal``,
  ``turnId``, ``replay``); :mod:`.replay_run`: running a plan through the real ``python`` tool, with the
  events a live turn emits and the one line starting ``replayed``; :mod:`.trust`: when the notebook's own
  bundle may run (Jupyter's notebook signature, ``Shiro.replay``);
* one running cell — :mod:`.replay_cell`: replay its recorded turn, refuse it, or leave it to the model;
  :mod:`.turn_line`: what the magic calls for a turn line (its place among the kernel's turns, then the
  replay shown in a view);
* the notebook as a whole — :mod:`.check`: ``shiro check`` (a copy run top to bottom in a fresh kernel,
  each differing cell with a reason); :mod:`.reading`: how check compares outputs as a reader does, and how
  check and export read the saved file; :mod:`.export`: ``shiro export`` (turns as Markdown and code cells).

Nothing here is imported by ``%load_ext``; nbformat is imported only to check a notebook's signature and by
check and export.
"""
