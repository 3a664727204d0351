"""The one place for the clock and for ids: UTC timestamps and UUIDv7 session ids (how an id is shown, the
shortest prefix unique among a home's sessions, is :mod:`~shiro_kernel.store.short_ids`)."""

from __future__ import annotations

import os
import time
import uuid
from datetime import datetime, timezone


def now_iso() -> str:
    """UTC now as ISO 8601 with milliseconds and a Z, like the seed's records."""
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_last_ms = 0
_seq = 0


def uuid7() -> str:
    """A UUIDv7 (RFC 9562): 48-bit unix milliseconds, then random bits; ids sort by creation time.

    Within one millisecond a counter in ``rand_a`` keeps ids made by this process increasing.
    """
    global _last_ms, _seq
    ms = time.time_ns() // 1_000_000
    if ms <= _last_ms:
        ms = _last_ms
        _seq = (_seq + 1) & 0xFFF
        if _seq == 0:
            ms += 1
    else:
        _seq = int.from_bytes(os.urandom(2), "big") & 0x3FF  # leave headroom for the counter
    _last_ms = ms
    rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms << 80) | (0x7 << 76) | (_seq << 64) | (0b10 << 62) | rand_b
    return str(uuid.UUID(int=value))
