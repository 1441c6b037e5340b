"""Validation of documents against the JSON Schema files in ``core/schemas/`` (package data,
read through importlib.resources, so an installed wheel has them).

Every violation is reported with a dotted field path (``workload.bs``), so a caller can fix
them all at once. The JSON Schema pass catches type, enum, pattern, range and unknown-key
errors; the pydantic pass adds the cross-field rules (bs <= size, bs a multiple of 512).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from functools import cache
from importlib import resources
from importlib.resources.abc import Traversable
from typing import Any, TypeVar

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError
from pydantic import BaseModel
from pydantic import ValidationError as PydanticError

from core.errors import FieldError, ValidationFailed
from core.models import SCHEMA_MODELS

M = TypeVar("M", bound=BaseModel)


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


@cache
def _validator(name: str) -> Draft202012Validator:
    schema = json.loads(schema_path(name).read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def _dotted(parts: Any) -> str:
    return ".".join(str(p) for p in parts)


def _schema_errors(name: str, doc: Any) -> list[FieldError]:
    return [e for err in _validator(name).iter_errors(doc) for e in _explain(err)]


def _explain(err: SchemaError) -> list[FieldError]:
    """What one schema violation says, named by its field."""
    schema: dict[str, Any] = err.schema if isinstance(err.schema, dict) else {}
    if err.context and "x-error" in schema:  # a rule of several branches, said once
        return [FieldError(_dotted(err.absolute_path) or "(body)", schema["x-error"])]
    if err.context:  # anyOf/oneOf: the branch errors say more than the summary
        return [e for sub in _best_branch(err) for e in _explain(sub)]
    path = list(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        allowed = set(schema.get("properties", {}))
        unknown = sorted(set(err.instance) - allowed)
        return [FieldError(_dotted([*path, key]), "unknown field") for key in unknown]
    if err.validator == "required":
        missing = str(err.message).split("'")[1] if "'" in err.message else ""
        where = _dotted([*path, missing]) if missing else _dotted(path)
        return [FieldError(where, schema.get("x-error", "required field is missing"))]
    return [FieldError(_dotted(path) or "(body)", _message(err, schema))]


def _message(err: SchemaError, schema: dict[str, Any]) -> str:
    """The rule's own words (``x-error``), or what the value is not, from its description."""
    if err.validator in ("pattern", "not") and "description" in schema:
        return f"{err.instance!r} is not valid: {schema['description']}"
    return str(schema.get("x-error", err.message))


def _best_branch(err: SchemaError) -> list[SchemaError]:
    """Of an anyOf/oneOf's failing branches, the one that says what is wrong."""
    # A branch of another type ("not of type 'null'") is noise when a branch of the right
    # type says what is wrong.
    relevant = [
        c
        for c in err.context or ()
        if c.validator != "type" or (isinstance(c.schema, dict) and "x-error" in c.schema)
    ] or list(err.context or ())
    # Of the branches left, the one that got furthest into the document says it (a wrong
    # sweep value, not the other sweep's "unknown field"s).
    branches: dict[Any, list[SchemaError]] = {}
    for c in relevant:
        branches.setdefault(c.relative_schema_path[0], []).append(c)
    return max(branches.values(), key=lambda b: (max(len(c.absolute_path) for c in b), -len(b)))


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
    """Build ``model`` from ``data``, or raise ValidationFailed naming every field."""
    try:
        return model.model_validate(data)
    except PydanticError as e:
        raise ValidationFailed(field_errors(e.errors())) from None


def validate(name: str, doc: Any, model: type[M]) -> M:
    """Check ``doc`` against ``core/schemas/<name>.schema.json`` and build ``model``.

    Raises ValidationFailed listing every violation; never returns a half-valid object.
    """
    errors = _schema_errors(name, doc)
    try:
        model_obj = model.model_validate(doc)
    except PydanticError as exc:
        # Keep the model's own findings (cross-field rules) for fields the schema pass did
        # not already name, so one violation never hides another.
        named = {e.field for e in errors}
        errors += [e for e in field_errors(exc.errors()) if not _overlaps(e.field, named)]
        raise ValidationFailed(_dedupe(errors)) from None
    if errors:
        raise ValidationFailed(_dedupe(errors))
    return model_obj


def _overlaps(field: str, named: set[str]) -> bool:
    return any(field == n or field.startswith(n + ".") or n.startswith(field + ".") for n in named)


def _dedupe(errors: list[FieldError]) -> list[FieldError]:
    seen: dict[tuple[str, str], FieldError] = {}
    for e in errors:
        seen.setdefault((e.field, e.message), e)
    return sorted(seen.values(), key=lambda e: e.field)
