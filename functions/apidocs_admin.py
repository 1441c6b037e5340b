"""OpenAPI models of the admin's routes (functions/admin_api.py): deleting a run or a series
whole, and what ``benchctl export-all`` / ``import-all`` move between deployments."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

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
    container: Literal[
        "schedules", "series", "regressions", "items", "results", "aggregates", "runs"
    ]
    doc: Document = Field(description="as exported: an id, its partition key, its fields")


class ImportBody(BaseModel):
    documents: list[ImportedDocument] = Field(max_length=500)  # archive.MAX_IMPORT_DOCUMENTS


class Imported(BaseModel):
    created: int
    existing: int = Field(description="already there (an import asked again creates nothing)")


class ArtifactImported(BaseModel):
    stored: Literal[True]
    bytes: int
