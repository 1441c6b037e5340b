"""Helpers of the OpenAPI tests (tests/test_openapi.py): the document's operations and
references, and a checker of real answers against the document."""

from __future__ import annotations

from typing import Any

import httpx
from jsonschema import Draft202012Validator


def operations(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, op) for path, ops in document["paths"].items() for method, op in ops.items()
    ]


def refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "$ref"] + [
            r for v in node.values() for r in refs(v)
        ]
    if isinstance(node, list):
        return [r for v in node for r in refs(v)]
    return []


def resolved(schema: Any, defs: dict[str, Any]) -> Any:
    """``schema`` with every local reference replaced by what it names."""
    if isinstance(schema, dict):
        if "$ref" in schema:
            return resolved(defs[schema["$ref"].rsplit("/", 1)[1]], defs)
        return {k: resolved(v, defs) for k, v in schema.items() if k != "$defs"}
    if isinstance(schema, list):
        return [resolved(v, defs) for v in schema]
    return schema


class Checker:
    """Checks answers against the document: a documented status, JSON, and its schema."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.seen: set[tuple[str, str, int]] = set()

    def __call__(self, r: httpx.Response, template: str) -> Any:
        method = r.request.method.lower()
        answers = self.document["paths"][template][method]["responses"]
        assert str(r.status_code) in answers, (method, template, r.status_code, r.text[:300])
        self.seen.add((method, template, r.status_code))
        if r.status_code == 204:
            assert not r.content
            return None
        if "application/gzip" in answers[str(r.status_code)].get("content", {}):
            assert r.headers["content-type"] == "application/gzip"
            return r.content
        if "text/html" in answers[str(r.status_code)].get("content", {}):
            assert r.headers["content-type"] == "text/html; charset=utf-8"
            assert r.text.startswith("<!DOCTYPE html>")
            return r.text
        assert r.headers["content-type"] == "application/json"
        schema = answers[str(r.status_code)]["content"]["application/json"]["schema"]
        body = r.json()
        validator = Draft202012Validator({**schema, "components": self.document["components"]})
        problems = [
            f"{list(e.absolute_path)}: {e.message[:200]}" for e in validator.iter_errors(body)
        ]
        assert not problems, (method, template, r.status_code, problems[:5])
        return body
