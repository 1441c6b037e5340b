"""The request contract: every bad field is named, and core/schemas/ matches the models."""

from __future__ import annotations

import json

import pytest

from core.catalogue import resolve
from core.errors import ValidationFailed
from core.models import SCHEMA_MODELS, RunRequest
from core.validation import generated_schema, parse, schema_path


def errors_of(body: object) -> dict[str, str]:
    with pytest.raises(ValidationFailed) as e:
        parse(RunRequest, body)
    return {x.field: x.message for x in e.value.errors}


def test_every_bad_field_is_named_at_once() -> None:
    body = {
        "target": "/mnt/vdb1",
        "workload": {"rw": "randfoo", "bs": "4x", "iodepth": 0},
        "colour": "blue",
    }
    errors = errors_of(body)
    assert set(errors) == {"target", "workload.rw", "workload.bs", "workload.iodepth", "colour"}
    assert "not a path" in errors["target"]
    assert errors["colour"] == "unknown field"
    assert "randfoo" in errors["workload.rw"]
    assert "minimum of 1" in errors["workload.iodepth"]


@pytest.mark.parametrize(
    ("workload", "field", "fragment"),
    [
        ({"bs": "1000"}, "workload.bs", "multiple of 512"),
        ({"bs": "32m"}, "workload.bs", "between 512 and 16m"),
        ({"size": "512k"}, "workload.size", "between 1m and 16t"),
        ({"bs": "8m", "size": "4m"}, "workload", "bs must not exceed size"),
        ({"runtime": 0}, "workload.runtime", "minimum"),
        ({"numjobs": 1000}, "workload.numjobs", "maximum"),
        ({"rwmixread": 101}, "workload.rwmixread", "maximum"),
        ({"ioengine": "exec"}, "workload.ioengine", "exec"),
        ({"direct": "yes"}, "workload.direct", "boolean"),
        ({"filename": "/etc/passwd"}, "workload.filename", "unknown field"),
    ],
)
def test_bounded_workload_fields(workload: dict[str, object], field: str, fragment: str) -> None:
    errors = errors_of({"target": "scratch", "workload": workload})
    assert field in errors, errors
    assert fragment in errors[field]


def test_missing_target_and_bad_tags() -> None:
    errors = errors_of({"tags": {"bad key!": "x", "ok": "y" * 300}})
    assert errors["targets"] == "give target (one mount alias) or targets (several)"
    assert "tags" in " ".join(errors) and len(errors) == 3


def test_valid_request_gets_defaults() -> None:
    r = parse(RunRequest, {"target": "scratch"})
    w = resolve(None, r.workload)
    assert w.rw == "randread" and w.bs_bytes == 4096 and r.clients == 1


@pytest.mark.parametrize("name", sorted(SCHEMA_MODELS))
def test_schema_files_match_the_models(name: str) -> None:
    """core/schemas/ is the published contract; `make schemas` regenerates it from the models."""
    assert json.loads(schema_path(name).read_text()) == generated_schema(name)
