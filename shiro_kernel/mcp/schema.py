"""MCP tool names and input schemas made acceptable to OpenAI function tools (Responses and Chat).

Names: ``mcp__<server>__<tool>``, characters outside ``[A-Za-z0-9_-]`` replaced by ``_``. A name longer
than 64 characters, or one that would clash with another after that replacement, is cut and given a
deterministic 8-hex suffix (a hash of the original server and tool names): the same server always yields
the same names, and no two tools share one.

Schemas: :func:`openai_schema` returns ``(parameters, strict)``.

* Always (both APIs reject these with a 400 whatever ``strict`` says): the top level is
  ``{"type": "object", "properties": {...}}`` with no ``anyOf``/``oneOf``/``allOf``/``enum``/``not``;
  every object node has ``properties``; every array node has ``items``; every node has a ``type``
  (inferred like Codex does) unless it is an ``anyOf``; local ``$ref`` are inlined (recursion is cut);
  only keywords both APIs accept are kept (``default`` moves into the description); descriptions longer
  than 1,024 characters are cut (the Chat API's limit for a function description).
* ``strict`` is True only when the whole schema fits structured-outputs rules: objects closed
  (``additionalProperties`` false or absent, never a free-form map), every property required (optional
  ones become nullable), at most 10 levels and 5,000 properties. The strict schema then has top-level
  ``additionalProperties: false`` and every property required, and a non-strict one never has both, so
  ``wire._strict_ok`` (which looks at the top level only) agrees with the flag.
* :func:`clean_arguments` undoes the nullable trick before a call: a ``null`` the model sent for a
  property the server had as optional is dropped, so the server sees the call it expects.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
from collections.abc import Iterable
from typing import Any

MAX_NAME = 64
MAX_DESCRIPTION = 1024
_STRICT_MAX_DEPTH = 10
_STRICT_MAX_PROPERTIES = 5000
_TYPES = ("string", "number", "integer", "boolean", "object", "array", "null")
#: formats structured outputs accepts; any other (e.g. "uri") is a 400 in strict mode, so it is dropped
_FORMATS = ("date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid")
#: validation keywords kept as they are (both APIs accept them, strict included)
_KEEP = ("pattern", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "minItems", "maxItems")
_BAD_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")


# -- names ----------------------------------------------------------------------------------------
def tool_names(server: str, tools: Iterable[str], taken: Iterable[str] = ()) -> dict[str, str]:
    """Map each of ``server``'s tool names to its model-facing name (unique, ≤ 64 chars, API charset)."""
    used = set(taken)
    originals = list(dict.fromkeys(tools))
    bases = {t: "mcp__" + _BAD_NAME_CHARS.sub("_", server) + "__" + _BAD_NAME_CHARS.sub("_", t) for t in originals}
    counts: dict[str, int] = {}
    for base in bases.values():
        counts[base] = counts.get(base, 0) + 1
    out: dict[str, str] = {}
    for tool in originals:
        base = bases[tool]
        if len(base) <= MAX_NAME and counts[base] == 1 and base not in used:
            name = base
        else:
            name = _hashed(base, server, tool, used)
        used.add(name)
        out[tool] = name
    return out


def _hashed(base: str, server: str, tool: str, used: set[str]) -> str:
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()
    for size in (8, 12, 16, 24):  # longer only in the (astronomically unlikely) case of a clash
        name = f"{base[: MAX_NAME - size - 1]}_{digest[:size]}"
        if name not in used:
            return name
    raise ValueError(f"cannot name tool {tool!r} of server {server!r} uniquely")


def cut_description(text: str, limit: int = MAX_DESCRIPTION) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


# -- schemas --------------------------------------------------------------------------------------
def openai_schema(raw: Any) -> tuple[dict[str, Any], bool]:
    """``(parameters, strict)`` for an MCP tool's ``inputSchema``; never raises."""
    loose = normalize_schema(raw)
    strict = _strictify(loose)
    if strict is not None:
        return strict, True
    if loose.get("additionalProperties") is False and set(loose.get("required", [])) == set(loose["properties"]):
        # keep wire._strict_ok from marking a schema strict that is not strict-able deeper down
        del loose["additionalProperties"]
    return loose, False


def clean_arguments(args: dict[str, Any], loose_schema: dict[str, Any]) -> dict[str, Any]:
    """Drop ``None`` values the model sent for properties the server did not require (strict nullable trick)."""
    return _clean(args, loose_schema)  # type: ignore[no-any-return]


def _clean(value: Any, schema: dict[str, Any]) -> Any:
    if isinstance(value, dict) and isinstance(schema.get("properties"), dict):
        props: dict[str, Any] = schema["properties"]
        required = set(schema.get("required", []))
        out: dict[str, Any] = {}
        for key, item in value.items():
            sub = props.get(key)
            if item is None and key not in required and not _allows_null(sub):
                continue
            out[key] = _clean(item, sub) if isinstance(sub, dict) else item
        return out
    if isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [_clean(item, schema["items"]) for item in value]
    return value


def _allows_null(schema: Any) -> bool:
    if not isinstance(schema, dict):
        return True
    kind = schema.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if None in schema.get("enum", [1]):
        return True
    return any(_allows_null(s) for s in schema.get("anyOf", []))


def normalize_schema(raw: Any) -> dict[str, Any]:
    """The schema with the always-needed fixes (see the module docstring), not made strict."""
    try:
        return _normalize_root(raw if isinstance(raw, dict) else {})
    except RecursionError:  # a pathological schema: the tool is still offered, taking any object
        return {"type": "object", "properties": {}}


def _normalize_root(raw: dict[str, Any]) -> dict[str, Any]:
    defs: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        if isinstance(raw.get(key), dict):
            defs.update({f"#/{key}/{k}": v for k, v in raw[key].items()})
    root = dict(raw)
    if "$ref" in root:
        root = {**_resolve(root["$ref"], defs, {}), **{k: v for k, v in root.items() if k != "$ref"}}
    variants = root.get("anyOf") or root.get("oneOf") or []
    if variants and not root.get("properties"):
        # a top-level union is a 400: offer the union of the variants' properties, none required
        merged: dict[str, Any] = {}
        for variant in variants:
            if isinstance(variant, dict):
                variant = _resolve(variant["$ref"], defs, {}) if "$ref" in variant else variant
                merged.update(variant.get("properties") or {})
        root = {"type": "object", "properties": merged, "description": root.get("description")}
    node = _normalize(root, defs, {}, top=True)
    node["type"] = "object"
    node.setdefault("properties", {})
    for key in ("anyOf", "enum", "nullable"):
        node.pop(key, None)
    return node


def _resolve(ref: Any, defs: dict[str, Any], seen: dict[str, int]) -> dict[str, Any]:
    target = defs.get(ref) if isinstance(ref, str) else None
    if not isinstance(target, dict) or seen.get(ref, 0) >= 2:
        # unknown or recursive beyond two levels: an open object the model can fill as it sees fit
        return {"type": "object", "description": f"(schema {ref} not expanded)"}
    return target


def _normalize(node: Any, defs: dict[str, Any], seen: dict[str, int], top: bool = False) -> dict[str, Any]:
    if not isinstance(node, dict):  # boolean schemas (true/false) and junk: accept a string, like Codex
        return {"type": "string"}
    if "$ref" in node:
        ref = node["$ref"]
        inner = _resolve(ref, defs, seen)
        merged = {**inner, **{k: v for k, v in node.items() if k != "$ref"}}
        return _normalize(merged, defs, {**seen, str(ref): seen.get(str(ref), 0) + 1}, top)
    if "allOf" in node and isinstance(node["allOf"], list):
        node = _merge_all_of(node, defs, seen)
    out: dict[str, Any] = {}
    description = node.get("description") if isinstance(node.get("description"), str) else None
    if "default" in node and not top:
        shown = json.dumps(node["default"], ensure_ascii=False, default=str)
        description = f"{description} (default: {shown})" if description else f"Default: {shown}."
    if description:
        out["description"] = cut_description(description)
    variants = node.get("anyOf") if isinstance(node.get("anyOf"), list) else node.get("oneOf")
    if isinstance(variants, list) and variants and not top:
        out["anyOf"] = [_normalize(v, defs, seen) for v in variants]
        return out
    enum = node.get("enum") if isinstance(node.get("enum"), list) else None
    if "const" in node:
        enum = [node["const"]]
    types = _types(node, enum)
    out["type"] = types[0] if len(types) == 1 else types
    if enum is not None:
        out["enum"] = enum
    if node.get("format") in _FORMATS:
        out["format"] = node["format"]
    for key in _KEEP:
        if isinstance(node.get(key), (int, float, str)) and not isinstance(node.get(key), bool):
            out[key] = node[key]
    if "object" in types:
        props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        out["properties"] = {str(k): _normalize(v, defs, seen) for k, v in props.items()}
        required = node.get("required") if isinstance(node.get("required"), list) else []
        out["required"] = [r for r in dict.fromkeys(required) if r in out["properties"]]
        extra = node.get("additionalProperties")
        if extra is False or extra is True:
            out["additionalProperties"] = extra
        elif isinstance(extra, dict):
            out["additionalProperties"] = _normalize(extra, defs, seen)
        if not out["required"]:
            del out["required"]
    if "array" in types:
        items = node.get("items")
        if isinstance(items, list):  # tuple form: keep the first item's shape
            items = items[0] if items else None
        out["items"] = _normalize(items, defs, seen) if isinstance(items, dict) else {"type": "string"}
    return out


def _merge_all_of(node: dict[str, Any], defs: dict[str, Any], seen: dict[str, int]) -> dict[str, Any]:
    """``allOf`` is refused by OpenAI: fold its parts into one node (properties and required united)."""
    merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
    for part in node["allOf"]:
        if not isinstance(part, dict):
            continue
        if "$ref" in part:
            part = {**_resolve(part["$ref"], defs, seen), **{k: v for k, v in part.items() if k != "$ref"}}
        for key, value in part.items():
            if key == "properties" and isinstance(value, dict):
                merged["properties"] = {**(merged.get("properties") or {}), **value}
            elif key == "required" and isinstance(value, list):
                merged["required"] = [*(merged.get("required") or []), *value]
            else:
                merged.setdefault(key, value)
    return merged


def _types(node: dict[str, Any], enum: list[Any] | None) -> list[str]:
    raw = node.get("type")
    found = [raw] if isinstance(raw, str) else [t for t in raw if isinstance(t, str)] if isinstance(raw, list) else []
    types = [t for t in dict.fromkeys(found) if t in _TYPES]
    if node.get("nullable") is True and "null" not in types and types:
        types.append("null")  # OpenAPI 3.0 style
    if types:
        return types
    if any(k in node for k in ("properties", "required", "additionalProperties")):
        return ["object"]
    if "items" in node:
        return ["array"]
    if enum:
        kinds = {type(v) for v in enum if v is not None}
        if kinds and kinds <= {int}:
            return ["integer"]
        if kinds and kinds <= {int, float}:
            return ["number"]
        if kinds == {bool}:
            return ["boolean"]
        return ["string"]
    if any(k in node for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf")):
        return ["number"]
    return ["string"]


# -- strict ---------------------------------------------------------------------------------------
def _strictify(loose: dict[str, Any]) -> dict[str, Any] | None:
    node = copy.deepcopy(loose)
    counter = [0]
    if not _strict_node(node, 0, counter, top=True) or counter[0] > _STRICT_MAX_PROPERTIES:
        return None
    return node


def _strict_node(node: dict[str, Any], depth: int, counter: list[int], top: bool = False) -> bool:
    if depth > _STRICT_MAX_DEPTH:
        return False
    if "anyOf" in node:
        return all(_strict_node(v, depth + 1, counter) for v in node["anyOf"])
    types = node["type"] if isinstance(node["type"], list) else [node["type"]]
    if "object" in types:
        extra = node.get("additionalProperties")
        if extra not in (None, False):
            return False  # a map with free keys cannot be closed without changing its meaning
        props: dict[str, Any] = node["properties"]
        if not props and not top and extra is None:
            return False  # an open object with no declared properties: a free-form value
        counter[0] += len(props)
        required = set(node.get("required", []))
        for key, sub in props.items():
            if not _strict_node(sub, depth + 1, counter):
                return False
            if key not in required:
                _make_nullable(sub)
        node["required"] = list(props)
        node["additionalProperties"] = False
    return "array" not in types or _strict_node(node["items"], depth + 1, counter)


def _make_nullable(node: dict[str, Any]) -> None:
    if _allows_null(node):
        return
    if "anyOf" in node:
        node["anyOf"].append({"type": "null"})
        return
    kind = node["type"]
    node["type"] = [*kind, "null"] if isinstance(kind, list) else [kind, "null"]
    if "enum" in node:
        node["enum"] = [*node["enum"], None]
