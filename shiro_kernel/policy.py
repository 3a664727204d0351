"""The ceiling an administrator sets: a policy file the user cannot loosen (SPEC §13, "Policy").

A deployment (JupyterHub, a shared server) writes a YAML (or JSON) file where users cannot write it:
``/etc/shiro/policy.yaml``, or ``etc/shiro/policy.yaml`` under the environment's prefix (:data:`SYSTEM_PATHS`).
``$SHIRO_POLICY`` names one more file; each file found applies, so the strictest of them wins, and a user who
sets ``SHIRO_POLICY`` can only add limits, never lift the system's. What a file may pin::

    servers: [https://api.openai.com/v1, http://127.0.0.1:8080]   # base URLs (a path prefix matches)
    models: [gpt-5-mini, "qwen*"]                                  # names or fnmatch patterns
    approval: ask                                                  # the most permissive: read-only < ask < auto
    budget_usd: 5                                                  # the highest Shiro.budget_usd
    redact: ["CUST-[0-9]{6}"]                                      # patterns always redacted (a floor)
    values: masked                                                 # masked | schema-only
    private: [email, patients.ssn]                                 # what is private, for every user

A ``%config`` beyond it is refused in one sentence naming the file (:func:`refusal`, called by
:class:`~shiro_kernel.config.Shiro`'s validators), and a turn whose effective settings are beyond it (an
environment default, ``%shiro --model``, a setting made before the file appeared) sends nothing
(:func:`check`). A file that cannot be read, is not a mapping, or has a key or value this version does not know
is not skipped: nothing is sent until it is fixed (a typo must not lift a limit). ``private`` names are
private for every user (:mod:`shiro_kernel.private`: no ``/private remove`` takes them back); ``values:
schema-only`` sends no value of the data at all, masked or not (:mod:`shiro_kernel.private.schema_only`).

Only a file that exists costs anything: the lookup is a ``stat`` per path, and PyYAML is imported only to read
a file that is there (it is cached by its mtime and size). This is a guard on settings, not a sandbox: code the
user runs in the kernel can do anything the user's account can.
"""

from __future__ import annotations

import fnmatch
import math
import os
import sys
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from .errors import PolicyError

#: where a deployment puts its policy; each one found applies
SYSTEM_PATHS: tuple[Path, ...] = (Path("/etc/shiro/policy.yaml"), Path(sys.prefix) / "etc" / "shiro" / "policy.yaml")

#: approval modes from the least to the most permissive
APPROVALS = ("read-only", "ask", "auto")

#: the server a client talks to when ``Shiro.base_url`` is not set (the openai SDK's default)
DEFAULT_SERVER = "https://api.openai.com/v1"

VALUES = ("masked", "schema-only")
#: what ``%shiro /policy`` says ``values: schema-only`` does
SCHEMA_ONLY_SAID = "tool outputs are shown to you and not sent; the model reads names, kinds and shapes"
KEYS = ("servers", "models", "approval", "budget_usd", "redact", "values", "private")


@dataclass(frozen=True)
class Policy:
    """One policy file as read. ``None``: the file does not limit that setting."""

    path: Path
    servers: tuple[str, ...] | None = None
    models: tuple[str, ...] | None = None
    approval: str | None = None
    budget_usd: float | None = None
    redact: tuple[str, ...] = ()
    values: str | None = None
    private: tuple[str, ...] = ()

    def allows_server(self, base_url: str | None) -> bool:
        if self.servers is None:
            return True
        url = _normal(base_url or DEFAULT_SERVER)
        return any(url == s or url.startswith(s + "/") for s in self.servers)

    def allows_model(self, model: str) -> bool:
        return self.models is None or any(fnmatch.fnmatchcase(model, m) for m in self.models)

    def allows_approval(self, approval: str) -> bool:
        return self.approval is None or APPROVALS.index(approval) <= APPROVALS.index(self.approval)

    def allows_budget(self, budget: float | None) -> bool:
        return self.budget_usd is None or (budget is not None and budget <= self.budget_usd)

    def describe(self) -> list[str]:
        """The lines ``%shiro /policy`` shows for this file."""
        lines = [f"{self.path}" + ("" if _locked(self.path) else " (you can write this file: it is no ceiling)")]
        if self.servers is not None:
            lines.append(f"  servers: {', '.join(self.servers) or 'none'}")
        if self.models is not None:
            lines.append(f"  models: {', '.join(self.models) or 'none'}")
        if self.approval is not None:
            lines.append(f"  approval: at most {self.approval!r}")
        if self.budget_usd is not None:
            lines.append(f"  budget: at most ${self.budget_usd:.2f}")
        if self.redact:
            lines.append(f"  always redacted: {', '.join(self.redact)}")
        if self.values is not None:
            lines.append(
                f"  values: {self.values}" + (f" ({SCHEMA_ONLY_SAID})" if self.values == "schema-only" else "")
            )
        if self.private:
            lines.append(f"  private: {', '.join(self.private)}")
        return lines


def _normal(url: str) -> str:
    """A base URL compared by scheme, host and port (case-insensitive) and path (no trailing slash)."""
    parts = urlsplit(url.strip())
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


def _locked(path: Path) -> bool:
    """Whether this process cannot write the file (nor replace it in its folder)."""
    return not os.access(path, os.W_OK) and not os.access(path.parent, os.W_OK)


def paths(environ: Mapping[str, str] | None = None) -> list[Path]:
    """The policy files that apply now: each of :data:`SYSTEM_PATHS` that exists, then ``$SHIRO_POLICY``'s."""
    env = os.environ if environ is None else environ
    found = [p for p in SYSTEM_PATHS if p.exists()]
    named = (env.get("SHIRO_POLICY") or "").strip()
    if named:
        path = Path(named).expanduser()
        if not path.exists():  # named but missing: a limit the administrator meant is not silently dropped
            raise PolicyError(
                f"the policy SHIRO_POLICY names, {path}, does not exist; no request is sent until it does"
            )
        if path not in found:
            found.append(path)
    return found


_cache_lock = threading.Lock()
_cache: dict[Path, tuple[tuple[int, int], Policy]] = {}


def policies(environ: Mapping[str, str] | None = None) -> tuple[Policy, ...]:
    """Every policy that applies (none: ``()``). Raises :class:`PolicyError` for one that cannot be applied."""
    return tuple(_read(path) for path in paths(environ))


def _read(path: Path) -> Policy:
    try:
        st = path.stat()
        with _cache_lock:
            hit = _cache.get(path)
        if hit is not None and hit[0] == (st.st_mtime_ns, st.st_size):
            return hit[1]
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"the policy at {path} cannot be read ({exc.strerror or exc}); no request is sent") from None
    policy = parse(text, path)
    with _cache_lock:
        _cache[path] = ((st.st_mtime_ns, st.st_size), policy)
    return policy


def parse(text: str, path: Path) -> Policy:
    """A policy from its file's text. Raises :class:`PolicyError` naming the file and what is wrong."""
    import yaml

    def bad(what: str) -> PolicyError:
        return PolicyError(f"the policy at {path} is not valid ({what}); no request is sent until it is fixed")

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise bad(f"not YAML: {str(exc).splitlines()[0]}") from None
    data = {} if data is None else data
    if not isinstance(data, dict):
        raise bad(f"a mapping of settings is expected, not {type(data).__name__}")
    unknown = sorted(str(k) for k in data if k not in KEYS)
    if unknown:
        raise bad(f"unknown key {unknown[0]!r}; known: {', '.join(KEYS)}")
    servers = _strings(data, "servers", bad)
    for server in servers or ():
        if urlsplit(server).scheme not in ("http", "https") or not urlsplit(server).netloc:
            raise bad(f"servers: {server!r} is not an http(s) URL")
    approval = data.get("approval")
    if approval is not None and approval not in APPROVALS:
        raise bad(f"approval: {approval!r} is not one of {', '.join(APPROVALS)}")
    budget = data.get("budget_usd")
    if budget is not None and (
        isinstance(budget, bool) or not isinstance(budget, (int, float)) or not math.isfinite(budget) or budget < 0
    ):
        raise bad(f"budget_usd: {budget!r} is not an amount of dollars")
    values = data.get("values")
    if values is not None and values not in VALUES:
        raise bad(f"values: {values!r} is not one of {', '.join(VALUES)}")
    redact = _strings(data, "redact", bad) or ()
    import re

    for pattern in redact:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise bad(f"redact: {pattern!r} is not a regular expression ({exc})") from None
    from .private.names import check as private_name

    private = _strings(data, "private", bad) or ()
    for name in private:
        try:
            private_name(name)
        except ValueError as exc:
            raise bad(f"private: {exc}") from None
    return Policy(
        path=path,
        servers=tuple(_normal(s) for s in servers) if servers is not None else None,
        models=_strings(data, "models", bad),
        approval=approval,
        budget_usd=None if budget is None else float(budget),
        redact=redact,
        values=values,
        private=private,
    )


def _strings(data: Mapping[str, Any], key: str, bad: Any) -> tuple[str, ...] | None:
    value = data.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise bad(f"{key}: a list of strings is expected")
    return tuple(v.strip() for v in value)


# -- what the settings may be --------------------------------------------------------------------------------
def refusal(setting: str, value: Any, found: Iterable[Policy] | None = None) -> str | None:
    """The one sentence refusing ``Shiro.SETTING = value`` under the first policy it goes beyond, or None."""
    for p in policies() if found is None else found:
        if setting == "base_url" and not p.allows_server(value):
            return _sentence(setting, value, p, f"allows only the servers {', '.join(p.servers or ()) or '(none)'}")
        if setting == "model" and not p.allows_model(str(value)):
            return _sentence(setting, value, p, f"allows only the models {', '.join(p.models or ()) or '(none)'}")
        if setting == "approval" and not p.allows_approval(str(value)):
            return _sentence(setting, value, p, f"allows at most {p.approval!r}")
        if setting == "budget_usd" and not p.allows_budget(value):
            return _sentence(setting, value, p, f"sets a budget of at most ${p.budget_usd:.2f}")
    return None


def _sentence(setting: str, value: Any, p: Policy, rule: str) -> str:
    shown = "no budget" if setting == "budget_usd" and value is None else repr(value)
    shown = "the default server (" + DEFAULT_SERVER + ")" if setting == "base_url" and not value else shown
    return f"Shiro.{setting} = {shown} is refused: the policy at {p.path} {rule}."


def approval_default(found: Iterable[Policy] | None = None) -> str:
    """``Shiro.approval``'s default: 'ask', or less where a policy allows less."""
    allowed = [APPROVALS.index(p.approval) for p in (policies() if found is None else found) if p.approval]
    return APPROVALS[min([APPROVALS.index("ask"), *allowed])]


def budget_default(found: Iterable[Policy] | None = None) -> float | None:
    """``Shiro.budget_usd``'s default: none, or the lowest ceiling a policy sets."""
    budgets = [p.budget_usd for p in (policies() if found is None else found) if p.budget_usd is not None]
    return min(budgets) if budgets else None


def check(settings: Mapping[str, Any]) -> tuple[Policy, ...]:
    """Before a turn sends anything: the policies that apply, with each of ``settings`` (the effective
    ``base_url``, ``model``, ``approval``, ``budget_usd``) within them. Raises :class:`PolicyError` otherwise."""
    found = policies()
    for setting, value in settings.items():
        if (why := refusal(setting, value, found)) is not None:
            raise PolicyError(why)
    return found


def values_of(found: Iterable[Policy]) -> str:
    """What of the data may leave: "schema-only" when any policy says so, else "masked"."""
    return "schema-only" if any(p.values == "schema-only" for p in found) else "masked"


def redact_floor(found: Iterable[Policy]) -> tuple[str, ...]:
    """The patterns every policy redacts, whatever ``Shiro.redact`` says (first seen, first)."""
    return tuple(dict.fromkeys(pattern for p in found for pattern in p.redact))


def describe() -> str:
    """``%shiro /policy``: each file that applies and what it pins, or where a policy would be looked for."""
    try:
        found = policies()
    except PolicyError as exc:
        return str(exc)
    if not found:
        looked = ", ".join(str(p) for p in SYSTEM_PATHS)
        return f"no policy: none at {looked}, and SHIRO_POLICY is not set"
    return "\n".join(line for p in found for line in p.describe())
