"""The regression gate's verdict as people and pipelines read it: a table, markdown for a
job summary, and JUnit XML (Azure Pipelines' Publish Test Results, GitHub's test
reporters). The verdict is the service's (``gate`` of GET /api/runs/{id}); nothing here
judges anything."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

from rich.table import Table

from core.analysis.metrics import metric_value

VERDICT_TEXT = {
    "pass": "pass",
    "regression": "REGRESSION",
    "improvement": "improvement",
    "not-enough-history": "not enough history",
}


def figure(metric: str, v: float | None) -> str:
    """A gated metric's figure in its unit: latency in µs below a millisecond (core.latency),
    MiB/s, IOPS with separators."""
    return metric_value(v, metric)


def _pct(v: float | None, sign: bool = True) -> str:
    return "-" if v is None else (f"{v:+.1f} %" if sign else f"{v:.1f} %")


def rows(run: dict[str, Any]) -> list[list[str]]:
    out = []
    for m in (run.get("gate") or {}).get("metrics") or []:
        ref = m["reference"]
        out.append(
            [
                str(m["step"]),
                m["metric"],
                figure(m["metric"], m["value"]),
                f"{figure(m['metric'], ref['median'])} ({ref['points']} runs)",
                _pct(m["change_pct"]),
                _pct(m["band_pct"], sign=False),
                VERDICT_TEXT.get(m["verdict"], m["verdict"]),
            ]
        )
    return out


HEADER = ["step", "metric", "this run", "reference median", "change", "band", "verdict"]


def headline(run: dict[str, Any]) -> str:
    gate = run.get("gate")
    if not gate:
        if run.get("state") == "completed":
            return "gate: no verdict (the run was finalized before the gate existed)"
        return f"gate: no verdict (the run is {run.get('state')})"
    rule = gate["rule"]
    verdict = VERDICT_TEXT.get(gate["verdict"], gate["verdict"])
    return (
        f"gate: {verdict} (a metric fails when it is worse than its reference median by more "
        f"than max({rule['pct']:g} %, {rule['sigmas']:g} sd); {rule['min_points']} reference "
        f"runs needed)"
    )


def gate_table(run: dict[str, Any]) -> Table:
    t = Table(title=headline(run))
    for col in HEADER:
        t.add_column(col, justify="left" if col in ("metric", "verdict") else "right")
    for row in rows(run):
        style = {"REGRESSION": "red", "improvement": "green"}.get(row[-1])
        t.add_row(*row, style=style)
    return t


def failures(run: dict[str, Any]) -> list[str]:
    """One line per failed metric, for stderr (a pipeline log)."""
    out = []
    for m in (run.get("gate") or {}).get("metrics") or []:
        if m["verdict"] == "regression":
            reg = f" [regression {m['regression_id']}]" if m.get("regression_id") else ""
            out.append(f"regression: step {m['step']} {m['metric']}: {m['why']}{reg}")
    return out


def gate_markdown(run: dict[str, Any], md_table: Any) -> list[str]:
    found = rows(run)
    lines = ["", f"**{headline(run)}**"]
    if found:
        lines += ["", *md_table(HEADER, found)]
    return lines


def junit_xml(run: dict[str, Any]) -> str:
    """Each gated metric of each step as a test case: a regression is a failure, not
    enough history is skipped; a run that did not complete is one errored case."""
    gate = run.get("gate") or {}
    name = f"benchsvc gate {run.get('profile') or 'run'} on {run.get('target')}"
    suite = ET.Element("testsuite", name=name, timestamp=str(run.get("created_at") or ""))
    props = ET.SubElement(suite, "properties")
    for key, value in (("run_id", run["id"]), ("state", run["state"]), *gate_rule(gate)):
        ET.SubElement(props, "property", name=key, value=str(value))
    classname = f"benchsvc.{run.get('target')}.{run['id']}"
    counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    if run["state"] != "completed":
        case = ET.SubElement(suite, "testcase", classname=classname, name="run completes")
        ET.SubElement(case, "error", message=f"run {run['id']} is {run['state']}").text = str(
            run.get("error") or ""
        )
        counts["tests"] += 1
        counts["errors"] += 1
    for m in gate.get("metrics") or []:
        case = ET.SubElement(
            suite, "testcase", classname=f"{classname}.s{m['step']}", name=m["metric"]
        )
        counts["tests"] += 1
        if m["verdict"] == "regression":
            ET.SubElement(case, "failure", message=m["why"], type="regression").text = _details(m)
            counts["failures"] += 1
        elif m["verdict"] == "not-enough-history":
            ET.SubElement(case, "skipped", message=m["why"])
            counts["skipped"] += 1
        else:
            ET.SubElement(case, "system-out").text = f"{m['verdict']}: {m['why']}"
    for key, value in counts.items():
        suite.set(key, str(value))
    ET.indent(suite)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suite, encoding="unicode")


def gate_rule(gate: dict[str, Any]) -> list[tuple[str, Any]]:
    rule = gate.get("rule") or {}
    return [(f"gate_{k}", v) for k, v in sorted(rule.items())] + (
        [("gate_verdict", gate["verdict"])] if gate else []
    )


def _details(m: dict[str, Any]) -> str:
    ref = m["reference"]
    lines = [
        f"series {m['series_key']}, step {m['step']}",
        f"this run: {figure(m['metric'], m['value'])}",
        f"reference: median {figure(m['metric'], ref['median'])}, sd "
        f"{figure(m['metric'], ref['sd'])}, {ref['points']} runs "
        f"({ref.get('first_run_id')} .. {ref.get('last_run_id')})",
        f"change {_pct(m['change_pct'])}, band {_pct(m['band_pct'], sign=False)}",
    ]
    if m.get("regression_id"):
        lines.append(f"regression {m['regression_id']} (benchctl triage)")
    return "\n".join(lines)
