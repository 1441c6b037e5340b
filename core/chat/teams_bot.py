"""What the Teams bot does with a message or a card's button (pure, synchronous).

The SDK side (functions/teams_bot.py) hands over who is talking, the text or the action's
verb and data, and sends back the card this returns. Everything is authorised the way its
REST call is: the user's role comes from their Entra app role assignments
(core.chat.identity), the guardrails and ownership rules are the run service's own, and a
refusal says, kindly, which role to ask for.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from core.catalogue import PROFILES
from core.chat.action_cards import (
    attachment,
    baseline_card,
    card,
    execute,
    reply_card,
    run_card,
    run_form,
    text,
    title,
)
from core.chat.bot import Bot, Command, clean_text, parse_command
from core.chat.cards import Reply
from core.chat.identity import (
    ChatUser,
    DirectoryEntry,
    allowed,
    caller_of,
    higher_role_hint,
    refusal,
)
from core.chat.threads import Threads
from core.errors import Conflict, FieldError, Forbidden, NotFound, ValidationFailed
from core.models import RUN_ID_PATTERN
from core.models.cards import AdaptiveCard
from core.models.chat import ActionData
from core.models.chat import StoredConversation as Conversation
from core.models.views import RunView
from core.monitoring.baseline import against_baseline
from core.ports import Store
from core.runs.guardrails import Caller

_SUBSCRIBE = re.compile(r"^(subscribe|unsubscribe)\s+(?P<key>[0-9a-f]{16})$")
_RUN_ID = re.compile(RUN_ID_PATTERN)
SUBSCRIBE_HELP = "subscribe <series> / unsubscribe <series> — its regressions, posted here"


@dataclass
class Outcome:
    card: AdaptiveCard
    started: RunView | None = None  # a run this turn started: its card's conversation is kept


class TeamsBot:
    def __init__(
        self,
        bot: Bot,
        threads: Threads,
        directory: Callable[[str], DirectoryEntry],
        store: Store,
        *,
        default_role: str | None,
    ) -> None:
        self.bot = bot
        self.threads = threads
        self.directory = directory
        self.store = store
        self.default_role = default_role

    @property
    def public_url(self) -> str:
        return self.bot.public_url

    def caller(self, user: ChatUser) -> Caller | None:
        if not user.object_id:
            return None  # not an Entra user (an anonymous or external account)
        return caller_of(user, self.directory(user.object_id), self.default_role)

    # ---- typed commands ---------------------------------------------------------------

    def on_text(
        self, user: ChatUser, raw: str, request_id: str, conversation: Conversation
    ) -> Outcome:
        command = parse_command(raw)
        words = clean_text(raw)
        if m := _SUBSCRIBE.match(words):
            return self.on_action(user, m[1], ActionData(series=m["key"]), request_id, conversation)
        if command.verb == "help" and words == "run":
            return Outcome(self._form())  # "run" alone: choose from lists
        caller = self.caller(user)
        if command.verb == "help":
            reply = self.bot.answer(command, caller or _NOBODY, request_id)
            reply.lines.append(SUBSCRIBE_HELP)
            if caller is None:
                reply.lines.insert(0, refusal(user, None, "run"))
            return Outcome(reply_card(reply, actions=[execute("Start a run…", "form")]))
        if not allowed(caller, command.verb):
            return Outcome(_refused(refusal(user, caller, command.verb)))
        assert caller is not None
        return self._command(command, caller, user, request_id)

    def _command(self, command: Command, caller: Caller, user: ChatUser, rid: str) -> Outcome:
        try:
            if command.verb == "status":
                return Outcome(run_card(self.bot.runs.get_run(command.args.run), self.public_url))
            if command.verb == "run":
                return self._started(self.bot.answer(command, caller, rid), caller)
            if command.verb == "cancel":
                run = self.bot.cancel(command.args.run, caller)
                return Outcome(run_card(run, self.public_url, note="cancel requested"))
        except Forbidden as e:
            return Outcome(self._guardrail(caller, e.errors))
        except ValidationFailed as e:
            return Outcome(self._guardrail(caller, e.errors, heading="Not valid"))
        except NotFound as e:
            return Outcome(_refused(f"not found: {e}", heading="Not found"))
        except Conflict as e:
            return Outcome(_refused(str(e), heading="Not done"))
        return Outcome(reply_card(self.bot.answer(command, caller, rid)))

    def _started(self, reply: Reply, caller: Caller) -> Outcome:
        if not reply.ok:
            hint = higher_role_hint(caller, _errors(reply))
            if hint:
                reply.lines.append(hint)
            return Outcome(reply_card(reply))
        run = self.bot.runs.get_run(str(reply.data["run_id"]))
        note = reply.lines[-1] if len(reply.lines) > 1 else "I'll post the result here"
        return Outcome(run_card(run, self.public_url, note=note), started=run)

    # ---- card actions (Action.Execute) ------------------------------------------------

    def on_action(
        self,
        user: ChatUser,
        verb: str,
        data: ActionData,
        request_id: str,
        conversation: Conversation,
    ) -> Outcome:
        if verb == "form":
            return Outcome(self._form())
        caller = self.caller(user)
        action = "status" if verb in ("refresh", "compare") else verb
        if not allowed(caller, action):
            return Outcome(_refused(refusal(user, caller, action)))
        assert caller is not None
        try:
            return self._act(verb, data, caller, request_id, conversation)
        except Forbidden as e:
            return Outcome(self._guardrail(caller, e.errors))
        except ValidationFailed as e:
            return Outcome(self._guardrail(caller, e.errors, heading="Not valid"))
        except NotFound as e:
            return Outcome(_refused(f"not found: {e}", heading="Not found"))
        except Conflict as e:
            return Outcome(_refused(str(e), heading="Not done"))

    def _act(
        self, verb: str, data: ActionData, caller: Caller, rid: str, conversation: Conversation
    ) -> Outcome:
        if verb == "run":
            command = parse_command(_run_text(data))
            if command.verb != "run":
                return Outcome(self._form(problem=command.problem or "choose a profile and target"))
            return self._started(self.bot.answer(command, caller, rid), caller)
        if verb in ("subscribe", "unsubscribe"):
            return Outcome(self._subscription(verb, data.series, caller, conversation))
        run_id = data.run_id
        if not _RUN_ID.fullmatch(run_id):
            raise ValidationFailed([FieldError("run_id", "not a run id")])
        if verb == "refresh":
            return Outcome(run_card(self.bot.runs.get_run(run_id), self.public_url))
        if verb == "cancel":
            run = self.bot.cancel(run_id, caller)
            return Outcome(run_card(run, self.public_url, note="cancel requested"))
        if verb == "rerun":
            return self._rerun(self.bot.runs.get_run(run_id), caller, rid)
        if verb == "compare":
            found = against_baseline(self.store, self.bot.runs.get_run(run_id))
            return Outcome(baseline_card(run_id, found, self.public_url))
        raise ValidationFailed([FieldError("verb", f"unknown action {verb!r}")])

    def _rerun(self, run: RunView, caller: Caller, rid: str) -> Outcome:
        """The same request again (as POST /api/runs with it), under the caller's role."""
        tags = {**run.request.tags, "door": caller.door}
        body = run.request.model_copy(update={"tags": tags}).model_dump(mode="json")
        new, _ = self.bot.runs.submit(body, f"{caller.door}:{rid}", caller)
        started = self.bot.runs.get_run(new.id)
        note = f"rerun of {run.id}: I'll post the result here"
        return Outcome(run_card(started, self.public_url, note=note), started=started)

    def _subscription(
        self, verb: str, key: str, caller: Caller, conversation: Conversation
    ) -> AdaptiveCard:
        if not re.fullmatch(r"[0-9a-f]{16}", key):
            raise ValidationFailed([FieldError("series", "not a series key")])
        if verb == "subscribe":
            self.threads.subscribe(key, conversation, caller.name)
            body = [title("Subscribed"), text(f"Regressions of series {key} will be posted here.")]
            return card(body, [execute("Unsubscribe", "unsubscribe", series=key)])
        gone = self.threads.unsubscribe(key, conversation)
        said = "No more regressions of" if gone else "This conversation was not subscribed to"
        return card([title("Unsubscribed"), text(f"{said} series {key}.")])

    def _form(self, problem: str | None = None) -> AdaptiveCard:
        profiles = [(p.name, p.title) for p in PROFILES]
        targets = [
            (t.alias, f"{t.pool}, {'read-only' if t.read_only else 'read-write'}")
            for t in self.bot.targets
        ]
        return run_form(profiles, targets, problem=problem)

    def _guardrail(
        self, caller: Caller, errors: list[FieldError], heading: str = "Not allowed"
    ) -> AdaptiveCard:
        lines = [f"{e.field}: {e.message}" for e in errors]
        hint = higher_role_hint(caller, errors)
        return _refused("\n".join(lines + ([hint] if hint else [])), heading)


_NOBODY = Caller(name="nobody", role="reader")


def _run_text(data: ActionData) -> str:
    """A form's choices as the typed command, so both pass the same checks."""
    text_ = f"run {data.profile} on {data.target}"
    if (data.clients or "").strip():
        text_ += f" with {data.clients} clients"
    if (data.runtime or "").strip():
        text_ += f" for {data.runtime}s"
    return text_


def _errors(reply: Reply) -> list[FieldError]:
    found = reply.data.get("errors")
    listed = found if isinstance(found, list) else []
    return [FieldError(str(e["field"]), str(e["message"])) for e in listed if isinstance(e, dict)]


def _refused(message: str, heading: str = "Not allowed") -> AdaptiveCard:
    return card([title(heading, "Attention"), *(text(line) for line in message.split("\n"))])


__all__ = ["Outcome", "TeamsBot", "attachment"]
