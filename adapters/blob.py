"""Blob Storage adapter: the artifacts container (timelines, engine outputs, logs).

Blob names are ``runs/<run id>/<owner>/<name>``, owner being an item id or a step id, so a
retried upload overwrites the same blob and a run's artifacts list under one prefix; raw
output (core.retention.RAW_ARTIFACTS) is under ``raw/<run id>/<owner>/<name>``, the prefix
Blob lifecycle management cools and deletes (bicep/modules/storage.bicep). In
Azure the app reaches the account by identity (Storage Blob Data Contributor on this
container only); locally Azurite's blob service with its published development key.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import BlobClient, BlobServiceClient, ContainerClient

from adapters import counting
from adapters.storage import bounded_client_options, storage_credential
from core.errors import NotFound, StoreUnavailable, TooLarge
from core.retention import RAW_ARTIFACTS

log = logging.getLogger(__name__)
CONTAINER = "artifacts"
MAX_ARTIFACT_BYTES = 256 << 20  # far above a 24 h run's compressed timeline
KEPT, RAW = "runs/", "raw/"


def blob_name(run_id: str, owner: str, name: str) -> str:
    return f"{RAW if name in RAW_ARTIFACTS else KEPT}{run_id}/{owner}/{name}"


@dataclass(frozen=True)
class StoredBlob:
    path: str  # the blob's name in the container
    run_id: str
    owner: str
    name: str
    size: int
    modified_s: float  # last written, Unix seconds
    tier: str | None


class BlobArtifacts:
    def __init__(self, container: ContainerClient) -> None:
        self._container = container

    @classmethod
    def connect(
        cls, blob_uri: str, *, local_emulators: bool, client_id: str | None = None
    ) -> BlobArtifacts:
        credential = storage_credential(
            blob_uri, local_emulators=local_emulators, client_id=client_id
        )
        service = BlobServiceClient(
            blob_uri, credential=credential, **bounded_client_options(), **counting.hooks("blob")
        )
        return cls(service.get_container_client(CONTAINER))

    def ensure_container(self) -> None:
        """Create the container (locally; in Azure the Bicep creates it)."""
        try:
            self._container.create_container()
        except ResourceExistsError:
            pass
        except AzureError as e:
            raise StoreUnavailable(
                f"cannot create blob container {CONTAINER}: {e}", "Blob Storage"
            ) from e

    def put(self, run_id: str, owner: str, name: str, data: bytes) -> None:
        if len(data) > MAX_ARTIFACT_BYTES:
            raise TooLarge(
                f"artifact {name} is {len(data):,} bytes; at most {MAX_ARTIFACT_BYTES:,}"
            )
        try:
            self._container.upload_blob(blob_name(run_id, owner, name), data, overwrite=True)
        except AzureError as e:
            raise StoreUnavailable(
                f"cannot store artifact {name} of {owner}: {e}", "Blob Storage"
            ) from e

    def create(self, run_id: str, owner: str, name: str, data: bytes) -> bool:
        """Store ``data`` unless the blob exists (If-None-Match: *): False when it did."""
        try:
            self._container.upload_blob(blob_name(run_id, owner, name), data, overwrite=False)
            return True
        except ResourceExistsError:
            return False
        except AzureError as e:
            raise StoreUnavailable(
                f"cannot store artifact {name} of {owner}: {e}", "Blob Storage"
            ) from e

    def get(self, run_id: str, owner: str, name: str) -> bytes:
        try:
            return self._container.download_blob(blob_name(run_id, owner, name)).readall()
        except ResourceNotFoundError:
            if name not in RAW_ARTIFACTS:
                raise NotFound(f"artifact {name} of {owner}") from None
        except AzureError as e:
            raise StoreUnavailable(
                f"cannot read artifact {name} of {owner}: {e}", "Blob Storage"
            ) from e
        try:  # stored before raw output had a prefix of its own
            return self._container.download_blob(f"{KEPT}{run_id}/{owner}/{name}").readall()
        except ResourceNotFoundError:
            raise NotFound(f"artifact {name} of {owner}") from None
        except AzureError as e:
            raise StoreUnavailable(
                f"cannot read artifact {name} of {owner}: {e}", "Blob Storage"
            ) from e

    def size(self, run_id: str, owner: str, name: str) -> int:
        try:
            props = self._container.get_blob_client(blob_name(run_id, owner, name))
            return int(props.get_blob_properties().size)
        except ResourceNotFoundError:
            raise NotFound(f"artifact {name} of {owner}") from None
        except AzureError as e:
            raise StoreUnavailable(
                f"cannot read artifact {name} of {owner}: {e}", "Blob Storage"
            ) from e

    # ---- whole runs, and retention ------------------------------------------------------

    def listed(self, prefix: str) -> list[StoredBlob]:
        """Every artifact under ``prefix`` (``runs/``, ``raw/``, or one run's: ``raw/<id>/``)."""
        try:
            found = list(self._container.list_blobs(name_starts_with=prefix))
        except AzureError as e:
            raise StoreUnavailable(f"cannot list artifacts: {e}", "Blob Storage") from e
        out = []
        for b in found:
            parts = str(b.name).split("/")
            if len(parts) != 4:
                continue  # not an artifact's name
            modified = b.last_modified.timestamp() if b.last_modified else 0.0
            tier = str(b.blob_tier) if b.blob_tier else None
            out.append(
                StoredBlob(
                    str(b.name), parts[1], parts[2], parts[3], int(b.size or 0), modified, tier
                )
            )
        return out

    def of_run(self, run_id: str) -> list[StoredBlob]:
        return self.listed(f"{KEPT}{run_id}/") + self.listed(f"{RAW}{run_id}/")

    def delete(self, blob: StoredBlob) -> None:
        self._each(blob.path, lambda b: b.delete_blob())

    def cool(self, blob: StoredBlob) -> None:
        self._each(blob.path, lambda b: b.set_standard_blob_tier("Cool"))

    def _each(self, blob: str, act: Callable[[BlobClient], object]) -> None:
        try:
            act(self._container.get_blob_client(blob))
        except ResourceNotFoundError:
            pass  # gone already: what was asked
        except AzureError as e:
            raise StoreUnavailable(f"cannot change artifact {blob}: {e}", "Blob Storage") from e
