"""The live table ``benchctl follow`` shows while a step measures: each client's and the
total's last second, from GET /api/runs/{id}/live (core.runs.live_view). Headed live, and
never printed at the end: the run's figures come after it, from fio's final output."""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import ValidationError
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from benchctl.client import Api, CliError
from core.latency import format_ns
from core.runs.live_view import LiveSecond, LiveView

LIVE_TIMEOUT_S = 5.0  # a slow answer must not hold the progress bars up


def _cells(s: LiveSecond | None) -> list[str]:
    if s is None:
        return ["-", "-", "-", "-"]
    ending = datetime.fromtimestamp(s.end_ms / 1000, UTC).strftime("%H:%M:%S")
    return [f"{s.live_iops:,.0f}", f"{s.live_mib_s:,.2f}", format_ns(s.live_lat_mean_ns), ending]


def _reporting(view: LiveView) -> str:
    n = len(view.clients)
    return f"{n} of {view.step_clients} clients" if view.step_clients else f"{n} clients"


def live_table(view: LiveView) -> Table | None:
    """None before the first sample of the step arrived."""
    if view.step is None or not view.clients:
        return None
    table = Table(
        title=f"LIVE · step {view.step} · {_reporting(view)} · fio's status output, per "
        "second (not the results)",
        title_justify="left",
        caption="latency: total (submission + completion), mean over the second's I/Os",
        caption_justify="left",
    )
    for name in ("client", "agent"):
        table.add_column(name)
    for name in ("live IOPS", "live MiB/s", "live total lat (mean)", "second ending UTC"):
        table.add_column(name, justify="right")
    for c in view.clients:
        last = c.seconds[-1] if c.seconds else None
        table.add_row(str(c.client), c.agent_id, *_cells(last))
    table.add_row("total", "", *_cells(view.total[-1] if view.total else None), style="bold")
    return table


class LiveBoard:
    """The live table as the follow's display draws it: the latest one fetched, or a line
    saying why there is none (a measuring step's first samples take a second or two)."""

    def __init__(self) -> None:
        self.current: RenderableType = Text("")

    def update(self, api: Api, run_id: str, state: str) -> None:
        if state != "running":
            self.current = Text("")
            return
        try:
            view = LiveView.model_validate(api.live(run_id, timeout=LIVE_TIMEOUT_S))
        except (CliError, ValidationError) as e:
            # The live view is a bonus: following goes on without it.
            self.current = Text(f"live figures unavailable: {e}", style="yellow")
            return
        table = live_table(view)
        self.current = table if table is not None else Text("live: waiting for fio's first second")

    def __rich__(self) -> RenderableType:
        return Group(self.current)
