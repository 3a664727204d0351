"""The provider for the settings in force: the same :class:`~.client.Provider` while they stay (its client, its input
cache, its server profile), a new one when they change — the administrator's policy checked each time.

:meth:`ProviderHolder.get` is what a turn calls with; :meth:`ProviderHolder.plain` a provider for a one-off call
with no tools, :meth:`ProviderHolder.ask` that call (``/memory``'s merge); :meth:`ProviderHolder.threshold` where the history is pruned, as the server's window allows.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from .. import policy, redact

if TYPE_CHECKING:
    from ..config import Shiro
    from ..session import Session
    from .client import Provider, ProviderSettings

#: the seed's ``/memory`` merge call retries twice (a turn's calls retry ``Shiro.max_retries`` times)
MERGE_RETRIES = 2


class InUse(Protocol):
    """What holds the session in use (the agent's :class:`~shiro_kernel.current.Current`): the session changes when
    another is resumed, so it is read at each request."""

    @property
    def session(self) -> Session: ...


class ProviderHolder:
    """``config``'s provider; its cache key is ``current``'s session id (one session, one cache: its requests
    share their prefix)."""

    def __init__(self, config: Shiro, current: InUse) -> None:
        self.config, self.current = config, current
        self.provider: Provider | None = None

    def settings(self, model: str | None = None, reasoning_effort: str | None = None) -> ProviderSettings:
        """What every request is made with; raises :class:`~shiro_kernel.errors.PolicyError` when they (an
        environment default, ``%shiro --model``, a setting made before the policy) are beyond the administrator's
        policy, whose redaction floor and ``values`` apply from here on."""
        from .client import ProviderSettings

        c = self.config
        found = policy.check(
            {"base_url": c.base_url, "model": model or c.model, "approval": c.approval, "budget_usd": c.budget_usd}
        )
        redact.set_floor(policy.redact_floor(found))
        settings = ProviderSettings.of(c, model, reasoning_effort, cache_key=self.current.session.id)
        return replace(settings, values=policy.values_of(found))

    def get(self, model: str | None = None, reasoning_effort: str | None = None) -> Provider:
        """The provider for these settings: the same one while they stay."""
        from .client import Provider

        settings = self.settings(model, reasoning_effort)
        if self.provider is None or self.provider.settings != settings:
            self.provider = Provider(settings)
        return self.provider

    def plain(self) -> Provider:
        """A provider of its own for one plain call, retried as the seed's merge call is (:data:`MERGE_RETRIES`)."""
        from .client import Provider

        return Provider(replace(self.settings(None), max_retries=MERGE_RETRIES))

    def ask(self, system: str, prompt: str, observe: Callable[[Any], object] | None = None) -> str:
        """One plain model call with no tools (``/memory``'s merge), its answer's text; ``observe`` sees its events
        (the egress ledger's requests). Raises :class:`~shiro_kernel.errors.ProviderError`."""
        from ..transcript import Message
        from .client import answer

        return answer(self.plain().stream(system, [Message.user(prompt)], [], None), observe).text

    def threshold(self) -> int:
        """Where the history is pruned: ``Shiro.compact_threshold``, or less where the server's context window is
        known to take less (:meth:`~shiro_kernel.provider.profile.ServerProfile.threshold`)."""
        threshold = int(self.config.compact_threshold)
        return threshold if self.provider is None else self.provider.threshold(threshold)


__all__ = ["MERGE_RETRIES", "ProviderHolder"]
