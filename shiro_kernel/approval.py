"""Approval: may a call run? One decision for the notebook's own turns and for other agents' MCP calls.

``Shiro.approval`` is the policy: ``auto`` runs everything, ``read-only`` refuses every tool that changes
something (``Tool.changes``: any effect but ``Effect.READS``), ``ask`` asks the user about a tool that changes
the namespace, files or the outside world (``Tool.needs_approval``; a ``REVIEW`` tool asks in the notebook
instead) — through buttons where a view can show them, and refuses where none can (nbclient, papermill,
terminal IPython), saying how to allow it. "Always this session" allows a tool (or, for another agent, a
client and a tool) for the rest of the session.

:func:`decide` is the rule; :func:`refusal` is the text the model reads when a call is not run. How the
question is put is the view's business (:class:`~shiro_kernel.ui.widgets.ApprovalBox`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .tools import Tool
    from .transcript import ToolCallPart

#: what an approver answers, and what :func:`decide` says before anyone is asked; UNANSWERED: nobody answered
#: within ``Shiro.approval_timeout_s`` (a closed tab), a refusal the model is told about
APPROVE, DENY, ALWAYS, LATER, UNANSWERED = "approve", "deny", "always", "later", "unanswered"
ASK = "ask"
POLICIES = ("ask", "auto", "read-only")

#: asks the user about one call; returns APPROVE, DENY, ALWAYS, or LATER (leave it pending)
Approver = Callable[["ToolCallPart", "Tool"], str]


def headless_approver(call: ToolCallPart, tool: Tool) -> str:
    """Nobody can be asked: refused (and the model is told how the user can allow it)."""
    return DENY


def decide(policy: str, tool: Tool | None, *, allowed: bool = False) -> str:
    """APPROVE, DENY or ASK for one call under ``policy``. ``allowed``: "Always this session" was given for
    it. Derived from the tool's declared effect alone: a tool that changes nothing (or an unknown tool, which
    fails on its own) never needs approval."""
    if tool is None or policy == "auto":
        return APPROVE
    if policy == "read-only" and tool.changes:
        return DENY
    if not tool.needs_approval:  # a reading tool, or one that shows its change in the notebook for Accept / Reject
        return APPROVE
    return APPROVE if allowed else ASK


HEADLESS_DENIAL = (
    "Error: not approved — this run cannot show approval buttons (no widget frontend) and "
    'Shiro.approval is "ask", so {name} was not run. To allow it, run '
    '`%config Shiro.approval = "auto"` and ask again.'
)
HEADLESS_NOTICE = (
    "this run cannot show approval buttons, so calls that change something were not run; to allow them in a "
    'headless run you trust, run %config Shiro.approval = "auto" and ask again'
)
USER_DENIAL = "Error: not approved — the user denied this {name} call. Ask before trying something else."
UNANSWERED_DENIAL = (
    "Error: not approved — nobody answered the approval question for this {name} call within {seconds:g} s "
    "(Shiro.approval_timeout_s), so it was not run. The user may be away: do not retry it; finish what you can "
    "without it and say what is left."
)
#: the one line the turn's cell shows when a question went unanswered
UNANSWERED_NOTICE = (
    "no answer within {seconds:g} s (Shiro.approval_timeout_s): {name} was not run, and the model was told"
)
READ_ONLY_DENIAL = (
    'Error: not approved — Shiro.approval is "read-only", so {name} is refused. Use the reading tools, '
    'or the user can run `%config Shiro.approval = "ask"`.'
)


def refusal(policy: str, headless: bool, name: str, unanswered_after: float | None = None) -> str:
    """The result text of a call that was not approved: why, and how the user can allow it
    (``unanswered_after``: the seconds a question waited before it counted as a refusal)."""
    if unanswered_after is not None:
        return UNANSWERED_DENIAL.format(name=name, seconds=unanswered_after)
    if policy == "read-only":
        return READ_ONLY_DENIAL.format(name=name)
    return (HEADLESS_DENIAL if headless else USER_DENIAL).format(name=name)


__all__ = [
    "ALWAYS",
    "APPROVE",
    "ASK",
    "DENY",
    "HEADLESS_DENIAL",
    "HEADLESS_NOTICE",
    "LATER",
    "POLICIES",
    "READ_ONLY_DENIAL",
    "UNANSWERED",
    "UNANSWERED_DENIAL",
    "UNANSWERED_NOTICE",
    "USER_DENIAL",
    "Approver",
    "decide",
    "headless_approver",
    "refusal",
]
