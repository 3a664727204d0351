"""The notebook as the agent's workspace: the channel to the front end's live document (its comm,
:mod:`.channel`) and what the agent read of it and asks to change (:mod:`.document`). The cell tools
(:mod:`shiro_kernel.tools.cells`) act through them; the labextension is the other end
(docs/notebook-protocol.md)."""

from __future__ import annotations

from typing import Any

from .channel import Channel, IpykernelTransport
from .document import LiveNotebook

_live: dict[int, LiveNotebook] = {}


def live_notebook(shell: Any) -> LiveNotebook | None:
    """This kernel's live notebook (its channel opened on first use), or None outside a Jupyter kernel."""
    if type(shell).__name__ != "ZMQInteractiveShell" or getattr(shell, "kernel", None) is None:
        return _live.get(id(shell))  # tests hand in a channel of their own (:func:`attach`)
    found = _live.get(id(shell))
    if found is None:
        found = _live[id(shell)] = LiveNotebook(Channel(IpykernelTransport()))
    return found


def attach(shell: Any, channel: Channel) -> LiveNotebook:
    """Use ``channel`` as ``shell``'s notebook channel (a front end stand-in in tests)."""
    found = _live[id(shell)] = LiveNotebook(channel)
    return found


def detach(shell: Any) -> None:
    """Close ``shell``'s channel (``%unload_ext``)."""
    found = _live.pop(id(shell), None)
    if found is not None:
        found.channel.close()


__all__ = ["Channel", "LiveNotebook", "attach", "detach", "live_notebook"]
