"""The read-only web UI's list pages (server-rendered; the run and series pages are the
reports themselves)."""

from __future__ import annotations

from typing import Any

from reports.page import render, series_name, workload_text
from tables.lists import headline


def _clients(doc: dict[str, Any]) -> str:
    counts = (doc.get("request") or {}).get("clients", 1)
    return ",".join(map(str, counts)) if isinstance(counts, list) else str(counts)


def runs_page(runs: list[dict[str, Any]], filters: dict[str, str], states: list[str]) -> str:
    """Each run with its last step's IOPS, MiB/s and worst p99 (``benchctl list``'s)."""
    return render(
        "runs.html.j2",
        figures=[],
        nav=True,
        title="runs",
        runs=[{**r, "headline": headline(r)} for r in runs],
        filters=filters,
        states=states,
        workload=workload_text,
        clients=_clients,
    )


def series_list_page(series: list[dict[str, Any]]) -> str:
    return render(
        "series_list.html.j2",
        figures=[],
        nav=True,
        title="series",
        series=series,
        name=series_name,
    )


def regressions_page(regressions: list[dict[str, Any]]) -> str:
    return render(
        "regressions.html.j2", figures=[], nav=True, title="regressions", regressions=regressions
    )


def signin_page(error: bool) -> str:
    return render("signin.html.j2", figures=[], nav=False, title="sign in", error=error)
