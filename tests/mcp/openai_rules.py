"""OpenAI's function-tool rules that the OpenAPI spec (checked by tests/fakeopenai.py) does not encode,
as the API enforces them with a 400 (``invalid_function_parameters`` / ``string_above_max_length``).

Sources: the API's own error texts, e.g. "object schema missing properties", "array schema missing items",
"schema must have type 'object' and not have 'oneOf'/'anyOf'/'allOf'/'enum'/'not' at the top level",
"'allOf' is not permitted", "'uri' is not a valid format", "schema must have a 'type' key",
"Invalid 'tools[0].function.description': string too long. Expected ... maximum length 1024", and the
structured-outputs limits for strict mode (every object closed and fully required, ≤ 10 levels,
≤ 5,000 properties).
"""

from __future__ import annotations

import re
from typing import Any

NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
ALLOWED = {
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "anyOf",
    "enum",
    "format",
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
}
STRICT_FORMATS = {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}


def strict_ok(schema: dict[str, Any]) -> bool:
    """A copy of ``shiro_kernel.provider.wire._strict_ok`` (the rule the agent uses to mark ``strict``)."""
    props = schema.get("properties", {})
    return schema.get("additionalProperties") is False and set(schema.get("required", [])) == set(props)


def problems(name: str, description: str, params: dict[str, Any], strict: bool) -> list[str]:
    found: list[str] = []
    if not NAME.match(name):
        found.append(f"name {name!r} breaks ^[A-Za-z0-9_-]{{1,64}}$")
    if len(description) > 1024:
        found.append(f"description is {len(description)} characters (max 1024)")
    if params.get("type") != "object":
        found.append("top level is not type object")
    for key in ("oneOf", "anyOf", "allOf", "enum", "not"):
        if key in params:
            found.append(f"top level has {key}")
    if strict != strict_ok(params):
        found.append(f"strict flag {strict} disagrees with the top-level shape ({strict_ok(params)})")
    counter = [0]
    _walk(params, "$", strict, 0, counter, found)
    if strict and counter[0] > 5000:
        found.append("more than 5000 properties in strict mode")
    return found


def _walk(node: Any, path: str, strict: bool, depth: int, counter: list[int], found: list[str]) -> None:
    if not isinstance(node, dict):
        found.append(f"{path}: schema is not an object")
        return
    for key in node:
        if key not in ALLOWED:
            found.append(f"{path}: keyword {key!r} is not accepted")
    if strict and depth > 10:
        found.append(f"{path}: nested deeper than 10 levels")
    if "anyOf" in node:
        for i, sub in enumerate(node["anyOf"]):
            _walk(sub, f"{path}.anyOf[{i}]", strict, depth + 1, counter, found)
        return
    kind = node.get("type")
    kinds = kind if isinstance(kind, list) else [kind] if kind else []
    if not kinds:
        found.append(f"{path}: schema must have a 'type' key")
    if strict and node.get("format") is not None and node["format"] not in STRICT_FORMATS:
        found.append(f"{path}: format {node['format']!r} is not valid in strict mode")
    if "object" in kinds:
        props = node.get("properties")
        if not isinstance(props, dict):
            found.append(f"{path}: object schema missing properties")
            props = {}
        counter[0] += len(props)
        if strict:
            if node.get("additionalProperties") is not False:
                found.append(f"{path}: additionalProperties must be false in strict mode")
            if set(node.get("required", [])) != set(props):
                found.append(f"{path}: every property must be required in strict mode")
        for key, sub in props.items():
            _walk(sub, f"{path}.{key}", strict, depth + 1, counter, found)
        extra = node.get("additionalProperties")
        if isinstance(extra, dict):
            _walk(extra, f"{path}.additionalProperties", strict, depth + 1, counter, found)
    if "array" in kinds:
        if not isinstance(node.get("items"), dict):
            found.append(f"{path}: array schema missing items")
        else:
            _walk(node["items"], f"{path}[]", strict, depth + 1, counter, found)
