"""Prices per million tokens, and the cost of a usage. An unpriced model has no cost (None), never
a wrong one. Input the provider served from its prompt cache is priced at the model's cached-input rate
(a tenth of the input price for the gpt-5 family); a model with no published cached rate pays the full
input price for it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..events import BudgetUnchecked, Event

if TYPE_CHECKING:
    from ..config import Shiro

# USD per 1M tokens: (input, cached input, output). OpenAI's public list prices.
PRICES: dict[str, tuple[float, float, float]] = {
    "gpt-5.1": (1.25, 0.125, 10.0),
    "gpt-5": (1.25, 0.125, 10.0),
    "gpt-5-mini": (0.25, 0.025, 2.0),
    "gpt-5-nano": (0.05, 0.005, 0.40),
    "gpt-4.1": (2.0, 0.50, 8.0),
    "gpt-4.1-mini": (0.40, 0.10, 1.60),
    "gpt-4.1-nano": (0.10, 0.025, 0.40),
    "gpt-4o": (2.50, 1.25, 10.0),
    "gpt-4o-mini": (0.15, 0.075, 0.60),
    "o3": (2.0, 0.50, 8.0),
    "o4-mini": (1.10, 0.275, 4.40),
    "o3-mini": (1.10, 0.55, 4.40),
}

_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def price_of(model: str) -> tuple[float, float, float] | None:
    """(input, cached input, output) USD per 1M tokens, or None for a model not in the table."""
    name = model.strip().lower()
    if name.startswith("openai/"):  # OpenRouter-style names
        name = name[len("openai/") :]
    return PRICES.get(name) or PRICES.get(_DATED.sub("", name))


def cost_usd(model: str, input_tokens: int, output_tokens: int, cached_input_tokens: int = 0) -> float | None:
    """What a call cost: its uncached input, its cached input (the cached rate) and its output."""
    price = price_of(model)
    if price is None:
        return None
    cached = min(max(cached_input_tokens, 0), input_tokens)
    return ((input_tokens - cached) * price[0] + cached * price[1] + output_tokens * price[2]) / 1_000_000


class SpendLimit:
    """A turn's spend limit (``Shiro.budget_usd``) where it can be checked: a model with no price has no cost,
    so its budget cannot be, and that is said once per kernel (:class:`~shiro_kernel.events.BudgetUnchecked`)."""

    def __init__(self, config: Shiro) -> None:
        self.config = config
        self._warned = False

    def for_model(self, model: str, emit: Callable[[Event], None]) -> float | None:
        """The limit for a turn on ``model``, or None when there is none or ``model`` has no price."""
        budget = self.config.budget_usd
        if budget is None:
            return None
        if price_of(model) is None:
            if not self._warned:
                self._warned = True
                emit(BudgetUnchecked(budget, model))
            return None
        return float(budget)
