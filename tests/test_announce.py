"""A finished run is announced to the chat it came from, and only there (core.chat.announce).
Issue 29.2: the announcer built the run's whole view (every item and result read) for each
run it was told of, a second of the last result's request at 1,000 clients, to find out
that an API or pipeline run has no chat to go to."""

from __future__ import annotations

from core.chat.announce import Announcer
from core.models.cards import TeamsMessage
from core.models.chat import RunFinished
from core.models.regression import DeliveryRecord, Regression
from core.models.state import RunState
from core.models.stored import Requester, Run
from core.models.views import RunView
from tests.test_thousand_clients import World


class Recorder:
    def __init__(self) -> None:
        self.posted: list[tuple[str, RunFinished]] = []

    def notify(self, regression: Regression) -> list[DeliveryRecord]:
        return []

    def post_result(
        self, door: str, teams_message: TeamsMessage, payload: RunFinished
    ) -> list[DeliveryRecord]:
        self.posted.append((door, payload))
        return [DeliveryRecord(channel=door, ok=True)]


def finished_run(clients: int) -> tuple[World, list[Run]]:
    world = World(clients)
    told: list[Run] = []
    world.service.lifecycle.on_finished = told.append
    world.run()
    return world, told


def test_the_finalizer_tells_the_run_as_written_once() -> None:
    world, told = finished_run(8)
    (run,) = told
    assert run.state == RunState.COMPLETED and run == world.store.runs.get(run.id)


def test_a_run_from_the_api_is_announced_nowhere_and_its_view_is_not_built() -> None:
    world, (run,) = finished_run(8)
    viewed: list[str] = []

    def view(run_id: str) -> RunView:
        viewed.append(run_id)
        return world.service.get_run(run_id)

    notifier = Recorder()
    announce = Announcer(view, notifier, public_url="http://127.0.0.1:7071")
    assert run.requested_by.door == "api"
    assert announce(run) == [] and viewed == [] and notifier.posted == []
    # From the generic webhook's chat: its view is built, once, and its result card sent.
    chat = run.model_copy(
        update={"requested_by": Requester(name="c", role="u", door="bot-webhook")}
    )
    (record,) = announce(chat)
    assert record.ok and viewed == [run.id]
    ((door, payload),) = notifier.posted
    assert door == "bot-webhook" and run.id in (payload.link or "") + " ".join(payload.lines)
