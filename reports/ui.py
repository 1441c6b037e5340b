"""The read-only web UI's list pages (server-rendered; the run and series pages are the
reports themselves)."""

from __future__ import annotations

from typing import Any

from reports.page import render


def _workload(doc: dict[str, Any]) -> str:
    w = doc.get("workload") or {}
    if not w:
        return "-"
    profile = f"{doc['profile']}: " if doc.get("profile") else ""
    return f"{profile}{w.get('rw')} {w.get('bs')} {w.get('numjobs')}x{w.get('iodepth')}"


def _clients(doc: dict[str, Any]) -> str:
    counts = (doc.get("request") or {}).get("clients", 1)
    return ",".join(map(str, counts)) if isinstance(counts, list) else str(counts)


def runs_page(runs: list[dict[str, Any]], filters: dict[str, str], states: list[str]) -> str:
    return render(
        "runs.html.j2",
        figures=[],
        nav=True,
        title="runs",
        runs=runs,
        filters=filters,
        states=states,
        workload=_workload,
        clients=_clients,
    )


def series_list_page(series: list[dict[str, Any]]) -> str:
    return render(
        "series_list.html.j2",
        figures=[],
        nav=True,
        title="series",
        series=series,
        workload=_workload,
    )


def regressions_page(regressions: list[dict[str, Any]]) -> str:
    return render(
        "regressions.html.j2", figures=[], nav=True, title="regressions", regressions=regressions
    )


def signin_page(error: bool) -> str:
    return render("signin.html.j2", figures=[], nav=False, title="sign in", error=error)
