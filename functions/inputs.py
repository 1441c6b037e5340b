"""Request bodies as JSON, or a 400 naming where they are not.

Python's ``json`` reads more than JSON and fails on some of it with errors that are not
``JSONDecodeError``: NaN and Infinity (not JSON numbers, RFC 8259 section 6), integers too
long for ``int()`` (over 4,300 digits: ValueError), bytes that are not UTF-8 (RFC 8259
section 8.1 requires UTF-8), nesting deeper than the interpreter's recursion limit
(RecursionError), and lone surrogates from escapes such as ``"\\ud800"``, which are not
Unicode text and cannot be written back out as UTF-8. A key given twice in one object
(``json`` keeps the last, silently: RFC 8259 section 4 leaves it to the reader) is refused
too, naming it. Each becomes a field error here, so no body can reach the service or the
database in a shape they cannot handle. Bodies are read with a size cap (``read_body``):
a larger one is 413 before a byte of it is parsed.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import Query

from core.errors import FieldError, ValidationFailed
from core.ports import CONTINUATION_PATTERN

MAX_DEPTH = 64  # the deepest contract (a result with fio's own JSON) nests about 8 levels
MAX_ERRORS = 20
# Integers a double can hold (what Cosmos DB and JavaScript read numbers into); longer
# digit strings are refused before int() is asked to convert them.
_MAX_DOUBLE = sys.float_info.max
_MAX_INT_DIGITS = len(str(int(_MAX_DOUBLE)))
_SURROGATE = re.compile("[\ud800-\udfff]")


MAX_BODY_BYTES = 1 << 20  # a run request is a few KiB; the docs, "Limits"


class _Duplicate:
    """Stands in, while parsing, for the value of a key given more than once."""


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        out[key] = _Duplicate() if key in out else value
    return out


class _NotANumber:
    """Stands in, while parsing, for a number JSON or a double cannot carry."""

    def __init__(self, why: str) -> None:
        self.why = why


def _int(text: str) -> int | _NotANumber:
    digits = len(text.lstrip("-"))
    if digits > _MAX_INT_DIGITS:
        return _NotANumber(f"an integer of {digits:,} digits is out of range (at most ±1.8e308)")
    return int(text)


def _constant(name: str) -> _NotANumber:
    return _NotANumber(f"{name} is not a JSON number")


def shown(key: str) -> str:
    """A key as it can be shown in an error: escaped, and short."""
    text = key.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if len(text) <= 64 else text[:61] + "..."


def _dotted(path: tuple[str | int, ...]) -> str:
    return ".".join(shown(p) if isinstance(p, str) else str(p) for p in path) or "(body)"


def _scalar_problem(value: Any) -> str | None:
    kind = type(value)
    if kind is str:
        return "has a lone surrogate escape: not Unicode text" if _SURROGATE.search(value) else None
    if kind is float:
        return None if math.isfinite(value) else "is out of range (at most ±1.8e308)"
    if kind is int:
        return "is out of range (at most ±1.8e308)" if abs(value) > _MAX_DOUBLE else None
    if kind is _NotANumber:
        return str(value.why)
    if kind is _Duplicate:
        return "given more than once in its object (duplicate key)"
    return None


def _problems(doc: Any) -> Iterator[FieldError]:
    """Walks the document without recursion (it may be deep) and yields what is wrong.
    Paths are built for containers only: a result's fio JSON has ~10^5 leaves."""
    if (problem := _scalar_problem(doc)) is not None:
        yield FieldError("(body)", problem)
    stack: list[tuple[Any, tuple[str | int, ...]]] = [(doc, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            entries: Any = node.items()
        elif isinstance(node, list):
            entries = enumerate(node)
        else:
            continue
        if len(path) >= MAX_DEPTH:
            yield FieldError(_dotted(path[:1]), f"nested deeper than {MAX_DEPTH} levels")
            continue
        for key, value in entries:
            if type(key) is str and _SURROGATE.search(key):
                yield FieldError(_dotted((*path, key)), "key has a lone surrogate escape")
            if isinstance(value, dict | list):
                stack.append((value, (*path, key)))
            elif (problem := _scalar_problem(value)) is not None:
                yield FieldError(_dotted((*path, key)), problem)


def parse_json(raw: bytes) -> Any:
    """The body as JSON (an empty body reads as null); ValidationFailed otherwise."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        where = f"byte 0x{raw[e.start]:02x} at offset {e.start}"
        raise ValidationFailed([FieldError("(body)", f"not UTF-8 text: {where}")]) from None
    try:
        try:
            doc = json.loads(text or "null", parse_constant=_constant, object_pairs_hook=_pairs)
        except ValueError as e:
            if isinstance(e, json.JSONDecodeError):
                raise
            # int() refuses digit strings over 4,300 long: parse again to say where.
            doc = json.loads(
                text, parse_constant=_constant, parse_int=_int, object_pairs_hook=_pairs
            )
    except json.JSONDecodeError as e:
        raise ValidationFailed(
            [FieldError("(body)", f"not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})")]
        ) from None
    except RecursionError:
        message = f"nested deeper than {MAX_DEPTH} levels"
        raise ValidationFailed([FieldError("(body)", message)]) from None
    errors = []
    for error in _problems(doc):
        errors.append(error)
        if len(errors) == MAX_ERRORS:
            break
    if errors:
        raise ValidationFailed(sorted(errors, key=lambda e: e.field))
    return doc


# A listing's page token, as every paged listing takes it (GET /api/runs, the admin export).
Continuation = Annotated[
    str | None,
    Query(
        max_length=16384,
        pattern=CONTINUATION_PATTERN,
        description="the token the previous page gave (404 for one it did not)",
    ),
]
