"""Validation of the documents callers send (run requests, schedules, results, imports):
one pass of the pydantic models in strict mode, so what they take is what the JSON Schema
files in ``core/schemas/`` (generated from the same models, read through
importlib.resources so an installed wheel has them) say: a value of the wrong JSON type is
refused, never converted ("yes" is not a boolean, "1" not an integer; 4.0 is the integer 4,
as in JSON Schema: core.models.common.Int).

Every violation is reported with a dotted field path (``workload.bs``), so a caller can fix
them all at once, in the JSON Schema's words: the rule's own message (``x-error``), the
field's description for a pattern, or what the value is not ("'yes' is not of type
'boolean'", "0 is less than the minimum of 1").
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, TypeVar

from pydantic import BaseModel
from pydantic import ValidationError as PydanticError

from core.errors import FieldError, ValidationFailed
from core.models import SCHEMA_MODELS

M = TypeVar("M", bound=BaseModel)
Schema = dict[str, Any]  # a JSON Schema node, as pydantic writes it


def schema_path(name: str) -> Traversable:
    """The published contract's file (writable in a source checkout: ``make schemas``)."""
    return resources.files("core").joinpath("schemas", f"{name}.schema.json")


def generated_schema(name: str) -> dict[str, Any]:
    """The schema as the model defines it today (what ``make schemas`` writes)."""
    schema = SCHEMA_MODELS[name].model_json_schema()
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://benchsvc.example/schemas/{name}.schema.json",
        **schema,
    }


def _dotted(parts: Iterable[Any]) -> str:
    return ".".join(str(p) for p in parts)


def field_errors(errors: Iterable[Mapping[str, Any]], prefix: str = "") -> list[FieldError]:
    """pydantic's (or FastAPI's) error list as field errors: the dotted path of each, and
    its message without pydantic's "Value error, " prefix."""
    out = []
    for e in errors:
        loc = [p for p in e["loc"] if p != "__root__"]
        msg = str(e["msg"]).removeprefix("Value error, ")
        name = _dotted(loc)
        out.append(FieldError(prefix + name if name else prefix.rstrip(".") or "(body)", msg))
    return out


def parse(model: type[M], data: Any) -> M:
    """Build ``model`` from ``data`` (parsed JSON) in strict mode, or raise ValidationFailed
    naming every field. Every door parses what callers send here."""
    try:
        return model.model_validate(data, strict=True)
    except PydanticError as e:
        raise ValidationFailed(contract_errors(model, e.errors())) from None


def contract_errors(
    model: type[BaseModel], errors: Iterable[Mapping[str, Any]]
) -> list[FieldError]:
    """pydantic's errors for ``model`` as field errors worded from its JSON Schema."""
    schema = _schema(model)
    out = []
    for e in errors:
        loc = tuple(e["loc"])
        node = _node(schema, loc[:-2] if loc[-1:] == ("[key]",) else loc)
        if loc[-1:] == ("[key]",):  # a key of a map: named by its map (propertyNames)
            loc, node = loc[:-2], node.get("propertyNames", {})
        out.append(FieldError(_dotted(loc) or "(body)", _message(e, _branches(schema, node))))
    return _dedupe(out)


@cache
def _schema(model: type[BaseModel]) -> Schema:
    return model.model_json_schema()


def _deref(schema: Schema, node: Schema) -> Schema:
    while "$ref" in node:
        target = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node


def _branches(schema: Schema, node: Schema) -> list[Schema]:
    """The node and each of its anyOf branches (a union's members; null's left out)."""
    node = _deref(schema, node)
    return [node, *(_deref(schema, b) for b in node.get("anyOf", ()) if b != {"type": "null"})]


def _node(schema: Schema, loc: tuple[Any, ...]) -> Schema:
    """The schema of the value at ``loc`` (a union's branch that has it), or {}."""
    node: Schema = schema
    for part in loc:
        found = next((c for b in _branches(schema, node) if (c := _child(b, part))), None)
        if found is None:
            return {}
        node = found
    return node


def _child(node: Schema, part: Any) -> Schema | None:
    if isinstance(part, int):
        items = node.get("items")
        return items if isinstance(items, dict) else None
    if part in node.get("properties", {}):
        return dict(node["properties"][part])
    pattern_properties = node.get("patternProperties")
    if pattern_properties:
        return dict(next(iter(pattern_properties.values())))
    extra = node.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


_TYPES = {
    "int_type": "integer",
    "float_type": "number",
    "bool_type": "boolean",
    "string_type": "string",
    "list_type": "array",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
}
# pydantic's error type -> the JSON Schema keywords that hold the broken rule.
_KEYWORDS = {
    "greater_than_equal": ("minimum",),
    "greater_than": ("exclusiveMinimum",),
    "less_than_equal": ("maximum",),
    "less_than": ("exclusiveMaximum",),
    "string_pattern_mismatch": ("pattern",),
    "string_too_short": ("minLength",),
    "string_too_long": ("maxLength",),
    "too_short": ("minItems", "minProperties"),
    "too_long": ("maxItems", "maxProperties"),
    "literal_error": ("enum", "const"),
}


def _shown(value: Any) -> Any:
    """The value as the caller wrote it: a huge whole float (1e300) was made an int of
    hundreds of digits on its way to an integer field (core.models.common.whole)."""
    return float(value) if type(value) is int and abs(value) > 2**53 else value


def _message(e: Mapping[str, Any], branches: list[Schema]) -> str:
    kind, value = e["type"], _shown(e.get("input"))
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field"
    if kind in _TYPES:
        return f"{value!r} is not of type {_TYPES[kind]!r}"
    keywords = _KEYWORDS.get(kind)
    if keywords is None:  # a rule of the model's own (value_error) or a custom error
        return str(e["msg"]).removeprefix("Value error, ")
    node = next((b for b in branches if any(k in b for k in keywords)), branches[0])
    if kind == "string_pattern_mismatch" and "description" in node:
        return f"{value!r} is not valid: {node['description']}"
    if "x-error" in node:
        return str(node["x-error"])
    return _schema_words(kind, value, node, e.get("ctx") or {})


def _schema_words(kind: str, value: Any, node: Schema, ctx: Mapping[str, Any]) -> str:
    """What jsonschema says of the same violation (its messages, which callers know)."""
    # The bound as the document writes it (pydantic's is a float on a float field: 0.0).
    limit = next((node[k] for k in _KEYWORDS[kind] if k in node), None)
    words = {
        "greater_than_equal": f"{value!r} is less than the minimum of {limit!r}",
        "greater_than": f"{value!r} is less than or equal to the minimum of {limit!r}",
        "less_than_equal": f"{value!r} is greater than the maximum of {limit!r}",
        "less_than": f"{value!r} is greater than or equal to the maximum of {limit!r}",
        "string_pattern_mismatch": f"{value!r} does not match {ctx.get('pattern')!r}",
    }
    if kind in words:
        return words[kind]
    if kind == "literal_error":
        if "enum" in node:
            return f"{value!r} is not one of {node['enum']!r}"
        return f"{node.get('const')!r} was expected"
    if kind.endswith("too_short"):
        if ctx.get("min_length") == 1:
            return f"{value!r} should be non-empty"
        return (
            f"{value!r} does not have enough properties"
            if isinstance(value, dict)
            else (f"{value!r} is too short")
        )
    if ctx.get("max_length") == 0:
        return f"{value!r} is expected to be empty"
    return (
        f"{value!r} has too many properties"
        if isinstance(value, dict)
        else (f"{value!r} is too long")
    )


def _dedupe(errors: list[FieldError]) -> list[FieldError]:
    seen: dict[tuple[str, str], FieldError] = {}
    for e in errors:
        seen.setdefault((e.field, e.message), e)
    return sorted(seen.values(), key=lambda e: e.field)
