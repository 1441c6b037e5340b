"""Every verdict on a run, as lines for people: steady state, fill, spread across clients
and across repetitions, Little's law, partial steps. The CLI's table output and the HTML
report print the same lines."""

from __future__ import annotations

from typing import Any

from core.analysis.curves import spread_of_repetitions
from core.units import clients_text


def step_heading(step: dict[str, Any]) -> str:
    """``step 2 (iodepth=16, 4 clients)``: the swept value names the step."""
    parts = [p for p in (step.get("point"), clients_text(int(step["clients"]))) if p]
    return f"step {step['step']} ({', '.join(parts)})"


def _steady(results: list[dict[str, Any]]) -> str | None:
    verdicts = [r["steadystate"] for r in results if r.get("steadystate")]
    if not verdicts:
        return None
    attained = sum(1 for v in verdicts if v.get("attained"))
    criterion = verdicts[0].get("ss") or verdicts[0].get("criterion") or ""
    how = f" ({criterion})" if criterion else ""
    return f"steady state{how}: attained on {attained} of {clients_text(len(verdicts))}"


def _fill(results: list[dict[str, Any]], asked: bool) -> str | None:
    fills = [r["fill"] for r in results if r.get("fill")]
    if not fills:
        return "fill: not asked" if not asked else "fill: no client reported one"
    ran = [f for f in fills if f.get("ran")]
    if ran:
        secs = max(f.get("seconds", 0.0) for f in ran)
        return f"fill ran on {len(ran)} of {clients_text(len(fills))} (longest {secs:.1f} s)"
    return f"fill skipped on {clients_text(len(fills))}: a valid fill marker was found"


def _aggregate(agg: dict[str, Any]) -> list[str]:
    out = []
    spread = agg.get("spread")
    if spread:
        out.append(
            f"spread across clients: min {spread['min']:,.0f}, max {spread['max']:,.0f} IOPS, "
            f"CV {spread['cv']:.1%}"
        )
    little = agg.get("littles_law")
    if little and little.get("mode") == "rate-cap":
        out.append(
            f"rate cap: {little['achieved_iops']:,.0f} of {little['cap_iops']:,.0f} IOPS "
            f"({little['ratio']:.1%})" + (": FLAGGED" if little["flagged"] else "")
        )
    elif little:
        out.append(
            f"Little's law: IOPS x latency implies {little['implied_ios']:.1f} I/Os in flight, "
            f"clients kept {little['outstanding_ios']:.0f}"
            + (": FLAGGED" if little["flagged"] else ": consistent")
        )
    out.append("PARTIAL: a client failed" if agg.get("partial") else "complete: every client")
    return out


def result_verdicts(run: dict[str, Any], step: dict[str, Any]) -> list[str]:
    """What the clients' results say: steady state, and whether the fill ran."""
    results = [
        i["result"] for i in run.get("items", []) if i["step"] == step["step"] and i.get("result")
    ]
    return [x for x in (_steady(results), _fill(results, bool(run.get("fill")))) if x]


def step_verdicts(run: dict[str, Any], step: dict[str, Any]) -> list[str]:
    lines = result_verdicts(run, step)
    if step.get("aggregate"):
        lines += _aggregate(step["aggregate"])
    return lines


def _iops(agg: dict[str, Any]) -> float:
    return float(sum(agg[d]["iops"] for d in ("read", "write") if agg.get(d)))


def repetition_lines(run: dict[str, Any]) -> list[str]:
    aggs = [s["aggregate"] for s in run.get("steps", []) if s.get("aggregate")]
    kept = sorted((a for a in aggs if not a.get("discarded")), key=lambda a: a["step"])
    steps = [(int(a["clients"]), str(a.get("point") or ""), _iops(a)) for a in kept]
    return [
        f"spread across {r['repetitions']} repetitions ({clients_text(r['clients'])}"
        + (f", {r['point']}" if r["point"] else "")
        + f"): mean {r['mean_iops']:,.0f}, min {r['min_iops']:,.0f}, max {r['max_iops']:,.0f} "
        f"IOPS, CV {r['cv']:.1%}"
        for r in spread_of_repetitions(steps)
    ]


def verdict_lines(run: dict[str, Any]) -> list[str]:
    """All verdicts, one line each, every step's prefixed with its heading."""
    out = []
    for s in run.get("steps", []):
        out += [f"{step_heading(s)}: {v}" for v in step_verdicts(run, s)]
    return out + repetition_lines(run)
