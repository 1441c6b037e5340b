"""Blob Storage adapter: the artifacts container (timelines, engine outputs, logs).

Blob names are ``runs/<run id>/<owner>/<name>``, owner being an item id or a step id, so a
retried upload overwrites the same blob and a run's artifacts list under one prefix. In
Azure the app reaches the account by identity (Storage Blob Data Contributor on this
container only); locally Azurite's blob service with its published development key.
"""

from __future__ import annotations

import logging

from azure.core.exceptions import AzureError, ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import BlobServiceClient, ContainerClient

from adapters.storage import bounded_client_options, storage_credential
from core.errors import NotFound, StoreUnavailable, TooLarge

log = logging.getLogger(__name__)
CONTAINER = "artifacts"
MAX_ARTIFACT_BYTES = 256 << 20  # far above a 24 h run's compressed timeline


def blob_name(run_id: str, owner: str, name: str) -> str:
    return f"runs/{run_id}/{owner}/{name}"


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
        service = BlobServiceClient(blob_uri, credential=credential, **bounded_client_options())
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

    def get(self, run_id: str, owner: str, name: str) -> bytes:
        try:
            return self._container.download_blob(blob_name(run_id, owner, name)).readall()
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
