"""Azure Functions entry point (Python v2 programming model).

The HTTP API is the same ASGI app uvicorn serves locally; the timer triggers are registered
on the same app object, and both work on the same parts (functions.context.current).
Authentication in Azure is App Service Authentication (Entra ID) in
front of the app, so the functions themselves are anonymous.
"""

from __future__ import annotations

import azure.functions as func

from functions import timers
from functions.api import create_app
from functions.context import current

app = func.AsgiFunctionApp(app=create_app(), http_auth_level=func.AuthLevel.ANONYMOUS)


@app.timer_trigger(
    schedule=timers.RUNS_SCHEDULE, arg_name="timer", run_on_startup=False, use_monitor=True
)
def advance_runs(timer: func.TimerRequest) -> None:
    """Move every run on that is due (functions.timers.runs_tick): scale elastic pools, admit
    waiting runs, send and resend steps, expire start barriers, aggregate and complete
    finished runs (idempotent: deterministic ids), update the Teams run cards."""
    timers.runs_tick(current())


@app.timer_trigger(
    schedule=timers.SCHEDULES_SCHEDULE, arg_name="timer", run_on_startup=False, use_monitor=True
)
def start_scheduled_runs(timer: func.TimerRequest) -> None:
    """Start each due scheduled run once (Idempotency-Key per schedule and fire time)."""
    timers.schedules_tick(current())
