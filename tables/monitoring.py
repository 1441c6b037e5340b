"""Schedules and regressions as tables (benchctl schedule, regressions, triage)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from rich.table import Table

from core.units import clients_text


def _when(iso: str | None) -> str:
    if not iso:
        return "-"
    try:
        t = datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        return iso
    return t.strftime("%Y-%m-%d %H:%M UTC")


def request_text(request: dict[str, Any]) -> str:
    """What a schedule runs: profile (or rw and bs), target(s), clients."""
    w = request.get("workload") or {}
    what = request.get("profile") or " ".join(str(w[k]) for k in ("rw", "bs") if k in w)
    where = request.get("target") or ",".join(request.get("targets") or [])
    clients = request.get("clients", 1)
    return f"{what or 'default workload'} on {where}, {clients_text(clients)} client(s)"


def schedules_table(schedules: list[dict[str, Any]], title: str = "schedules") -> Table:
    """One row per schedule; the id and the name, what one types or looks for, never wrap
    (the run request's summary does; `schedule show ID` has every field)."""
    t = Table(title=title)
    for col in ("id", "name", "cron (UTC)", "on", "owner", "next fire", "last run"):
        t.add_column(col, no_wrap=col in ("id", "name", "cron (UTC)", "last run"))
    t.add_column("runs", overflow="fold")
    for s in schedules:
        t.add_row(
            s["id"],
            s.get("name") or "-",
            s["cron"],
            "yes" if s["enabled"] else "no",
            s["owner"],
            _when(s.get("next_fire")) if s["enabled"] else "-",
            s.get("last_run_id") or "-",
            request_text(s.get("request") or {}),
        )
    return t


def schedule_card(s: dict[str, Any]) -> Table:
    """One schedule, a field per line (create, show, enable, disable)."""
    t = Table(title=f"schedule {s['id']}", show_header=False)
    t.add_column("field", style="bold")
    t.add_column("value", overflow="fold")
    rows = [
        ("id", s["id"]),
        ("name", s.get("name") or "-"),
        ("cron (UTC)", s["cron"]),
        ("enabled", "yes" if s["enabled"] else "no"),
        ("owner", s["owner"]),
        ("runs", request_text(s.get("request") or {})),
        ("next fire", _when(s.get("next_fire")) if s["enabled"] else "- (disabled)"),
        ("last fired", _when(s.get("last_fired"))),
        ("last run", s.get("last_run_id") or "-"),
    ]
    for field, value in rows:
        t.add_row(field, value)
    return t


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:+.1f} %"


def regressions_table(regressions: list[dict[str, Any]], title: str = "regressions") -> Table:
    """One row per change found; the id is what `benchctl triage` takes."""
    t = Table(title=title)
    for col in ("id", "target", "metric", "kind", "change", "method", "first run", "state"):
        t.add_column(
            col, no_wrap=col in ("id", "first run"), justify="right" if col == "change" else "left"
        )
    t.add_column("found")
    for r in sorted(regressions, key=lambda r: r.get("detected_at") or "", reverse=True):
        style = (
            "red" if r["kind"] == "regression" and r["state"] in ("new", "acknowledged") else None
        )
        t.add_row(
            r["id"],
            r.get("target") or "-",
            r["metric"],
            r["kind"],
            _pct(r.get("change_pct")),
            r["method"],
            r["first_run_id"],
            r["state"],
            _when(r.get("detected_at")),
            style=style,
        )
    return t
