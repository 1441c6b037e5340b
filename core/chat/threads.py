"""Results where they were asked for (pure): the Teams bot's conversations, stored.

- A run started from Teams keeps the conversation it came from (the SDK's conversation
  reference and the claims it continues under) and the id of the message that shows its
  card. As the run moves, that card is updated in place (``refresh_open``, each timer tick);
  when it finishes, its result card is posted to the same conversation (``announce``, called
  once by the run service when it finalizes the run). The thread is then a finished
  delivery: it carries a ``ttl`` and expires (core.retention).
- A conversation may subscribe to a series: the series' regressions are posted to it.

Each conversation is handled alone: one that fails (the bot was removed from a chat, the
connector is down) is logged and recorded, never raised into the timer.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from typing import Protocol

from pydantic import BaseModel, Field

from core.chat.action_cards import attachment, run_card
from core.errors import BenchError, NotFound
from core.models.cards import CardAttachment, MessageAttachment, TeamsMessage
from core.models.chat import RunFinished
from core.models.chat import StoredConversation as Conversation
from core.models.document import StoredJson
from core.models.regression import DeliveryRecord, Regression
from core.models.views import RunSummary, RunView
from core.monitoring.notify import teams_card
from core.ports import Notifier

log = logging.getLogger(__name__)


class RunThread(BaseModel):
    """A run started from a conversation: where its card is and what the card shows."""

    id: str  # run.<run id>
    kind: str = "run"
    run_id: str
    conversation: Conversation
    card_activity_id: str | None = None
    shown_state: str
    announced: bool = False
    # Seconds after its last write that Cosmos DB deletes it: set once its result is posted.
    ttl: int | None = None

    def doc(self) -> StoredJson:
        """As stored: no ``ttl`` field while it has none (Cosmos DB takes only a number)."""
        return self.model_dump(mode="json", exclude={"ttl"} if self.ttl is None else None)


class Subscription(BaseModel):
    id: str  # sub.<series key>.<conversation digest>
    kind: str = "subscription"
    series_key: str = Field(max_length=200)
    conversation: Conversation
    by: str  # who subscribed (the API's name for them)

    def doc(self) -> StoredJson:
        return self.model_dump(mode="json")


class ConversationRepo(Protocol):
    """The stored documents as the container holds them (RunThread, Subscription validate
    them here): a run thread and a subscription share the container, told by ``kind``."""

    def upsert(self, doc: StoredJson) -> None: ...
    def get(self, doc_id: str) -> StoredJson: ...  # raises NotFound
    def delete(self, doc_id: str) -> None: ...
    def open_runs(self) -> list[StoredJson]: ...  # run threads not announced yet
    def subscribers(self, series_key: str) -> list[StoredJson]: ...


class ConversationSender(Protocol):
    """Posts to a stored conversation through the Bot Connector; raises on failure."""

    def send(self, conversation: Conversation, attachments: list[CardAttachment]) -> str | None: ...
    def update(
        self, conversation: Conversation, activity_id: str, attachments: list[CardAttachment]
    ) -> None: ...


def subscription_id(series_key: str, conversation: Conversation) -> str:
    digest = hashlib.sha256(conversation.id.encode()).hexdigest()[:24]
    return f"sub.{series_key}.{digest}"


class Threads:
    def __init__(
        self,
        repo: ConversationRepo,
        sender: ConversationSender,
        get_run: Callable[[str], RunView],
        *,
        public_url: str,
        finished_ttl_s: int | None = None,
    ) -> None:
        self.repo = repo
        self.sender = sender
        self.get_run = get_run
        self.public_url = public_url
        self.finished_ttl_s = finished_ttl_s  # None: announced threads are kept

    # ---- runs ---------------------------------------------------------------------------

    def remember_run(
        self, run: RunSummary, conversation: Conversation, card_activity_id: str | None
    ) -> RunThread:
        thread = RunThread(
            id=f"run.{run.id}",
            run_id=run.id,
            conversation=conversation,
            card_activity_id=card_activity_id,
            shown_state=run.state.value,
        )
        self.repo.upsert(thread.doc())
        return thread

    def refresh_open(self) -> list[str]:
        """Update in place every card whose run has moved since it was drawn."""
        moved = []
        for doc in self.repo.open_runs():
            try:
                thread = RunThread.model_validate(doc)
                run = self.get_run(thread.run_id)
                if run.state == thread.shown_state or not thread.card_activity_id:
                    continue
                card = attachment(run_card(run, self.public_url))
                self.sender.update(thread.conversation, thread.card_activity_id, [card])
                thread.shown_state = run.state.value
                self.repo.upsert(thread.doc())
                moved.append(thread.run_id)
            except Exception as e:  # one conversation's failure is its own
                log.warning("refreshing the card of %s failed: %s", doc.get("run_id"), e)
        return moved

    def announce(self, run_id: str) -> list[DeliveryRecord]:
        """The finished run's result card, posted where the run was asked for, and its
        first card brought up to date. Never raises: the run service calls this as it
        finalizes the run, and a conversation out of reach must not undo that."""
        record = DeliveryRecord(channel="teams-bot", ok=True)
        try:
            thread = RunThread.model_validate(self.repo.get(f"run.{run_id}"))
            run = self.get_run(run_id)
            card = attachment(run_card(run, self.public_url))
            try:
                if thread.card_activity_id and thread.shown_state != run.state:
                    self.sender.update(thread.conversation, thread.card_activity_id, [card])
                    thread.shown_state = run.state.value
                self.sender.send(thread.conversation, [card])
            finally:
                # At most once: a post that failed is logged, not retried (a retry racing
                # a slow success would post the result twice).
                thread.announced = True
                thread.ttl = self.finished_ttl_s  # a finished delivery (core.retention)
                self.repo.upsert(thread.doc())
        except NotFound:
            record = DeliveryRecord(channel="teams-bot", ok=False, error="no stored conversation")
        except Exception as e:  # recorded, never raised into the run's finalization
            log.warning("posting the result of %s failed: %s", run_id, e)
            record = DeliveryRecord(channel="teams-bot", ok=False, error=f"{type(e).__name__}: {e}")
        return [record]

    # ---- series subscriptions -----------------------------------------------------------

    def subscribe(self, series_key: str, conversation: Conversation, by: str) -> Subscription:
        sub = Subscription(
            id=subscription_id(series_key, conversation),
            series_key=series_key,
            conversation=conversation,
            by=by,
        )
        self.repo.upsert(sub.doc())
        return sub

    def unsubscribe(self, series_key: str, conversation: Conversation) -> bool:
        try:
            self.repo.delete(subscription_id(series_key, conversation))
            return True
        except NotFound:
            return False

    def notify_regression(self, regression: Regression) -> list[DeliveryRecord]:
        records = []
        for doc in self.repo.subscribers(regression.series_key):
            sub = Subscription.model_validate(doc)
            record = DeliveryRecord(channel="teams-bot", ok=True)
            try:
                message = teams_card(regression.doc(), base_url=self.public_url)
                self.sender.send(sub.conversation, [_attached(a) for a in message.attachments])
            except Exception as e:  # the other subscribers still hear of it
                log.warning("posting regression %s failed: %s", regression.id, e)
                record = DeliveryRecord(
                    channel="teams-bot", ok=False, error=f"{type(e).__name__}: {e}"
                )
            records.append(record)
        return records


class ChatNotifier:
    """The webhooks' notifier, and the Teams bot's subscribers beside it."""

    def __init__(self, webhooks: Notifier, threads: Callable[[], Threads | None]) -> None:
        self.webhooks = webhooks
        self.threads = threads

    def notify(self, regression: Regression) -> list[DeliveryRecord]:
        sent = self.webhooks.notify(regression)
        threads = self.threads()
        if threads is not None:
            try:
                sent += threads.notify_regression(regression)
            except BenchError as e:  # the database: the webhooks were told all the same
                sent.append(DeliveryRecord(channel="teams-bot", ok=False, error=str(e)))
        return sent

    def post_result(
        self, door: str, teams_message: TeamsMessage, payload: RunFinished
    ) -> list[DeliveryRecord]:
        return self.webhooks.post_result(door, teams_message, payload)


def _attached(a: MessageAttachment) -> CardAttachment:
    """A Teams message's card as the bot attaches it (no ``contentUrl``)."""
    return CardAttachment(content=a.content)
