"""The output formats shiro writes into a notebook and reads back from one, named once: a ``%shiro`` cell's saved
turn (docs/turn-format.md, written by :mod:`~shiro_kernel.ui.render`, read by :mod:`~shiro_kernel.rerun` and the
``notebook_read`` tool) and the live view's widget while the turn runs. A constant of its own, below the views and
the rerun wing that both use it."""

from __future__ import annotations

#: a ``%shiro`` cell's saved turn (docs/turn-format.md)
TURN_MIME = "application/vnd.shiro.turn+json"
#: an ipywidgets view (the live turn while it runs)
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
