"""How a claim is matched against the tool outputs: which output values give it, and which one is shown.

An output number *x* gives a claim when *x* rounded (half-up or half-even) or cut to the digits the answer
shows is the claim's number (:func:`intervals`); for a percentage, *x* may also be the fraction (0.131417
gives 13.1 %); for a scaled claim ("1.2 million", "$3M", "5k"), *x* may be the whole value (1,234,567) or
the number before the scale (an output already in millions). Values are compared unsigned. Of the values
that give a claim, the nearest is its evidence (:class:`Anchor`): the first call whose output holds it, and
the line it is on.

Pure: a claim (:mod:`.claims`) looked up in an :class:`~.tool_outputs.OutputIndex`.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .claims import Claim
from .tool_outputs import OutputIndex


@dataclass(frozen=True)
class Anchor:
    """A claim looked up: ``found``; the call whose output has it — of the output values that give the
    claim, the nearest, in the first call that has that value — and the line of that output it is on
    (spaces collapsed, cut to 200 characters) for a hover."""

    claim: Claim
    found: bool
    call_id: str | None = None
    line: str | None = None


def intervals(claim: Claim) -> list[tuple[float, float, float]]:
    """``(center, low, high)``: the unsigned output values that give the claim. Rounded to the claim's step
    it is the claim, or cut to it (a copied digit string: 0.1318 written 13.1 %). Unsigned on both sides:
    an answer says "fell 3 %" of a -0.03, and code and prose sign a change either way, so a sign is never
    held against a number (an explicit "+16.4" matches an output -16.4 too)."""
    low, high = claim.value - claim.step / 2, claim.value + claim.step
    slack = max(abs(claim.value), claim.step) * 1e-9  # float noise at the edges (13.05 stored as 13.0499…)
    out = [(claim.value, low - slack, high + slack)]
    if claim.percent:  # the fraction: 0.131417 for 13.1 %
        out.append((claim.value / 100, (low - slack) / 100, (high + slack) / 100))
    if claim.scale != 1.0:  # the number before the scale: an output already in millions
        out.append((claim.value / claim.scale, (low - slack) / claim.scale, (high + slack) / claim.scale))
    return out


def look_up(index: OutputIndex, claims: Iterable[Claim]) -> list[Anchor]:
    """Each claim looked up in the outputs ``index`` holds."""
    return [_anchor(index, claim) for claim in claims]


def _anchor(index: OutputIndex, claim: Claim) -> Anchor:
    """The output value nearest the claim among those that give it (the best evidence to show)."""
    best: float | None = None
    distance = 0.0
    for center, low, high in intervals(claim):
        for value in index.around(center):
            off = abs(value - center) / (high - low)
            if low <= value <= high and (best is None or off < distance):
                best, distance = value, off
    if best is None:
        return Anchor(claim, False)
    call_id, line = index.where(best)
    return Anchor(claim, True, call_id, line)


def anchor(claims: Iterable[Claim], sources: Iterable[tuple[str, str]]) -> list[Anchor]:
    """Look each claim up in ``sources``, ``(call_id, text)`` pairs (see
    :func:`~.tool_outputs.result_sources`)."""
    index = OutputIndex()
    for call_id, text in sources:
        index.add_text(call_id, text)
    return look_up(index, claims)


__all__ = ["Anchor", "anchor", "intervals", "look_up"]
