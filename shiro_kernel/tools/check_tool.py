"""``notebook_check``: rerun the saved notebook top to bottom in a fresh kernel (its ``%shiro`` cells
replayed, no model) and say which cells fail or now differ from their saved outputs — hidden state, an
out-of-order dependency — as ``shiro check`` and ``%shiro /check`` do (:mod:`shiro_kernel.rerun.check`, which
the agent gives the tool as :attr:`ToolContext.check <shiro_kernel.tools.base.ToolContext.check>`).

It runs the notebook's code (in a kernel of its own, not the user's), so it asks for approval like
``python``; it never touches the user's namespace, so a background turn runs it off the kernel's thread.
"""

from __future__ import annotations

from typing import Any

from .base import Effect, Tool, ToolContext, ToolError, outside, schema

#: a whole notebook may take a while; the check stops it after this many seconds
CHECK_TIMEOUT_S = 600


def _run(args: dict[str, Any], ctx: ToolContext) -> str:
    path = ctx.notebook_path
    if path is None or not path.is_file():
        raise ToolError("there is no saved notebook to check (this kernel does not know its notebook file)")
    if ctx.check is None:
        raise ToolError("no notebook check can run here")
    return ctx.check(path, CHECK_TIMEOUT_S) + ("\n(the saved file was checked: changes not saved yet are not in it)")


notebook_check = Tool(
    name="notebook_check",
    description=(
        "Check that the saved notebook reproduces: rerun it top to bottom in a fresh kernel (its %shiro cells "
        "replayed without the model) and list each cell that fails or whose outputs differ from the saved ones, "
        "with the reason (hidden state, an out-of-order dependency). Slow: use it when the user asks whether the "
        "notebook reruns, or before saying it does."
    ),
    parameters=schema({}),
    run=_run,
    effects=Effect.FILES | Effect.OUTSIDE,  # the notebook's code, in a kernel of its own: it may do anything
    kernel_thread=False,
    touches=outside("notebook_check changes something outside the kernel that cannot be taken back"),
)

TOOLS = [notebook_check]
