"""The package's errors: one small hierarchy, and one rule for turning them into words.

Inside ``shiro_kernel`` a failure is an exception from this module, and ``str(exc)`` is one sentence a
person can act on. Nothing returns an ``"Error: …"`` string or an error slot in a tuple. The text
changes hands in exactly three places:

* the tool boundary (:func:`shiro_kernel.tools.run_tool`): a tool's exception becomes the result the
  model reads, ``Error: <sentence>``;
* user-facing commands (:func:`shiro_kernel.commands.run`, the ``%shiro`` magic, the ``shiro`` CLI):
  a :class:`ShiroError` becomes the one line shown to the user;
* the turn loop: a provider failure becomes the turn's ``error`` line (it arrives as an event, since it
  is part of a stream, and never raises into the notebook).
"""

from __future__ import annotations

from pathlib import Path


class ShiroError(Exception):
    """Base class: ``str(exc)`` is the sentence to show."""


class RequestError(ShiroError):
    """The user asked for something that cannot be done as asked (unknown session, unknown agent variant,
    a bad option value)."""


class Ambiguous(RequestError):
    """A session id prefix that matches more than one session; ``shown`` is how each match is shown (its
    short id), in the order of ``matches``."""

    def __init__(self, prefix: str, matches: list[str], shown: list[str]) -> None:
        names = ", ".join(shown[:5]) + (", ..." if len(matches) > 5 else "")
        super().__init__(f'no session matching "{prefix}" (ambiguous: {len(matches)} sessions start with it: {names})')
        self.prefix = prefix
        self.matches = matches


class PolicyError(RequestError):
    """Settings beyond the administrator's policy, or a policy file that cannot be applied
    (:mod:`shiro_kernel.policy`): nothing is sent."""


class StoreError(ShiroError):
    """A file under ``SHIRO_HOME`` could not be read or written (a full disk, a read-only home)."""


class CorruptFile(StoreError):
    """A store file exists but cannot be read as what it should be."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path} is corrupt ({reason})")
        self.path = Path(path)
        self.reason = reason


class ToolError(ShiroError):
    """A tool's failure the model should read and act on (a bad path, no match, ...)."""


class MemoryRefused(ShiroError):
    """A memory operation refused: an invalid name or scope, a muted or missing memory, empty text."""


class BundleError(ShiroError):
    """A bundle that cannot be installed, upgraded or found."""


class ProviderError(ShiroError):
    """A model call that failed for good (after retries). ``kind`` names a failure the caller can repair
    (as the ``Error`` event's: ``item_not_found``, ``images_unsupported``)."""

    def __init__(self, message: str, status: int | None = None, kind: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.kind = kind


class MissingKey(ProviderError):
    """No API key and no local server configured."""


class TurnTimeout(KeyboardInterrupt):
    """A turn that ran past its wall-clock limit (``Shiro.turn_timeout_s``): stops it like an interrupt
    (a tool's partial output is kept, as for any interrupt: the tool sets ``partial`` on it)."""


__all__ = [
    "Ambiguous",
    "BundleError",
    "CorruptFile",
    "MemoryRefused",
    "MissingKey",
    "ProviderError",
    "RequestError",
    "ShiroError",
    "StoreError",
    "ToolError",
    "TurnTimeout",
]
