"""What ``benchctl export-all`` and ``import-all`` move between deployments (adapters/archive.py
reads and writes them, functions/admin_api.py serves them): a finished run's bundle, the
documents of an import, what an import did, and the export file's manifest.

The documents themselves stay as stored (``StoredJson``): they move byte for byte, and the
import checks each with the model that reads it (a run, a step or item, a schedule)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.models.document import StoredJson

# The containers of a run's own documents, besides its own (``runs``).
OwnedContainer = Literal["items", "results", "aggregates", "series", "regressions"]


class ArtifactName(BaseModel):
    owner: str
    name: str
    bytes: int


class ImportedDocument(BaseModel):
    model_config = ConfigDict(extra="forbid")
    container: OwnedContainer
    doc: StoredJson = Field(description="as exported: one of the run's own documents")


class RunBundle(BaseModel):
    """A finished run with everything it owns: documents as stored, artifacts by name."""

    run: StoredJson
    items: list[StoredJson] = Field(description="its steps and work items")
    results: list[StoredJson]
    aggregates: list[StoredJson]
    series: list[StoredJson] = Field(description="its points in every series")
    regressions: list[StoredJson] = Field(description="those first seen on it")
    artifacts: list[ArtifactName] = Field(description="read each from .../artifacts/...")

    def documents(self) -> list[ImportedDocument]:
        """What the run owns, in the order an import writes it (the run's own document goes
        after all of them: the commit point, as at intake)."""
        parts: tuple[tuple[OwnedContainer, list[StoredJson]], ...] = (
            ("items", self.items),
            ("results", self.results),
            ("aggregates", self.aggregates),
            ("series", self.series),
            ("regressions", self.regressions),
        )
        return [ImportedDocument(container=c, doc=doc) for c, docs in parts for doc in docs]


class Imported(BaseModel):
    created: int = 0
    existing: int = Field(0, description="already there (an import asked again creates nothing)")

    def add(self, other: Imported) -> None:
        self.created += other.created
        self.existing += other.existing


class ExportManifest(BaseModel):
    """``manifest.json``, the export file's last member: what it holds and where from."""

    format: Literal["benchsvc-export"]
    version: Literal[1]
    source: str = Field(description="the API it was exported from")
    exported_at: str
    schedules: int
    runs: int
    artifacts: int
    bytes: int
    unfinished: int = Field(description="runs left out because they were still going")


class Removed(BaseModel):
    removed: dict[str, int] = Field(
        description="documents deleted per container (runs, items, results, aggregates, "
        "series, regressions) and artifacts"
    )


class ExportedRuns(BaseModel):
    runs: list[str] = Field(description="finished runs, newest first: each one's bundle moves")
    unfinished: list[str] = Field(description="runs of this page still going: not moved")
    continuation: str | None = Field(description="the next page's token; null on the last")


class ExportedSchedules(BaseModel):
    schedules: list[StoredJson]


# POST /api/admin/import/runs/{run_id}'s body as documented; adapters/archive.py checks what
# is sent, document by document, naming each by its place. (No docstring: the OpenAPI
# document would carry it.)
class RunImport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run: StoredJson = Field(description="the run's document as exported (a finished run)")
    documents: list[ImportedDocument] = Field(default_factory=list, max_length=500)
    commit: bool = Field(description="write the run's own document after these: the last batch")


# POST /api/admin/import/schedules' body as documented (checked as RunImport's is).
class ScheduleImport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schedules: list[StoredJson] = Field(max_length=500)


class ArtifactImported(BaseModel):
    stored: Literal[True]
    bytes: int
