"""MCP tool names (≤ 64 chars, unique, deterministic) and input schemas made acceptable to OpenAI."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from openai_rules import problems, strict_ok

from shiro_kernel.mcp.schema import (
    MAX_NAME,
    clean_arguments,
    cut_description,
    normalize_schema,
    openai_schema,
    tool_names,
)

sys.path.insert(0, str(Path(__file__).parent / "mcp_servers"))
from sdk_server import ODD_SCHEMA


def test_simple_names() -> None:
    assert tool_names("time", ["get_current_time", "convert_time"]) == {
        "get_current_time": "mcp__time__get_current_time",
        "convert_time": "mcp__time__convert_time",
    }


def test_long_names_cut_to_64_unique_and_deterministic() -> None:
    server = "a-server-with-a-rather-long-name"
    tools = [f"{'x' * 40}_{i}" for i in range(50)] + ["short"]
    names = tool_names(server, tools)
    assert all(len(n) <= MAX_NAME for n in names.values())
    assert len(set(names.values())) == len(tools)
    assert names["short"] == f"mcp__{server}__short"
    assert names == tool_names(server, list(reversed(tools)))  # independent of order
    assert names[tools[0]].startswith(f"mcp__{server}__xxxx")


def test_bad_characters_and_collisions() -> None:
    names = tool_names("my.server", ["read.file", "read_file", "read file", "ok-name"])
    assert len(set(names.values())) == 4
    assert all(n.replace("_", "").replace("-", "").isalnum() for n in names.values())
    assert names["ok-name"] == "mcp__my_server__ok-name"
    # names already taken by an earlier server are avoided too
    first = tool_names("a.b", ["t"])
    second = tool_names("a_b", ["t"], taken=first.values())
    assert first["t"] != second["t"]


def test_description_cut() -> None:
    text = cut_description("word " * 400)
    assert len(text) <= 1024 and text.endswith("…")
    assert cut_description("  short  ") == "short"


def check(params: dict[str, Any], strict: bool) -> None:
    found = problems("mcp__s__t", "d", params, strict)
    assert not found, found


@pytest.mark.parametrize(
    "raw",
    [
        {},
        {"type": "object"},
        None,
        {"type": "object", "properties": {}},
        {"properties": {"a": {"type": "string"}}},
        {"type": "object", "properties": {"n": {"type": "integer", "minimum": 0}}, "required": ["n"]},
        {"type": "object", "properties": {"xs": {"type": "array"}}},
        {"type": "object", "properties": {"m": {"type": "object"}}},
        {"type": "object", "properties": {"m": {"type": "object", "additionalProperties": {"type": "number"}}}},
        {
            "anyOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}},
                {"type": "object", "properties": {"b": {"type": "integer"}}},
            ]
        },
        {"type": "object", "properties": {"c": {"const": 3}, "e": {"enum": ["x", "y"]}, "t": True, "f": False}},
        ODD_SCHEMA,
        {"$ref": "#/$defs/Root", "$defs": {"Root": {"type": "object", "properties": {"a": {"type": "string"}}}}},
        {
            "type": "object",
            "$defs": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "value": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/Node"}},
                    },
                }
            },
            "properties": {"tree": {"$ref": "#/$defs/Node"}},
        },
        {"type": "object", "properties": {"x": {"type": ["string", "integer"], "nullable": True}}},
        {
            "type": "object",
            "properties": {"u": {"type": "string", "format": "uri"}, "d": {"type": "string", "format": "date-time"}},
        },
        {"type": "object", "properties": {"q": {"type": "array", "items": [{"type": "string"}, {"type": "number"}]}}},
        {
            "type": "object",
            "properties": {
                "deep": {
                    "type": "object",
                    "properties": {
                        "a": {
                            "type": "object",
                            "properties": {"b": {"type": "object", "properties": {"c": {"type": "string"}}}},
                        }
                    },
                }
            },
        },
        {
            "type": "object",
            "not": {"required": ["x"]},
            "if": {},
            "then": {},
            "patternProperties": {"^x": {}},
            "properties": {"s": {"type": "string", "minLength": 1, "maxLength": 5, "examples": ["a"]}},
        },
    ],
)
def test_schemas_meet_openai_rules(raw: Any) -> None:
    params, strict = openai_schema(raw)
    check(params, strict)
    assert strict_ok(params) == strict  # the agent's wire layer marks strict from the top level only


def test_strict_when_possible_optional_becomes_nullable() -> None:
    params, strict = openai_schema(
        {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "punctuation": {"type": "string"},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "opt": {"anyOf": [{"type": "integer"}, {"type": "boolean"}]},
            },
            "required": ["name"],
        }
    )
    assert strict
    props = params["properties"]
    assert props["name"] == {"type": "string"}
    assert props["punctuation"] == {"type": ["string", "null"]}
    assert props["mode"] == {"type": ["string", "null"], "enum": ["a", "b", None]}
    assert {"type": "null"} in props["opt"]["anyOf"]
    assert params["required"] == ["name", "punctuation", "mode", "opt"] and params["additionalProperties"] is False


def test_free_form_object_is_not_strict_and_not_marked_strict() -> None:
    raw = {
        "type": "object",
        "properties": {"meta": {"type": "object"}, "a": {"type": "string"}},
        "required": ["meta", "a"],
        "additionalProperties": False,
    }
    params, strict = openai_schema(raw)
    assert not strict and not strict_ok(params)
    assert params["properties"]["meta"] == {"type": "object", "properties": {}}


def test_no_arguments_is_strict() -> None:
    params, strict = openai_schema({"type": "object"})
    assert strict and params == {"type": "object", "properties": {}, "required": [], "additionalProperties": False}


def test_default_and_description_kept_for_the_model() -> None:
    params, _ = openai_schema(
        {
            "type": "object",
            "properties": {
                "n": {"type": "integer", "description": "How many.", "default": 5},
                "m": {"type": "integer", "default": 1},
            },
        }
    )
    assert params["properties"]["n"]["description"] == "How many. (default: 5)"
    assert params["properties"]["m"]["description"] == "Default: 1."


def test_odd_schema_details() -> None:
    loose = normalize_schema(ODD_SCHEMA)
    props = loose["properties"]
    assert props["where"]["properties"].keys() == {"x", "y"} and props["where"]["description"] == "a point"
    assert props["tags"]["items"] == {"type": "string"}
    assert props["mode"] == {"anyOf": [{"type": "string", "enum": ["fast"]}, {"type": "string", "enum": ["slow"]}]}
    assert props["both"]["properties"].keys() == {"a", "b"} and props["both"]["required"] == ["b"]
    assert "format" not in props["url"]
    assert props["maybe"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}


def test_clean_arguments_drops_nulls_the_server_did_not_allow() -> None:
    raw = {
        "type": "object",
        "properties": {
            "a": {"type": "string"},
            "b": {"type": "string"},
            "c": {"type": ["string", "null"]},
            "inner": {
                "type": "object",
                "properties": {"x": {"type": "integer"}, "y": {"type": "integer"}},
                "required": ["x"],
            },
            "items": {"type": "array", "items": {"type": "object", "properties": {"k": {"type": "string"}}}},
        },
        "required": ["a"],
    }
    loose = normalize_schema(raw)
    args = {"a": "1", "b": None, "c": None, "inner": {"x": 1, "y": None}, "items": [{"k": None}, {"k": "v"}]}
    assert clean_arguments(args, loose) == {"a": "1", "c": None, "inner": {"x": 1}, "items": [{}, {"k": "v"}]}
