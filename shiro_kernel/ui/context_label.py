"""The context meter as the view shows it: ``<pct>% ctx``, amber from 66, red from 90 (``compacting
soon``). The percentage itself is :func:`shiro_kernel.context.estimate.percent`."""

from __future__ import annotations

AMBER_FROM = 66
RED_FROM = 90


def meter_label(pct: int) -> tuple[str, str]:
    """``("<pct>% ctx", level)``; from 90 the label adds `` compacting soon``.

    The level is ``normal``, ``amber`` (from 66) or ``red`` (from 90)."""
    if pct >= RED_FROM:
        return f"{pct}% ctx compacting soon", "red"
    return f"{pct}% ctx", "amber" if pct >= AMBER_FROM else "normal"


__all__ = ["AMBER_FROM", "RED_FROM", "meter_label"]
