"""The notebook as the agent's workspace: the channel to the front end's live document (its comm,
:mod:`.channel`) and what the agent read of it and asks to change (:mod:`.document`). The cell tools
(:mod:`shiro_kernel.tools.cell_tools`) act through them; the labextension is the other end
(docs/notebook-protocol.md)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .channel import Channel, IpykernelTransport
from .document import LiveNotebook

_live: dict[int, LiveNotebook] = {}
_hooks: dict[int, Callable[[Any], None]] = {}


def live_notebook(shell: Any) -> LiveNotebook | None:
    """This kernel's live notebook (its channel opened on first use), or None outside a Jupyter kernel."""
    if type(shell).__name__ != "ZMQInteractiveShell" or getattr(shell, "kernel", None) is None:
        return _live.get(id(shell))  # tests hand in a channel of their own (:func:`attach`)
    found = _live.get(id(shell))
    if found is None:
        found = _live[id(shell)] = LiveNotebook(Channel(IpykernelTransport()))
        _watch_runners(shell, found)
    return found


def _watch_runners(shell: Any, live: LiveNotebook) -> None:
    """Note which client (browser window) runs each cell (IPython's ``pre_run_cell``): the front end that ran
    a turn's ``%shiro`` cell serves that turn's requests."""

    def noted(info: Any) -> None:
        cell_id = getattr(info, "cell_id", None)
        client = _client_of(shell)
        if isinstance(cell_id, str) and cell_id and client:
            live.note_cell(cell_id, client)

    _hooks[id(shell)] = noted
    shell.events.register("pre_run_cell", noted)


def _client_of(shell: Any) -> str | None:
    """The client session of the execute request the kernel runs now (its header's ``session``)."""
    try:
        session = shell.kernel.get_parent("shell")["header"]["session"]
    except Exception:  # any kernel's get_parent, or a request without a header: not known
        return None
    return session if isinstance(session, str) and session else None


def open_channel(shell: Any) -> None:
    """In a Jupyter kernel, open the comm the labextension answers (docs/notebook-protocol.md) at
    ``%load_ext``: its hello arrives when that cell ends, so the first turn already knows whether the live
    document can be edited."""
    if type(shell).__name__ != "ZMQInteractiveShell":
        return
    from ..store.paths import notebook_path

    live = live_notebook(shell)
    if live is not None:
        path = notebook_path(getattr(shell, "user_ns", None))
        live.channel.open(str(path) if path else None)


def run_by_agent(shell: Any, cell_id: str | None) -> bool:
    """Is cell ``cell_id`` being run by the agent's own ``notebook_run`` (so a ``%shiro`` line in it must not
    start a turn inside the running one)?"""
    found = _live.get(id(shell))
    return found is not None and cell_id is not None and cell_id in found.running


def attach(shell: Any, channel: Channel) -> LiveNotebook:
    """Use ``channel`` as ``shell``'s notebook channel (a front end stand-in in tests)."""
    found = _live[id(shell)] = LiveNotebook(channel)
    return found


def detach(shell: Any) -> None:
    """Close ``shell``'s channel (``%unload_ext``)."""
    found = _live.pop(id(shell), None)
    if found is not None:
        found.channel.close()
    hook = _hooks.pop(id(shell), None)
    if hook is not None:
        try:
            shell.events.unregister("pre_run_cell", hook)
        except ValueError:  # not registered any more
            pass


__all__ = ["Channel", "LiveNotebook", "attach", "detach", "live_notebook", "open_channel", "run_by_agent"]
