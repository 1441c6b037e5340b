"""What the bot says, and how it is shown: a reply (title, lines, facts, data) rendered as a
Teams Adaptive Card or as JSON for the generic webhook (pure)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core import teams
from core.latency import KIND_NAMES, Kind, format_ns
from core.models.aggregate import DirectionAggregate, StepAggregate
from core.models.cards import Element, TeamsMessage, TextBlock
from core.models.chat import ChatReply
from core.models.state import RunState
from core.models.views import RunSummary, RunView


@dataclass
class Reply:
    """What the bot answers: a title, lines of text, facts, and the data for JSON callers."""

    kind: str
    title: str
    lines: list[str] = field(default_factory=list)
    facts: list[tuple[str, str]] = field(default_factory=list)
    data: dict[str, object] = field(default_factory=dict)  # the command's own JSON
    ok: bool = True
    link: str | None = None


def run_page(public_url: str, run_id: str) -> str:
    """The run's page for a person (its report in the web UI), not the API's JSON."""
    return f"{public_url}/ui/runs/{run_id}"


def fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:,.1f}"
    return str(v)


def status_reply(run: RunSummary, public_url: str) -> Reply:
    """A run's state and headline figures (its last step's aggregate, in a run's own view)."""
    state = run.state.value
    facts = [("State", state), ("Target", run.target)]
    if run.profile:
        facts.append(("Profile", run.profile))
    if run.queue_position is not None:
        facts.append(("Position", str(run.queue_position)))
    agg = run.aggregate if isinstance(run, RunView) else None
    if agg is not None:
        facts += _figures(agg)
    if (gate := gate_text(run.gate.model_dump(mode="json") if run.gate else None)) is not None:
        facts.append(("Gate", gate))
    lines = [f"error: {run.error}"] if run.error else []
    return Reply(
        "status",
        f"Run {run.id}: {state}",
        lines,
        facts,
        data={
            "run_id": run.id,
            "state": state,
            "aggregate": agg.model_dump(mode="json") if agg is not None else None,
        },
        ok=run.state != RunState.FAILED,
        link=run_page(public_url, run.id),
    )


def _figures(agg: StepAggregate) -> list[tuple[str, str]]:
    facts = []
    for d in ("read", "write"):
        a: DirectionAggregate | None = getattr(agg, d)
        if a is not None:
            facts.append((f"{d} IOPS", fmt(float(a.iops))))
            facts.append((f"{d} MiB/s", fmt(float(a.bw_bytes) / 2**20)))
            # Total latency's percentiles where recorded, else completion's (core.latency).
            kind: Kind = "lat" if a.lat_ns is not None else "clat"
            lat = a.lat_ns or a.clat_ns
            facts.append((f"{d} {KIND_NAMES[kind]} p99", format_ns(lat.p99)))
    if agg.clients:
        facts.append(("Clients", str(agg.clients)))
    bound = agg.bound_by
    if bound.utilisation is not None:
        # What bound the run (core.analysis.ceilings): the limit reached, or the nearest.
        what = "nearest: " if bound.kind == "none" else ""
        facts.append(("Bound by", f"{what}{bound.name} ({bound.utilisation:.0%})"))
    return facts


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


def _failed_metric(m: Mapping[str, Any]) -> str:
    """``read.iops -74.0%``: the change from the reference median, or the change point's
    when the gate had no reference yet (a change point attributed to the run)."""
    pct = m.get("change_pct")
    if pct is None:
        pct = (m.get("change_point") or {}).get("change_pct")
    return str(m["metric"]) if pct is None else f"{m['metric']} {float(pct):+.1f}%"


def result_reply(run: RunSummary, public_url: str) -> Reply:
    """The card posted when a run asked for through a chat finishes."""
    reply = status_reply(run, public_url)
    reply.kind = "result"
    reply.title = f"Run {run.id} {run.state.value}"
    return reply


def adaptive_card(reply: Reply) -> TeamsMessage:
    """A Teams message with one Adaptive Card (what an outgoing webhook may answer)."""
    body: list[Element] = [
        TextBlock(
            text=reply.title,
            weight="Bolder",
            size="Medium",
            color="Default" if reply.ok else "Attention",
        ),
        *(TextBlock(text=line) for line in reply.lines),
    ]
    if reply.facts:
        body.append(teams.facts(reply.facts))
    return teams.card_message(body, [teams.open_url("Open", reply.link)] if reply.link else None)


def json_reply(reply: Reply) -> ChatReply:
    # Validated: ``data`` must be JSON (JsonValue), whatever the command put there.
    return ChatReply.model_validate(
        {
            "command": reply.kind,
            "ok": reply.ok,
            "title": reply.title,
            "lines": reply.lines,
            "facts": dict(reply.facts),
            "data": reply.data,
            "link": reply.link,
        }
    )
