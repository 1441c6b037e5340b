"""A deployment's runs, series and schedules as documents and artifacts, for what works on
them whole: an admin deleting a run or a series (everything it owns goes), and
``benchctl export-all`` / ``import-all`` moving them to another deployment.

What a run owns, by container: its document (``runs``), its steps and items (``items``),
results and aggregates (partition ``/run_id``), its series points (``series``, by
``run_id``), the regressions first seen on it (``regressions``, core.retention), and its
artifacts (Blob Storage, ``runs/<id>/`` and ``raw/<id>/``). A series owns its points and
regressions and the runs it holds (core.retention.runs_of_series).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from adapters.blob import BlobArtifacts
from adapters.cosmos import CosmosStore
from adapters.cosmos.base import Doc
from core.errors import Conflict, FieldError, NotFound, ValidationFailed
from core.retention import owned_regressions, runs_of_series
from core.runs.state import FINISHED_RUN, Item, Run, Step

log = logging.getLogger(__name__)
RUN_PARTITIONED = ("items", "results", "aggregates")  # partition /run_id
# What import-all may write, and in what order within one run (the run document last: the
# commit point, as at intake).
IMPORTED = ("schedules", "series", "regressions", "items", "results", "aggregates", "runs")
MAX_IMPORT_DOCUMENTS = 500


def _plain(doc: Doc) -> Doc:
    return {k: v for k, v in doc.items() if not k.startswith("_")}


def settled(run: Run) -> bool:
    """Finished with nothing left for the timer to do (its aggregates stored)."""
    return run.state in FINISHED_RUN and run.finished and run.due_ms is None


class Archive:
    def __init__(self, store: CosmosStore, artifacts: BlobArtifacts) -> None:
        self.store = store
        self.artifacts = artifacts

    def _docs(self, container: str, where: str, value: str, pk: str | None = None) -> list[Doc]:
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

    def bundle(self, run_id: str) -> dict[str, Any]:
        """A finished run with everything it owns (documents as stored, artifacts by name)."""
        self._settled_run(run_id)
        run = self.store.container("runs").read(run_id, run_id)
        out: dict[str, Any] = {"run": _plain(run)}
        for name in RUN_PARTITIONED:
            out[name] = [_plain(d) for d in self._docs(name, "c.run_id = @v", run_id, run_id)]
        out["series"] = [_plain(d) for d in self._docs("series", "c.run_id = @v", run_id)]
        out["regressions"] = [
            _plain(d) for d in self._docs("regressions", "c.first_run_id = @v", run_id)
        ]
        out["artifacts"] = [
            {"owner": b.owner, "name": b.name, "bytes": b.size}
            for b in self.artifacts.of_run(run_id)
        ]
        return out

    def schedules(self) -> list[Doc]:
        return [_plain(d) for d in self.store.schedules.all()]

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

    def _delete(self, container: str, doc: Doc, removed: Counter[str]) -> None:
        c = self.store.container(container)
        try:
            c.delete(str(doc["id"]), str(doc[c.pk_field]))
            removed[container] += 1
        except NotFound:
            pass  # gone already: what was asked

    # ---- import -------------------------------------------------------------------------

    def put(self, documents: list[Any]) -> dict[str, int]:
        """Create each ``{"container", "doc"}`` that does not exist yet (an import asked
        again creates nothing twice). Every document is checked before any is written."""
        checked = [self._checked(i, entry) for i, entry in enumerate(documents)]
        counts = {"created": 0, "existing": 0}
        for container, doc in checked:
            created = self.store.container(container).create_once(doc)
            counts["created" if created else "existing"] += 1
        return counts

    def _checked(self, i: int, entry: Any) -> tuple[str, Doc]:
        where = f"documents.{i}"
        if not isinstance(entry, dict) or set(entry) != {"container", "doc"}:
            raise ValidationFailed([FieldError(where, "expected {container, doc}")])
        container, doc = entry["container"], entry["doc"]
        if container not in IMPORTED:
            known = ", ".join(IMPORTED)
            raise ValidationFailed([FieldError(f"{where}.container", f"one of {known}")])
        if not isinstance(doc, dict):
            raise ValidationFailed([FieldError(f"{where}.doc", "must be an object")])
        doc = _plain(doc)
        pk = self.store.container(container).pk_field
        for key in dict.fromkeys(("id", pk)):
            value = doc.get(key)
            if not isinstance(value, str) or not 0 < len(value) <= 255 or "/" in value:
                raise ValidationFailed([FieldError(f"{where}.doc.{key}", "a document id")])
        model = {"runs": Run, "items": Step if doc.get("kind") == "step" else Item}.get(container)
        if model is not None:
            try:
                model.model_validate(doc)
            except ValueError as e:
                message = str(e).splitlines()[0][:300]
                raise ValidationFailed([FieldError(f"{where}.doc", message)]) from None
        return container, doc
