"""Adaptive Cards that act, for the Teams bot (pure): Universal Actions (``Action.Execute``).

Teams sends each button press to the bot as an ``adaptiveCard/action`` invoke naming the
verb and its data; the bot answers with the card that replaces the pressed one. A run's card
also carries a ``refresh`` action, which Teams invokes when someone looks at the card, and
the bot updates it in place as the run moves (core/chat/threads.py), so it shows where the
run is without anyone asking. The figures are the ones every door shows
(core.chat.cards.status_reply): headline figures, what bound the run, the gate verdict.

Schema 1.4: the first version with Action.Execute, and what Teams renders.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.analysis.metrics import metric_text, metric_value
from core.chat.cards import Reply, run_page, status_reply
from core.models import MAX_CLIENTS
from core.models.cards import (
    Action,
    AdaptiveCard,
    CardAttachment,
    Choice,
    ChoiceSetInput,
    Element,
    ExecuteAction,
    FactSet,
    NumberInput,
    OpenUrlAction,
    Refresh,
    TextBlock,
)
from core.models.views import RunSummary
from core.monitoring.baseline import Baseline, BaselineRow

FINISHED = ("completed", "failed", "cancelled")
# The verbs the bot answers (functions/teams_bot.py), each authorised like its REST call.
VERBS = ("form", "run", "refresh", "cancel", "rerun", "compare", "subscribe", "unsubscribe")
COLOURS = {"completed": "Good", "failed": "Attention", "cancelled": "Warning"}


def card(
    body: Sequence[Element],
    actions: Sequence[Action] | None = None,
    refresh: Refresh | None = None,
) -> AdaptiveCard:
    return AdaptiveCard(body=list(body), actions=list(actions or []) or None, refresh=refresh)


def attachment(content: AdaptiveCard) -> CardAttachment:
    return CardAttachment(content=content)


def execute(title: str, verb: str, **data: str) -> ExecuteAction:
    assert verb in VERBS, verb
    return ExecuteAction(title=title, verb=verb, data=data)


def title(text: str, colour: str = "Default") -> TextBlock:
    return TextBlock(text=text, weight="Bolder", size="Medium", color=colour)


def text(line: str, *, subtle: bool = False) -> TextBlock:
    return TextBlock(text=line, is_subtle=True if subtle else None)


def facts(pairs: Sequence[tuple[str, str]]) -> FactSet:
    return FactSet.of(list(pairs))


def open_report(public_url: str, run_id: str) -> OpenUrlAction:
    return OpenUrlAction(title="Open report", url=report_url(public_url, run_id))


def report_url(public_url: str, run_id: str) -> str:
    return run_page(public_url, run_id)


def run_card(run: RunSummary, public_url: str, *, note: str | None = None) -> AdaptiveCard:
    """A run as it stands, with what may be done next: cancel while it is on its way; rerun
    and compare with the series' baseline once it is over; its report at any time."""
    reply = status_reply(run, public_url)
    state = run.state.value
    body: list[Element] = [title(f"Run {run.id}: {state}", COLOURS.get(state, "Default"))]
    body += [text(line) for line in reply.lines]
    if note:
        body.append(text(note, subtle=True))
    body.append(facts(reply.facts))
    run_id = run.id
    actions: list[Action] = []
    if state in FINISHED:
        actions += [
            execute("Rerun", "rerun", run_id=run_id),
            execute("Compare with baseline", "compare", run_id=run_id),
        ]
    else:
        actions.append(execute("Cancel", "cancel", run_id=run_id))
    actions.append(open_report(public_url, run_id))
    refresh = None
    if state not in FINISHED:
        refresh = Refresh(action=execute("Refresh", "refresh", run_id=run_id))
    return card(body, actions, refresh)


def run_form(
    profiles: Sequence[tuple[str, str]],
    targets: Sequence[tuple[str, str]],
    *,
    max_clients: int = MAX_CLIENTS,
    problem: str | None = None,
) -> AdaptiveCard:
    """Run a catalogue profile on a target chosen from lists (the registry's targets)."""
    body: list[Element] = [title("Start a run")]
    if problem:
        body.append(TextBlock(text=problem, color="Attention"))
    body += [
        ChoiceSetInput(
            id="profile",
            label="Profile",
            is_required=True,
            error_message="choose a profile",
            placeholder="a catalogue profile",
            choices=[Choice(title=f"{name} — {desc}", value=name) for name, desc in profiles],
        ),
        ChoiceSetInput(
            id="target",
            label="Target",
            is_required=True,
            error_message="choose a target",
            placeholder="a registered volume",
            choices=[Choice(title=f"{alias} ({what})", value=alias) for alias, what in targets],
        ),
        NumberInput(id="clients", label="Clients", min=1, max=max_clients, value=1),
        NumberInput(id="runtime", label="Seconds (empty: the profile's)", min=1, max=86_400),
    ]
    return card(body, [execute("Run", "run")])


def reply_card(reply: Reply, *, actions: list[Action] | None = None) -> AdaptiveCard:
    """Any other answer (help, profiles, targets, a refusal) as a card."""
    body: list[Element] = [title(reply.title, "Default" if reply.ok else "Attention")]
    body += [text(line) for line in reply.lines]
    if reply.facts:
        body.append(facts(reply.facts))
    more = list(actions or [])
    if reply.link:
        more.append(OpenUrlAction(title="Open", url=reply.link))
    return card(body, more)


def baseline_card(run_id: str, comparison: Baseline, public_url: str) -> AdaptiveCard:
    """The run's figures against its series' baseline, metric by metric, as the gate
    judged them (core.monitoring.baseline); the run's own card is one press away."""
    n = comparison.baseline_points
    body: list[Element] = [title(f"Run {run_id} against its series' baseline")]
    if comparison.note:
        body.append(text(comparison.note))
    else:
        body.append(
            text(
                f"the gate's verdicts: each figure against the median of up to {n} earlier "
                "run(s) on the same infrastructure",
                subtle=True,
            )
        )
        body.append(facts([(metric_text(r.metric), _judged(r)) for r in comparison.rows]))
    actions: list[Action] = [execute("Back to the run", "refresh", run_id=run_id)]
    if comparison.series_key:
        actions.append(
            execute("Subscribe to its regressions", "subscribe", series=comparison.series_key)
        )
    actions.append(open_report(public_url, run_id))
    return card(body, actions)


def _judged(r: BaselineRow) -> str:
    """``61,234 → 15,310 (-75.0%, band 10.0%: regression)``, or the figure and why the gate
    could not judge it (``3 reference run(s); the gate needs 5``)."""
    value = metric_value(r.value, r.metric)
    if r.median is None or r.change_pct is None:
        return f"{value} ({r.verdict}: {r.why})"
    band = f", band {r.band_pct:.1f}%" if r.band_pct is not None else ""
    return f"{metric_value(r.median, r.metric)} → {value} ({r.change_pct:+.1f}%{band}: {r.verdict})"
