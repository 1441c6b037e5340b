"""OpenAPI models of the admin's routes (functions/admin_api.py): deleting a run or a series
whole, and what ``benchctl export-all`` / ``import-all`` move between deployments."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from core.models.archive import ArtifactName, Imported, ImportedDocument, RunBundle
from core.models.document import StoredJson

__all__ = ["ArtifactName", "Imported", "ImportedDocument", "RunBundle"]


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


class RunImport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run: StoredJson = Field(description="the run's document as exported (a finished run)")
    documents: list[ImportedDocument] = Field(default_factory=list, max_length=500)
    commit: bool = Field(description="write the run's own document after these: the last batch")


class ScheduleImport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schedules: list[StoredJson] = Field(max_length=500)


class ArtifactImported(BaseModel):
    stored: Literal[True]
    bytes: int
