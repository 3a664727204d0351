"""The extension in a shell: what ``%load_ext shiro_kernel`` sets up and ``%unload_ext`` undoes.

:func:`load` registers the magics (:class:`~shiro_kernel.magics.ShiroMagics`, with the ``Shiro`` settings
IPython's ``%config`` reaches), the hook that notes which cell runs (``pre_run_cell``), the claim of
``%shiro … ?`` lines from IPython's help syntax (:func:`~shiro_kernel.magics.claim_question_lines`), the watch
for a widget frontend, the shutdown hook that tells a restart during a turn as one (:mod:`shiro_kernel.stops`),
the notebook channel (:func:`~shiro_kernel.notebook.open_channel`), and the warm-up that imports ``openai`` off
the main thread (:mod:`shiro_kernel.warmup`). Loading twice is loading once. :func:`unload` undoes all
of it, and what turns set up since.
"""

from __future__ import annotations

import sys
from typing import Any

from .config import Shiro, for_shell
from .magics import ShiroMagics, claim_question_lines, warm_options

LOADED_TOO_LATE = (
    "shiro: IPython read this whole cell before the extension was loaded, so its `%shiro … ?` line was taken "
    "as a help request and not sent; run the %shiro line again, in a cell of its own"
)


def _asked_in_this_cell(shell: Any) -> bool:
    """Whether the cell running ``%load_ext`` holds a ``%shiro … ?`` line: IPython transformed it into a help
    request before the claim existed, and no cleaner hook can take it back (the cell is compiled)."""
    result = getattr(getattr(shell, "displayhook", None), "exec_result", None)
    raw = getattr(getattr(result, "info", None), "raw_cell", None)
    if not isinstance(raw, str) or "?" not in raw:
        return False
    from .line import question

    return any(question(line) for line in raw.splitlines())


def load(shell: Any) -> None:
    """``%load_ext shiro_kernel``: register the magics and the ``?`` claim, watch for a widget frontend,
    and start importing ``openai`` off the main thread."""
    if any(isinstance(m, ShiroMagics) for m in shell.magics_manager.registry.values()):
        return  # loaded already
    config = next((c for c in shell.configurables if isinstance(c, Shiro)), None)
    if config is None:
        config = for_shell(shell)
        shell.configurables.append(config)
    magics = ShiroMagics(shell, config)
    shell.register_magics(magics)
    shell.events.register("pre_run_cell", magics.remember_cell)
    if claim_question_lines not in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.append(claim_question_lines)
    from . import stops, warmup
    from .notebook import open_channel
    from .ui import kernel

    kernel.watch_comm_opens(shell)
    stops.install(shell, magics.kernel_ending)  # a restart during a turn is told as one, not as the user's Stop
    open_channel(shell)
    warmup.start(warm_options, base_url=lambda: config.base_url)
    if _asked_in_this_cell(shell):
        print(LOADED_TOO_LATE, file=sys.stderr)


def unload(shell: Any) -> None:
    """``%unload_ext shiro_kernel``: undo everything :func:`load` did (and what turns set up since)."""
    from .notebook import detach
    from .ui import kernel

    registry = shell.magics_manager.registry
    magics = registry.pop("ShiroMagics", None)
    if isinstance(magics, ShiroMagics):
        magics.close()
        try:
            shell.events.unregister("pre_run_cell", magics.remember_cell)
        except ValueError:  # not registered (an older load of this module)
            pass
    for kind in ("line", "cell"):
        table = shell.magics_manager.magics[kind]
        if getattr(table.get("shiro"), "__self__", None) is magics:
            table.pop("shiro", None)
    if claim_question_lines in shell.input_transformers_cleanup:
        shell.input_transformers_cleanup.remove(claim_question_lines)
    shell.configurables[:] = [c for c in shell.configurables if not isinstance(c, Shiro)]
    kernel.unwatch_comm_opens(shell)
    kernel.uninstall_interrupt_handler(shell)
    detach(shell)


__all__ = ["LOADED_TOO_LATE", "load", "unload"]
