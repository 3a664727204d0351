"""The kernel's private values: the names from every source, their values in the namespace now, and each
session's :class:`~.mask.Mask` — what the provider asks for before each request (:meth:`PrivateValues.mask_for`).

Nothing is read when nothing is private: a session with no private name and no value masked before costs one
look at the project's file per request.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from ..errors import PolicyError
from .mask import Mask
from .names import Name, Private, read_project
from .values import Found, collect

if TYPE_CHECKING:
    from ..config import Shiro
    from ..location import Location
    from ..session import Session


class PrivateValues:
    """What is private in this kernel (``names``: the session's own changes; the rest read as it is now)."""

    def __init__(self, config: Shiro, location: Location) -> None:
        #: ``Shiro.private`` and ``Shiro.private_figures`` are read from ``config``; the namespace and the project's
        #: root from ``location``, each time they are needed
        self.config, self.location = config, location
        self.names = Private()
        #: the values found by the last look, and what the project's file had to say
        self.found = Found()
        self.problems: list[str] = []
        self._mask: tuple[str, str, Mask] | None = None  # (session id, its key, its mask)

    def sources(self) -> dict[str, str]:
        """Each private name now, and where it comes from (``policy``, ``project``, ``setting``, ``session``)."""
        project, self.problems = read_project(self.location.root)
        return self.names.sources(self.config.private, project, policy_names())

    def mask_for(self, session: Session) -> Mask | None:
        """``session``'s mask with the values the private names hold in the kernel now, or None when nothing is
        private (no name, and no value of this session masked before)."""
        names = self.sources()
        if not names and not session.private_seen:
            return None
        held = self._mask
        if held is None or held[0] != session.id or held[1] != session.mask_key:
            mask = Mask(session.mask_key, session.private_seen)
            mask.add(dict(session.private_seen))
            self._mask = held = (session.id, session.mask_key, mask)
        mask = held[2]
        self.found = collect(self.location.namespace() or {}, [Name.parse(n) for n in names])
        mask.add(self.found.texts)
        return mask

    def drawn_from(self, code: str) -> list[str]:
        """The private data (``df.email``, ``salaries``) that ``code`` (a call's arguments) names — a column by its
        name, a whole variable by its own — as the last look found it; [] when figures may be sent
        (``Shiro.private_figures``)."""
        if self.config.private_figures or not self.found.sources:
            return []
        out = []
        for source in self.found.sources:
            word = source.split(".", 1)[1] if "." in source else source  # a column by its name, a variable by its own
            if re.search(rf"(?<![A-Za-z0-9_]){re.escape(word)}(?![A-Za-z0-9_])", code):
                out.append(source)
        return out

    def describe(self, session: Session) -> str:
        """``%shiro /private``: the private names, where each comes from, and what the kernel holds of them now."""
        names = self.sources()
        lines = []
        if not names:
            lines.append(
                "nothing is private: name a column, a variable's column or a variable with "
                "%shiro /private add email (this session), %config Shiro.private = ['email'], or a line of "
                ".shiro/private in the project"
            )
        else:
            lines.append("private (sent only as stand-ins such as [private:email:3f9a2c81]):")
            lines += [f"  {name}  ({source})" for name, source in names.items()]
            mask = self.mask_for(session)
            found = self.found
            held = f"{len(found.texts):,} values in the kernel now" + (
                f" from {', '.join(found.sources)}" if found.sources else ""
            )
            lines.append(f"  {held}; {len(mask) if mask is not None else 0:,} stand-ins this session")
            if found.short:
                lines.append(
                    f"  {found.short:,} values of under 3 characters are not masked (they occur anywhere by chance)"
                )
            if found.cut:
                lines.append(f"  read only the first 1,000,000 values of {', '.join(found.cut)}")
        lines += [f"  ⚠ {p}" for p in self.problems]
        return "\n".join(lines)


def policy_names() -> tuple[str, ...]:
    """The names the administrator's policies make private (none when a policy cannot be read: then no turn sends
    anything anyway, :func:`shiro_kernel.policy.check`)."""
    from .. import policy

    try:
        return tuple(dict.fromkeys(n for p in policy.policies() for n in p.private))
    except PolicyError:
        return ()


__all__ = ["PrivateValues", "policy_names"]
