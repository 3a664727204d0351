"""Money as the views show it: the footer's tokens and four decimals, a budget as typed, the budget's lines.

The turn loop and the agent deal in numbers (``Usage.cost_usd``, ``Shiro.budget_usd``); only the views
(and the commands that print) turn them into text, here.
"""

from __future__ import annotations

from ..events import Usage

#: what an estimated count says of itself (the server sent no usage; the counts are characters / 4)
ESTIMATED = "(estimated: the server sent no usage)"

BUDGET_REACHED = "budget reached: {spent} of {budget} spent — raise it with %config Shiro.budget_usd = {suggest}"


def tokens(usage: Usage, cached: str = " ({n:,} cached)") -> str:
    """``4,100 in · 60 out tokens``, or ``~4,100 in · ~60 out tokens (estimated: the server sent no usage)``
    where the server sent none; ``cached``: how the cached share is said (``{n}``)."""
    mark = "~" if usage.estimated else ""
    share = cached.format(n=usage.cached_input_tokens) if usage.cached_input_tokens else ""
    text = f"{mark}{usage.input_tokens:,} in{share} · {mark}{usage.output_tokens:,} out tokens"
    return f"{text} {ESTIMATED}" if usage.estimated else text


def money(value: float) -> str:
    """``$0.0123`` — four decimals, the precision of the footer."""
    return f"${value:.4f}"


def budget_money(value: float) -> str:
    """A budget in dollars: ``$0.50``; amounts below a cent keep their digits (``$0.002``)."""
    if abs(value * 100 - round(value * 100)) < 1e-9:
        return f"${value:.2f}"
    return "$" + budget_amount(value)


def budget_amount(value: float) -> str:
    """A budget as typed in ``%config``: ``0.5``, ``1``, ``0.002``."""
    return f"{value:.6f}".rstrip("0").rstrip(".") or "0"


def budget_message(spent: float, budget: float) -> str:
    """The line a turn stopped by its budget ends with: what was spent, and how to raise it."""
    return BUDGET_REACHED.format(
        spent=money(spent), budget=budget_money(budget), suggest=budget_amount(budget * 2 if budget > 0 else 1.0)
    )


def budget_meter(spent: float | None, budget: float | None, model: str, priced: bool) -> str:
    """``$0.0123 of $0.50 budget`` (the footer's meter); '' without a budget."""
    if budget is None:
        return ""
    if spent is None and not priced:
        return f"{budget_money(budget)} budget not checked (no price for {model})"
    return f"{money(spent or 0.0)} of {budget_money(budget)} budget"


def unpriced_budget(budget: float, model: str) -> str:
    """The one warning when a budget is set but the model has no known price."""
    return (
        f"Shiro.budget_usd is {budget_money(budget)}, but {model} has no known price, so the budget cannot be "
        "checked; turns are not stopped by it"
    )


def cost_line(cost_usd: float | None, model: str) -> str:
    """A session's cost for ``/cost``: four decimals, or why it is unknown."""
    return money(cost_usd) if cost_usd is not None else f"unknown (no price for {model})"


__all__ = ["budget_amount", "budget_message", "budget_meter", "budget_money", "cost_line", "money", "unpriced_budget"]
