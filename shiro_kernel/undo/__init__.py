"""Undo: the agent's steps taken back — variables in the kernel, files on disk, cells in the notebook.

* :mod:`.names` — which names a piece of code may change, read from its syntax tree before it runs;
* :mod:`.snapshot` — a value kept as it was, at the cost it must have (pandas by copy-on-write, numpy by copy,
  containers deep within a budget), or why it cannot be;
* :mod:`.journal` — the kernel's checkpoints, one per step that changes something, bounded by
  ``Shiro.undo_max_mb``, and taking steps back newest first;
* :mod:`.writes` — the files a step's code is seen changing as it runs (Python's audit hooks), kept just before;
* :mod:`.checkpoints` — the checkpoint a call needs, from its tool's declared effects;
* :mod:`.kernel` — the kernel's undo, which the agent holds: the journal, each turn's checkpointer, taking back.
"""
