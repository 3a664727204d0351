"""Prices per million tokens, and the cost of a usage. An unpriced model has no cost (None), never
a wrong one."""

from __future__ import annotations

import re

# USD per 1M tokens: (input, output). Public list prices; cached-input discounts are not applied.
PRICES: dict[str, tuple[float, float]] = {
    "gpt-5.1": (1.25, 10.0),
    "gpt-5": (1.25, 10.0),
    "gpt-5-mini": (0.25, 2.0),
    "gpt-5-nano": (0.05, 0.40),
    "gpt-4.1": (2.0, 8.0),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.0),
    "gpt-4o-mini": (0.15, 0.60),
    "o3": (2.0, 8.0),
    "o4-mini": (1.10, 4.40),
    "o3-mini": (1.10, 4.40),
}

_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def price_of(model: str) -> tuple[float, float] | None:
    name = model.strip().lower()
    if name.startswith("openai/"):  # OpenRouter-style names
        name = name[len("openai/") :]
    return PRICES.get(name) or PRICES.get(_DATED.sub("", name))


def cost_usd(model: str, input_tokens: int, output_tokens: int) -> float | None:
    price = price_of(model)
    if price is None:
        return None
    return (input_tokens * price[0] + output_tokens * price[1]) / 1_000_000
