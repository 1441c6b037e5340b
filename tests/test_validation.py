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


@pytest.mark.parametrize(
    ("workload", "field", "message"),
    [
        ({"direct": "yes"}, "workload.direct", "'yes' is not of type 'boolean'"),
        ({"direct": 1}, "workload.direct", "1 is not of type 'boolean'"),
        ({"iodepth": "4"}, "workload.iodepth", "'4' is not of type 'integer'"),
        ({"iodepth": True}, "workload.iodepth", "True is not of type 'integer'"),
        ({"iodepth": 4.5}, "workload.iodepth", "4.5 is not of type 'integer'"),
        ({"runtime": 1e300}, "workload.runtime", "1e+300 is greater than the maximum of 86400"),
        ({"steadystate": {"limit_pct": "1"}}, "workload.steadystate.limit_pct", "'1' is not"),
    ],
)
def test_one_strict_pass_refuses_what_lax_pydantic_would_convert(
    workload: dict[str, object], field: str, message: str
) -> None:
    """One pass, pydantic in strict mode (issue 28): what lax pydantic converts ("yes" to
    true, "4" to 4) is refused, in the words the JSON Schema pass gave."""
    errors = errors_of({"target": "scratch", "workload": workload})
    assert list(errors) == [field]
    assert errors[field].startswith(message)


def test_whole_floats_are_integers_as_in_json_schema() -> None:
    """JSON Schema's "integer" takes 4.0, and so did the schema pass: so does the model."""
    r = parse(RunRequest, {"target": "s", "clients": [1.0, 2], "workload": {"iodepth": 4.0}})
    assert r.clients == [1, 2] and r.workload is not None and r.workload.iodepth == 4
    assert type(r.workload.iodepth) is int


@pytest.mark.parametrize(
    ("body", "errors"),
    [
        ({"clients": "x"}, {"clients": "'x' is not of type 'integer'"}),
        ({"clients": []}, {"clients": "a sweep has 1 to 16 steps"}),
        ({"clients": [0]}, {"clients.0": "0 is less than the minimum of 1"}),
        ({"sweep": 5}, {"sweep": "5 is not of type 'object'"}),
        ({"sweep": {"rate_pct": [0]}}, {"sweep.rate_pct.0": "0 is less than the minimum of 1"}),
        ({"sweep": {"field": "bs", "values": [4096]}}, {"sweep.values.0": "a size: 4k"}),
        ({"sweep": {"field": "iodepth", "values": ["4k", 2.0]}}, {"sweep.values.0": "1 to 1024"}),
    ],
)
def test_a_union_is_judged_by_the_member_its_shape_names(
    body: dict[str, object], errors: dict[str, str]
) -> None:
    """clients (a count or a list) and sweep (field, grid or rates) are validated as the one
    their shape names: one error saying what is wrong, not one per member it is not."""
    assert errors_of({"target": "s", **body}) == errors
