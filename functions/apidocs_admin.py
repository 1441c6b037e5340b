"""OpenAPI models of the admin's routes (functions/admin_api.py): deleting a run or a series
whole, and what ``benchctl export-all`` / ``import-all`` move between deployments."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

Document = dict[str, Any]


class Removed(BaseModel):
    removed: dict[str, int] = Field(
        description="documents deleted per container (runs, items, results, aggregates, "
        "series, regressions) and artifacts"
    )


class ExportedRuns(BaseModel):
    runs: list[str] = Field(description="finished runs, newest first: each one's bundle moves")
    unfinished: list[str] = Field(description="runs of this page still going: not moved")
    continuation: str | None = Field(description="the next page's token; null on the last")


class ArtifactName(BaseModel):
    owner: str
    name: str
    bytes: int


class RunBundle(BaseModel):
    run: Document
    items: list[Document] = Field(description="its steps and work items")
    results: list[Document]
    aggregates: list[Document]
    series: list[Document] = Field(description="its points in every series")
    regressions: list[Document] = Field(description="those first seen on it")
    artifacts: list[ArtifactName] = Field(description="read each from .../artifacts/...")


class ExportedSchedules(BaseModel):
    schedules: list[Document]


class ImportedDocument(BaseModel):
    container: Literal["items", "results", "aggregates", "series", "regressions"]
    doc: Document = Field(description="as exported: one of the run's own documents")


class RunImport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    run: Document = Field(description="the run's document as exported (a finished run)")
    documents: list[ImportedDocument] = Field(default_factory=list, max_length=500)
    commit: bool = Field(description="write the run's own document after these: the last batch")


class ScheduleImport(BaseModel):
    model_config = ConfigDict(extra="forbid")
    schedules: list[Document] = Field(max_length=500)


class Imported(BaseModel):
    created: int
    existing: int = Field(description="already there (an import asked again creates nothing)")


class ArtifactImported(BaseModel):
    stored: Literal[True]
    bytes: int
