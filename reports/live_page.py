"""The web UI's live page of a run (/ui/runs/{id}/live): a table per client and their
total, and charts of the last minute, refreshed every second from GET
/api/runs/{id}/live. plotly.js is inlined as in the reports (no other host is asked)."""

from __future__ import annotations

from reports.page import render

# The agents relay a sample a second (agent.lease): polling faster would show nothing new.
POLL_MS = 1000


def live_page(run_id: str) -> str:
    return render(
        "live.html.j2",
        figures=[],
        nav=True,
        plotly=True,
        title=f"live: run {run_id}",
        run_id=run_id,
        poll_ms=POLL_MS,
    )
