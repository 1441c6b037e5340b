"""A deployment's runs, series and schedules as documents and artifacts, for what works on
them whole: an admin deleting a run or a series (everything it owns goes), and
``benchctl export-all`` / ``import-all`` moving them to another deployment.

What a run owns, by container: its document (``runs``), its steps and items (``items``),
results and aggregates (partition ``/run_id``), its series points (``series``, by
``run_id``), the regressions first seen on it (``regressions``, core.retention), the Teams
thread it was asked from (``conversations``, ``run.<id>``; not exported: it names a chat of
this deployment's bot), and its artifacts (Blob Storage, ``runs/<id>/`` and ``raw/<id>/``).
A series owns its points and regressions and the runs it holds
(core.retention.runs_of_series).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from typing import get_args

from pydantic import BaseModel, ValidationError

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from core.errors import Conflict, FieldError, NotFound, ValidationFailed
from core.models.archive import (
    ArtifactName,
    Imported,
    ImportedDocument,
    OwnedContainer,
    RunBundle,
)
from core.models.barrier_shard import BarrierShard, ClaimMark
from core.models.document import StoredJson
from core.models.schedule import StoredSchedule
from core.models.state import FINISHED_RUN
from core.models.stored import Item, Run, Step
from core.monitoring.schedules import Schedule
from core.retention import owned_regressions, runs_of_series
from core.validation import parse

log = logging.getLogger(__name__)
RUN_PARTITIONED = ("items", "results", "aggregates")  # partition /run_id
MAX_IMPORT_DOCUMENTS = 500
SCHEDULE_ID = r"^sch-[0-9a-f]{16}$"


def _plain(doc: StoredJson) -> StoredJson:
    return {k: v for k, v in doc.items() if not k.startswith("_")}


def settled(run: Run) -> bool:
    """Finished with nothing left for the timer to do (its aggregates stored)."""
    return run.state in FINISHED_RUN and run.finished and run.due_ms is None


class Archive:
    def __init__(self, store: CosmosStore, artifacts: BlobArtifacts) -> None:
        self.store = store
        self.artifacts = artifacts

    def _docs(
        self, container: str, where: str, value: str, pk: str | None = None
    ) -> list[StoredJson]:
        return self.store.container(container).query(
            f"SELECT * FROM c WHERE {where}",  # noqa: S608 (fixed clauses only)
            [{"name": "@v", "value": value}],
            pk=pk,
        )

    def _settled_run(self, run_id: str) -> Run:
        run = self.store.runs.get(run_id)
        if not settled(run):
            raise Conflict(f"run {run_id} is {run.state}: it must have finished (cancel it first)")
        return run

    # ---- reading whole runs ---------------------------------------------------------------

    def bundle(self, run_id: str) -> RunBundle:
        """A finished run with everything it owns (documents as stored, artifacts by name)."""
        self._settled_run(run_id)

        def owned(name: str, field: str = "run_id", pk: str | None = run_id) -> list[StoredJson]:
            return [_plain(d) for d in self._docs(name, f"c.{field} = @v", run_id, pk)]

        return RunBundle(
            run=_plain(self.store.container("runs").read(run_id, run_id)),
            items=owned("items"),
            results=owned("results"),
            aggregates=owned("aggregates"),
            series=owned("series", pk=None),
            regressions=owned("regressions", "first_run_id", None),
            artifacts=[
                ArtifactName(owner=b.owner, name=b.name, bytes=b.size)
                for b in self.artifacts.of_run(run_id)
            ],
        )

    def schedules(self) -> list[StoredJson]:
        return [s.doc() for s in self.store.schedules.all()]

    # ---- an admin's deletes -------------------------------------------------------------

    def purge_run(self, run_id: str) -> dict[str, int]:
        """Delete a finished run and everything it owns; the run's document goes last, so a
        delete cut short is finished by asking again."""
        self._settled_run(run_id)
        removed: Counter[str] = Counter()
        for point in self._docs("series", "c.run_id = @v", run_id):
            self._delete("series", point, removed)
        for reg in owned_regressions(
            self._docs("regressions", "c.first_run_id = @v", run_id), run_id
        ):
            self._delete("regressions", dict(reg), removed)
        for name in RUN_PARTITIONED:
            for doc in self._docs(name, "c.run_id = @v", run_id, run_id):
                self._delete(name, doc, removed)
        self._delete("conversations", {"id": f"run.{run_id}"}, removed)  # core.chat.threads
        for blob in self.artifacts.of_run(run_id):
            self.artifacts.delete(blob)
            removed["artifacts"] += 1
        self._delete("runs", {"id": run_id}, removed)
        return dict(removed)

    def purge_series(self, series_key: str) -> dict[str, int]:
        """Delete a series: every run it holds (whole), then its points and regressions."""
        points = self._docs("series", "c.series_key = @v", series_key, series_key)
        regressions = self._docs("regressions", "c.series_key = @v", series_key, series_key)
        if not points and not regressions:
            raise NotFound(f"series {series_key}")
        removed: Counter[str] = Counter()
        for run_id in runs_of_series(points):
            try:
                removed.update(self.purge_run(run_id))
            except NotFound:
                continue  # a point left by a run deleted before: its own point goes below
        for name in ("series", "regressions"):
            for doc in self._docs(name, "c.series_key = @v", series_key, series_key):
                self._delete(name, doc, removed)
        return dict(removed)

    def _delete(self, container: str, doc: StoredJson, removed: Counter[str]) -> None:
        c = self.store.container(container)
        try:
            c.delete(str(doc["id"]), str(doc[self.store.partition_field(container)]))
            removed[container] += 1
        except NotFound:
            pass  # gone already: what was asked

    # ---- import -------------------------------------------------------------------------

    def import_run(
        self, run_id: str, run: object, documents: list[object], *, commit: bool
    ) -> Imported:
        """Create what a run owns that does not exist yet, then, with ``commit``, the run's
        own document (the commit point: benchctl sends a run in batches, the last one
        commits). Everything is checked before anything is written: the run is a finished
        run's document, and every document is one of the run's own."""
        checked_run = self._checked_run(run_id, run)
        checked = [self._owned(run_id, i, entry) for i, entry in enumerate(documents)]
        writes: list[tuple[str, StoredJson]] = [(d.container, d.doc) for d in checked]
        return self._create(writes + ([("runs", checked_run)] if commit else []))

    def _create(self, writes: list[tuple[str, StoredJson]]) -> Imported:
        """Create each document that does not exist yet."""
        counts = Imported()
        for container, doc in writes:
            if self.store.container(container).create_once(doc):
                counts.created += 1
            else:
                counts.existing += 1
        return counts

    def import_schedules(self, schedules: list[object]) -> Imported:
        """Schedules as exported (their ids, times and last runs kept), each checked as at
        creation: its cron, owner and run request template."""
        checked = [_checked_schedule(i, doc) for i, doc in enumerate(schedules)]
        return self._create([("schedules", doc) for doc in checked])

    def _checked_run(self, run_id: str, doc: object) -> StoredJson:
        if not isinstance(doc, dict):
            raise ValidationFailed([FieldError("run", "must be an object")])
        plain = _plain(doc)
        try:
            run = Run.model_validate(plain)
        except ValueError as e:
            raise ValidationFailed([FieldError("run", _first_line(e))]) from None
        if run.id != run_id:
            raise ValidationFailed([FieldError("run.id", f"is not {run_id}")])
        if not settled(run):
            raise ValidationFailed([FieldError("run.state", "only finished runs are imported")])
        return plain

    def _owned(self, run_id: str, i: int, entry: object) -> ImportedDocument:
        where = f"documents.{i}"
        owned = _entry(where, entry)
        container, doc = owned.container, _plain(owned.doc)
        owner_field = OWNED_BY_RUN[container]
        if doc.get(owner_field) != run_id:
            message = f"not one of run {run_id}'s documents"
            raise ValidationFailed([FieldError(f"{where}.doc.{owner_field}", message)])
        pk = self.store.partition_field(container)
        for key in dict.fromkeys(("id", pk)):
            value = doc.get(key)
            if not isinstance(value, str) or not 0 < len(value) <= 255 or "/" in value:
                raise ValidationFailed([FieldError(f"{where}.doc.{key}", "a document id")])
        if container == "items":
            kind = doc.get("kind", "item")  # an item stored before kinds were written
            model = ITEMS_KINDS.get(kind) if isinstance(kind, str) else None
            if model is None:
                known = ", ".join(ITEMS_KINDS)
                raise ValidationFailed([FieldError(f"{where}.doc.kind", f"one of {known}")])
            try:
                model.model_validate(doc)
            except ValueError as e:
                raise ValidationFailed([FieldError(f"{where}.doc", _first_line(e))]) from None
        return ImportedDocument(container=container, doc=doc)


def _entry(where: str, entry: object) -> ImportedDocument:
    """One document of an import: ``{container, doc}``, each error naming its field."""
    if not isinstance(entry, dict) or set(entry) != {"container", "doc"}:
        raise ValidationFailed([FieldError(where, "expected {container, doc}")])
    try:
        return ImportedDocument.model_validate(entry)
    except ValidationError as e:
        if e.errors()[0]["loc"][0] == "container":
            known = ", ".join(get_args(OwnedContainer))
            raise ValidationFailed([FieldError(f"{where}.container", f"one of {known}")]) from None
        raise ValidationFailed([FieldError(f"{where}.doc", "must be an object")]) from None


# The documents of a run in the items container, by their kind: its steps, its items, and
# each step's barrier shards and claim marks (core.runs.barrier).
ITEMS_KINDS: dict[str, type[BaseModel]] = {
    "step": Step,
    "item": Item,
    "barrier": BarrierShard,
    "claim": ClaimMark,
}

# What a run's documents name it by, per container (import checks each belongs to its run).
OWNED_BY_RUN: dict[OwnedContainer, str] = {
    "items": "run_id",
    "results": "run_id",
    "aggregates": "run_id",
    "series": "run_id",
    "regressions": "first_run_id",
}
SCHEDULE_KEPT = ("id", "created_at", "last_fired", "last_run_id", "next_fire")


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0][:300]


def _checked_schedule(i: int, sent: object) -> StoredJson:
    where = f"schedules.{i}"
    if not isinstance(sent, dict):
        raise ValidationFailed([FieldError(where, "must be an object")])
    doc = _plain(sent)
    if not isinstance(doc.get("id"), str) or not re.fullmatch(SCHEDULE_ID, doc["id"]):
        raise ValidationFailed([FieldError(f"{where}.id", "a schedule id (sch-<16 hex>)")])
    fields = {k: v for k, v in doc.items() if k not in SCHEDULE_KEPT}
    try:
        schedule = parse(Schedule, fields)
    except ValidationFailed as e:
        raise ValidationFailed(
            [FieldError(f"{where}.{x.field}", x.message) for x in e.errors]
        ) from None
    try:  # as the scheduler reads it: a schedule without its times would never fire
        stored = StoredSchedule.model_validate({**doc, **schedule.model_dump()})
    except ValidationError as e:
        raise ValidationFailed(
            [FieldError(".".join(map(str, (where, *x["loc"]))), x["msg"]) for x in e.errors()]
        ) from None
    return stored.doc()
