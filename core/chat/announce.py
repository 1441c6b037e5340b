"""A run asked for through a chat is announced there when it finishes: its result card
goes to the door it came from (the Teams bot's stored conversation, a Teams channel's
incoming webhook, or the signed generic webhook), once (the run service calls this when it
finalizes a run, exactly once)."""

from __future__ import annotations

from collections.abc import Callable

from core.chat.cards import adaptive_card, json_reply, result_reply
from core.chat.identity import BOT_DOOR
from core.chat.threads import Threads
from core.models.chat import RunFinished
from core.models.regression import DeliveryRecord
from core.models.stored import Run
from core.models.views import RunView
from core.ports import Notifier

CHAT_DOORS = ("bot-teams", "bot-webhook")


class Announcer:
    def __init__(
        self,
        get_run: Callable[[str], RunView],
        notifier: Notifier,
        *,
        public_url: str,
        threads: Callable[[], Threads | None] = lambda: None,
    ) -> None:
        self.get_run = get_run
        self.notifier = notifier
        self.public_url = public_url
        self.threads = threads

    def __call__(self, finished: Run) -> list[DeliveryRecord]:
        """``finished``: the run as its finalizer wrote it. Its whole view (every item and
        result read) is built only for a run from a chat: at 1,000 clients that view took
        about a second of the last result's request (issue 29.2), for nothing to send."""
        door = finished.requested_by.door
        if door == BOT_DOOR:
            threads = self.threads()
            return threads.announce(finished.id) if threads is not None else []
        if door not in CHAT_DOORS:
            return []
        run = self.get_run(finished.id)
        reply = result_reply(run, self.public_url)
        payload = RunFinished.model_validate(json_reply(reply).model_dump())
        return self.notifier.post_result(door, adaptive_card(reply), payload)
