"""Domain errors shared by the core, the adapters and the API."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    field: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message}


class BenchError(Exception):
    """Base of the project's errors."""


class ValidationFailed(BenchError):
    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in errors))
        self.errors = errors


class Forbidden(BenchError):
    """The caller may not do this (HTTP 403); errors name the field that crossed a limit."""

    def __init__(self, errors: list[FieldError]) -> None:
        super().__init__("; ".join(f"{e.field}: {e.message}" for e in errors))
        self.errors = errors


class NotFound(BenchError):
    """HTTP 404. ``field``: what named the missing thing (the path, or a parameter)."""

    def __init__(self, message: str = "", field: str = "(path)") -> None:
        super().__init__(message)
        self.field = field


class Conflict(BenchError):
    pass


class StoreUnavailable(BenchError):
    """A backing service (queue, database) failed after the SDK's own retries. ``service``
    names it for the caller (the details stay in the log)."""

    def __init__(self, message: str, service: str = "a backing service") -> None:
        super().__init__(message)
        self.service = service


class PartialSend(StoreUnavailable):
    """Some of a step's messages did not go out (``unsent``, their item ids); the others
    did: a sender tries again with only these."""

    def __init__(self, message: str, unsent: list[str]) -> None:
        super().__init__(message, "the queue service")
        self.unsent = unsent


class TooLarge(BenchError):
    """Over a limit the backing service enforces (a 2 MB document, an artifact's size):
    HTTP 413, nothing written."""


class LeaseLost(BenchError):
    """A queue message's pop receipt is no longer valid: another consumer may hold it now."""
