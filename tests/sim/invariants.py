"""What must hold after every step of the simulation (issue 24.6), read from the stored
documents directly (not through the fault hook)."""

from __future__ import annotations

from collections import defaultdict

from core.models.document import StoredJson
from core.models.locks import TargetLock
from core.models.state import FINISHED_RUN, HELD, ItemState
from core.models.stored import Item, Run
from core.runs.admission import holder_done, lock_keys
from tests.sim.world import World


class Violation(AssertionError):
    """An invariant broken: ``kind`` names which (the shrinker keeps it)."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind


HELD_STATES = {s.value for s in HELD}
FINISHED_STATES = {s.value for s in FINISHED_RUN}


def runs(world: World) -> list[Run]:
    return [Run.model_validate(d) for d in world.store.table["runs"].docs.values()]


def items(world: World) -> list[Item]:
    docs = world.store.table["items"].docs.values()
    return [Item.model_validate(d) for d in docs if d.get("kind", "item") == "item"]


def locks(world: World) -> list[TargetLock]:
    return [TargetLock.model_validate(d) for d in world.store.table["targets"].docs.values()]


def check(world: World) -> None:
    """After every step. Read from the raw documents (validating every document after
    every step would cost more than the simulation itself)."""
    all_runs = {d["id"]: d for d in world.store.table["runs"].docs.values()}
    docs = list(world.store.table["items"].docs.values())
    all_items = [d for d in docs if d.get("kind", "item") == "item"]
    failed_steps = [d["id"] for d in docs if d.get("kind") == "step" and d.get("failed_reason")]
    _one_run_per_target(all_runs, all_items)
    _results_from_holders(world, all_items)
    _failed_steps_have_no_aggregate(world, failed_steps)
    _refused_posts_never_run(world, all_items)
    _no_internal_errors(all_runs)


def _one_run_per_target(all_runs: dict[str, StoredJson], all_items: list[StoredJson]) -> None:
    """A target is used by one run at a time: of the runs whose clients are ready to start
    or running (I/O imminent or going on), at most one per target."""
    using: dict[str, set[str]] = defaultdict(set)
    for item in all_items:
        if item["state"] in (ItemState.READY, ItemState.RUNNING):
            run = all_runs[item["run_id"]]
            for key in lock_keys(run["pool"], run["targets"]):
                using[key].add(run["id"])
    for key, ids in using.items():
        if len(ids) > 1:
            raise Violation("two runs on one target", f"{key}: {sorted(ids)}")


def _results_from_holders(world: World, all_items: list[StoredJson]) -> None:
    """At most one result per item (its id is the item's) and only from the agent holding
    the item when it was stored."""
    for item_id, agent, created, holder in world.results_stored:
        if created and holder != agent:
            raise Violation("a result not from the holder", f"{item_id} by {agent} ({holder})")
    by_id = {i["id"]: i for i in all_items}
    for doc in world.store.table["results"].docs.values():
        item = by_id.get(doc["item_id"])
        if item is None or item.get("agent_id") != doc["agent_id"]:
            holder = item.get("agent_id") if item else None
            raise Violation(
                "a result not from the holder",
                f"{doc['item_id']}: stored from {doc['agent_id']}, the item says {holder}",
            )


def _failed_steps_have_no_aggregate(world: World, failed_steps: list[str]) -> None:
    aggregates = world.store.table["aggregates"].docs
    for step_id in failed_steps:
        if (step_id.rsplit(".", 1)[0], step_id) in aggregates:
            raise Violation("a failed step with an aggregate", step_id)


def _refused_posts_never_run(world: World, all_items: list[StoredJson]) -> None:
    """A run every POST of which was answered with an error is never delivered."""
    answers: dict[str, set[str]] = defaultdict(set)
    for post in world.posts:
        if post.run_id is not None:
            answers[post.run_id].add(post.outcome)
    delivered = {i["run_id"] for i in all_items}
    for run_id, outcomes in answers.items():
        if outcomes <= {"refused", "unavailable"} and run_id in delivered:
            raise Violation("a refused POST ran", f"{run_id}: answered {sorted(outcomes)}")


def _no_internal_errors(all_runs: dict[str, StoredJson]) -> None:
    """The timer swallows a bug to go on with the other runs: here, any is a finding."""
    for run in all_runs.values():
        if run.get("internal_errors"):
            raise Violation("an internal error", f"{run['id']}: {run.get('error')}")


def settled(world: World) -> None:
    """Once faults stop and agents do their work, every run has ended and let go of its
    targets."""
    open_runs = [r for r in runs(world) if not (r.finished and r.state in FINISHED_RUN)]
    if open_runs:
        detail = ", ".join(f"{r.id} {r.state} {r.delivery.state}" for r in open_runs[:5])
        raise Violation("a run never ended", detail)
    held = [i.id for i in items(world) if i.state in HELD]
    if held:
        raise Violation("an item still held", ", ".join(held[:5]))
    by_id = {r.id: r for r in runs(world)}
    for lock in locks(world):
        holder = by_id.get(lock.run_id) if lock.run_id else None
        if holder is not None and not holder_done(holder):
            raise Violation("a target never released", f"{lock.id} by {lock.run_id}")
