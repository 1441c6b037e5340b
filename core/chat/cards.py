"""What the bot says, and how it is shown: a reply (title, lines, facts, data) rendered as a
Teams Adaptive Card or as JSON for the generic webhook (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core import teams
from core.latency import KIND_NAMES, format_ns, shown
from core.ports import Doc


@dataclass
class Reply:
    """What the bot answers: a title, lines of text, facts, and the data for JSON callers."""

    kind: str
    title: str
    lines: list[str] = field(default_factory=list)
    facts: list[tuple[str, str]] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    ok: bool = True
    link: str | None = None


def run_page(public_url: str, run_id: str) -> str:
    """The run's page for a person (its report in the web UI), not the API's JSON."""
    return f"{public_url}/ui/runs/{run_id}"


def fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.1f}"
    return str(v)


def status_reply(run: Doc, public_url: str) -> Reply:
    """A run's state and headline figures (its last step's aggregate)."""
    facts = [("State", run["state"]), ("Target", str(run.get("target")))]
    if run.get("profile"):
        facts.append(("Profile", run["profile"]))
    if "queue_position" in run:
        facts.append(("Position", str(run["queue_position"])))
    agg = run.get("aggregate") or {}
    for d in ("read", "write"):
        a = agg.get(d)
        if a:
            facts.append((f"{d} IOPS", fmt(float(a["iops"]))))
            facts.append((f"{d} MiB/s", fmt(float(a["bw_bytes"]) / 2**20)))
            kind, lat = shown(a)
            facts.append((f"{d} {KIND_NAMES[kind]} p99", format_ns(lat.get("p99"))))
    if agg.get("clients"):
        facts.append(("Clients", str(agg["clients"])))
    bound = agg.get("bound_by")
    if bound and bound.get("utilisation") is not None:
        # What bound the run (core.analysis.ceilings): the limit reached, or the nearest.
        what = "nearest: " if bound["kind"] == "none" else ""
        facts.append(("Bound by", f"{what}{bound['name']} ({bound['utilisation']:.0%})"))
    if (gate := gate_text(run.get("gate"))) is not None:
        facts.append(("Gate", gate))
    lines = [f"error: {run['error']}"] if run.get("error") else []
    return Reply(
        "status",
        f"Run {run['id']}: {run['state']}",
        lines,
        facts,
        data={"run_id": run["id"], "state": run["state"], "aggregate": agg or None},
        ok=run["state"] != "failed",
        link=run_page(public_url, run["id"]),
    )


def gate_text(gate: object) -> str | None:
    """The run's gate verdict, when its view carries one: the run's (``{"verdict", "rule",
    "metrics": [...]}``, core.models.gate.RunGate, with the metrics that failed), or
    ``{metric: {"verdict", "change_pct"}}`` per metric (the series points' shape)."""
    if not isinstance(gate, dict) or not gate:
        return None
    if "verdict" in gate:
        return _run_gate_text(gate)
    return _series_gate_text(gate)


def _run_gate_text(gate: Mapping[str, object]) -> str:
    metrics = gate.get("metrics")
    judged = [m for m in metrics or [] if isinstance(m, dict)] if isinstance(metrics, list) else []
    steps = {m.get("step") for m in judged}
    failed = [
        ("" if len(steps) < 2 else f"step {m.get('step')} ") + _failed_metric(m)
        for m in judged
        if m.get("verdict") == "regression"
    ]
    if gate["verdict"] == "regression" and failed:
        return "regression: " + ", ".join(failed)
    return str(gate["verdict"]).replace("-", " ")


def _series_gate_text(gate: Mapping[str, object]) -> str | None:
    verdicts = {m: v for m, v in gate.items() if isinstance(v, dict) and "verdict" in v}
    failed = [
        f"{m} {float(v.get('change_pct') or 0):+.1f}%"
        for m, v in sorted(verdicts.items())
        if v["verdict"] == "regression"
    ]
    if failed:
        return "regression: " + ", ".join(failed)
    return "pass" if verdicts else None


def _failed_metric(m: dict[str, Any]) -> str:
    """``read.iops -74.0%``: the change from the reference median, or the change point's
    when the gate had no reference yet (a change point attributed to the run)."""
    pct = m.get("change_pct")
    if pct is None:
        pct = (m.get("change_point") or {}).get("change_pct")
    return str(m["metric"]) if pct is None else f"{m['metric']} {float(pct):+.1f}%"


def result_reply(run: Doc, public_url: str) -> Reply:
    """The card posted when a run asked for through a chat finishes."""
    reply = status_reply(run, public_url)
    reply.kind = "result"
    reply.title = f"Run {run['id']} {run['state']}"
    return reply


def adaptive_card(reply: Reply) -> dict[str, Any]:
    """A Teams message with one Adaptive Card (what an outgoing webhook may answer)."""
    body: list[dict[str, Any]] = [
        {
            "type": "TextBlock",
            "text": reply.title,
            "weight": "Bolder",
            "size": "Medium",
            "color": "Default" if reply.ok else "Attention",
            "wrap": True,
        },
        *({"type": "TextBlock", "text": line, "wrap": True} for line in reply.lines),
    ]
    if reply.facts:
        body.append(teams.facts(reply.facts))
    return teams.card_message(body, [teams.open_url("Open", reply.link)] if reply.link else None)


def json_reply(reply: Reply) -> dict[str, Any]:
    return {
        "command": reply.kind,
        "ok": reply.ok,
        "title": reply.title,
        "lines": reply.lines,
        "facts": dict(reply.facts),
        "data": reply.data,
        "link": reply.link,
    }
