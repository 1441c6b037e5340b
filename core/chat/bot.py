"""Chat commands (Teams outgoing webhook, generic signed webhook): parse and answer (pure).

Commands::

    run <profile> on <target> [with N clients] [for 60s|5m]
    status <run>
    cancel <run>
    compare <run-a> <run-b>
    profiles | targets | schedules | help

Anything else gets the help text with what was wrong, never an error: a chat user typed it.
The chat text only ever selects a catalogue profile, a known target alias, a client count
and a duration, each checked against a pattern and a range before it reaches the service.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import NotRequired, TypedDict

from core.catalogue import PROFILES
from core.chat.cards import Reply, fmt, run_page, status_reply
from core.errors import Conflict, FieldError, Forbidden, NotFound, ValidationFailed
from core.models import MAX_CLIENTS
from core.models.answers import CompareRow
from core.models.state import FINISHED_RUN, RunState
from core.models.views import RunSummary
from core.monitoring.monitor import Monitor
from core.monitoring.scheduler import Scheduler
from core.runs.guardrails import Caller, TargetInfo
from core.runs.service import RunService

HELP = [
    "run <profile> on <target> [with N clients] [for 60s] — start a benchmark",
    "status <run> — state and figures of a run",
    "cancel <run> — stop a run (runners: their own)",
    "compare <run-a> <run-b> — side by side, against the series' noise",
    "profiles — the workload catalogue",
    "targets — the volumes you can test, and whether they are busy",
    "schedules — the scheduled runs",
    "help — this text",
]
_RUN = re.compile(
    r"^run\s+(?P<profile>[a-z0-9-]{1,64})\s+on\s+(?P<target>[a-z][a-z0-9-]{0,30})"
    r"(?:\s+with\s+(?P<clients>\d{1,3})\s+clients?)?"
    r"(?:\s+for\s+(?P<amount>\d{1,5})\s*(?P<unit>s|sec|secs|seconds?|m|min|mins|minutes?))?$"
)
_RUN_ID = r"[A-Za-z0-9._-]{1,100}"
_STATUS = re.compile(rf"^status\s+(?P<run>{_RUN_ID})$")
_CANCEL = re.compile(rf"^cancel\s+(?P<run>{_RUN_ID})$")
_COMPARE = re.compile(rf"^compare\s+(?P<a>{_RUN_ID})\s+(?P<b>{_RUN_ID})$")
_SIMPLE = ("profiles", "targets", "schedules", "help")
_DONE = tuple(sorted(s.value for s in FINISHED_RUN))


@dataclass(frozen=True)
class CommandArgs:
    """What a command names: a run (status, cancel), two runs (compare), or a run to start."""

    run: str = ""
    a: str = ""
    b: str = ""
    profile: str = ""
    target: str = ""
    clients: int | None = None
    runtime: int | None = None  # seconds


@dataclass(frozen=True)
class Command:
    verb: str
    args: CommandArgs = field(default_factory=CommandArgs)
    problem: str | None = None  # why the text fell back to help


class RunBody(TypedDict):
    """The POST /api/runs body a chat's run command stands for."""

    profile: str
    target: str
    pool: str
    clients: int
    tags: dict[str, str]
    workload: NotRequired[dict[str, int]]


def clean_text(text: str) -> str:
    """Teams sends HTML with the bot's @mention first: drop tags, entities and the mention."""
    text = re.sub(r"<at>.*?</at>", " ", text, flags=re.IGNORECASE | re.DOTALL)
    text = html.unescape(re.sub(r"<[^>]+>", " ", text)).replace("\xa0", " ")
    return " ".join(text.split()).strip().lower()


def parse_command(text: str) -> Command:
    t = clean_text(text)
    if not t:
        return Command("help")
    if t in _SIMPLE:
        return Command(t)
    if m := _STATUS.match(t):
        return Command("status", CommandArgs(run=m["run"]))
    if m := _CANCEL.match(t):
        return Command("cancel", CommandArgs(run=m["run"]))
    if m := _COMPARE.match(t):
        return Command("compare", CommandArgs(a=m["a"], b=m["b"]))
    if m := _RUN.match(t):
        args = CommandArgs(profile=m["profile"], target=m["target"])
        if m["clients"]:
            clients = int(m["clients"])
            if not 1 <= clients <= MAX_CLIENTS:
                return Command("help", problem=f"clients must be 1 to {MAX_CLIENTS}")
            args = replace(args, clients=clients)
        if m["amount"]:
            seconds = int(m["amount"]) * (60 if m["unit"].startswith("m") else 1)
            if not 1 <= seconds <= 86_400:
                return Command("help", problem="the duration must be 1 s to 24 h")
            args = replace(args, runtime=seconds)
        return Command("run", args)
    verb = t.split()[0]
    if verb in ("run", "status", "cancel", "compare"):
        return Command("help", problem=f"I could not read that {verb} command")
    return Command("help", problem=f"I don't know {verb!r}")


class Bot:
    def __init__(
        self,
        runs: RunService,
        scheduler: Scheduler,
        monitor: Monitor,
        *,
        targets: list[TargetInfo],
        public_url: str,
        result_doors: frozenset[str],
    ) -> None:
        self.runs = runs
        self.scheduler = scheduler
        self.monitor = monitor
        self.targets = targets
        self.public_url = public_url
        # The doors whose result channel is configured (Teams' incoming webhook, the signed
        # generic webhook): only there is a finished run's card posted back.
        self.result_doors = result_doors

    def answer(self, command: Command, caller: Caller, request_id: str) -> Reply:
        try:
            return self._answer(command, caller, request_id)
        except (ValidationFailed, Forbidden) as e:
            return _refused(command, e.errors)
        except NotFound as e:
            return Reply(command.verb, "Not found", [f"not found: {e}"], ok=False)
        except Conflict as e:
            return Reply(command.verb, "Refused", [str(e)], ok=False)

    def _answer(self, command: Command, caller: Caller, request_id: str) -> Reply:
        if command.verb == "run":
            return self._run(command.args, caller, request_id)
        if command.verb == "cancel":
            return self._cancel(command.args.run, caller)
        simple: dict[str, Callable[[Command], Reply]] = {
            "status": lambda c: self.status(self.runs.get_run(c.args.run)),
            "compare": self._compare,
            "profiles": lambda c: _profiles(),
            "targets": lambda c: self.list_targets(),
            "schedules": lambda c: self._schedules(),
        }
        if command.verb in simple:
            return simple[command.verb](command)
        lines = ([command.problem] if command.problem else []) + HELP
        return Reply("help", "What I can do", lines, ok=command.problem is None)

    def _cancel(self, run_id: str, caller: Caller) -> Reply:
        run = self.cancel(run_id, caller)
        state = run.state.value
        done = state in _DONE
        return Reply(
            "cancel",
            f"Run {run.id}: {state if done else 'cancel requested'}",
            [f"the run had already {state}"] if done else [],
            [("Run", run.id), ("State", state)],
            data={"run_id": run.id, "state": state},
            link=f"{self.public_url}/api/runs/{run.id}",
        )

    def _compare(self, command: Command) -> Reply:
        view_a, view_b = (self.runs.get_run(k) for k in (command.args.a, command.args.b))
        cmp = self.monitor.compare(view_a, view_b)
        facts = [(r.metric, f"{fmt(r.a)} → {fmt(r.b)} ({_pct(r)}, {r.verdict})") for r in cmp.rows]
        lines = [cmp.summary]
        if not cmp.comparable:
            lines.append("careful: the two runs differ in workload, targets or clients")
        data = cmp.model_dump(mode="json")  # the command's own JSON: the comparison's
        return Reply("compare", f"{view_a.id} vs {view_b.id}", lines, facts, data=data)

    def _schedules(self) -> Reply:
        found = self.scheduler.list_all()
        facts = [(s.name or s.id, f"{s.cron} ({'on' if s.enabled else 'off'})") for s in found]
        return Reply(
            "schedules",
            "Schedules",
            [] if found else ["no schedules"],
            facts,
            data={"schedules": [s.id for s in found]},
        )

    def _run(self, args: CommandArgs, caller: Caller, request_id: str) -> Reply:
        pool = next((t.pool for t in self.targets if t.alias == args.target), "default")
        body = RunBody(
            profile=args.profile,
            target=args.target,
            pool=pool,
            clients=args.clients or 1,
            tags={"door": caller.door},
        )
        if args.runtime is not None:
            body["workload"] = {"runtime": args.runtime}
        # The chat platform's message id: a retried delivery starts nothing twice.
        run, _ = self.runs.submit(body, f"{caller.door}:{request_id}", caller)
        state = run.state.value
        waiting = run.state == RunState.WAITING
        page = run_page(self.public_url, run.id)
        then = (
            "I'll post the result here when it finishes"
            if caller.door in self.result_doors
            else "no result channel is configured for this chat, so I cannot post the "
            f"result here: follow it at {page} or ask `status {run.id}`"
        )
        lines = [
            f"queued run {run.id}: {args.profile} on {args.target} with "
            f"{body['clients']} client(s) — {then}"
        ]
        if waiting:
            lines.append(f"the target is busy: position {run.queue_position} in line")
        return Reply(
            "run",
            "Run queued" if not waiting else "Run waiting for its target",
            lines,
            [("Run", run.id), ("State", state)],
            data={"run_id": run.id, "state": state, **_position(run)},
            link=page,
        )

    def cancel(self, run_id: str, caller: Caller) -> RunSummary:
        """As DELETE /api/runs/{id}: runners their own runs, engineers and admins any."""
        if caller.limits.max_clients == 0:
            raise Forbidden([FieldError("(caller)", f"role {caller.role} may not cancel runs")])
        return self.runs.cancel(run_id, caller)

    def status(self, run: RunSummary) -> Reply:
        return status_reply(run, self.public_url)

    def list_targets(self) -> Reply:
        if not self.targets:
            return Reply("targets", "Targets", ["no target registry: any mounted alias works"])
        data = [t.model_dump(mode="json") for t in self.runs.views.targets(self.targets)]
        facts = [
            (
                t["alias"],
                f"{t['pool']}, {'read-only' if t['read_only'] else 'read-write'}, "
                + (f"busy ({t['holder']})" if t["busy"] else "idle")
                + (f", {t['waiting']} waiting" if t["waiting"] else ""),
            )
            for t in data
        ]
        return Reply("targets", "Targets", facts=facts, data={"targets": data})


def _profiles() -> Reply:
    facts = [(p.name, p.title) for p in PROFILES]
    return Reply("profiles", "Profiles", facts=facts, data={"profiles": [p.name for p in PROFILES]})


def _pct(row: CompareRow) -> str:
    return "n/a" if row.delta_pct is None else f"{row.delta_pct:+.1f}%"


def _position(run: RunSummary) -> dict[str, int]:
    return {"queue_position": run.queue_position} if run.queue_position is not None else {}


def _refused(command: Command, errors: list[FieldError]) -> Reply:
    lines = [f"{e.field}: {e.message}" for e in errors]
    return Reply(
        command.verb,
        "Refused",
        lines,
        data={"errors": [e.as_dict() for e in errors]},
        ok=False,
    )
