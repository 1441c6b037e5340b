"""A blob lease that elects which API instance runs the local stack's timers.

In Azure the Functions host elects the instance that runs a timer trigger with a blob lease
of its own (in the host's storage account): nothing here runs there. The local stack has no
host, so when it runs several API instances (``benchctl local up --api-instances N``) each
instance's timer loop asks this lease first, and only its holder ticks. A holder that dies
stops renewing; the lease expires after ``duration_s`` and the next instance to ask takes it.
Locally Azurite's blob service with its published development key."""

from __future__ import annotations

import logging
import uuid

from azure.core.exceptions import AzureError, HttpResponseError, ResourceExistsError
from azure.storage.blob import BlobLeaseClient, BlobServiceClient, ContainerClient

from adapters.storage import bounded_client_options, storage_credential

log = logging.getLogger(__name__)
CONTAINER = "leases"
BLOB = "timers"
# Blob leases last 15 to 60 s (or forever). The shortest bounds the takeover best.
DEFAULT_DURATION_S = 15
CONFLICT = 409  # another instance holds it (acquire) or took it (renew)


class TimerLease:
    """One instance's view of the timers' lease: ``hold()`` each tick, ``release()`` on a
    clean stop so the next holder need not wait for the lease to expire."""

    def __init__(self, container: ContainerClient, duration_s: int = DEFAULT_DURATION_S) -> None:
        if not 15 <= duration_s <= 60:
            raise ValueError(f"a blob lease lasts 15 to 60 s, not {duration_s}")
        self._container = container
        self._blob = container.get_blob_client(BLOB)
        self.duration_s = duration_s
        # One id per process: a restarted instance is a new candidate.
        self._lease = BlobLeaseClient(self._blob, lease_id=str(uuid.uuid4()))
        self.held = False

    @classmethod
    def connect(
        cls, blob_uri: str, *, local_emulators: bool, duration_s: int = DEFAULT_DURATION_S
    ) -> TimerLease:
        credential = storage_credential(blob_uri, local_emulators=local_emulators, client_id=None)
        service = BlobServiceClient(blob_uri, credential=credential, **bounded_client_options())
        return cls(service.get_container_client(CONTAINER), duration_s)

    def _ensure_blob(self) -> None:
        try:
            self._container.create_container()
        except ResourceExistsError:
            pass
        try:
            self._blob.upload_blob(b"", overwrite=False)
        except ResourceExistsError:
            pass  # created by another instance, or leased by one (a write to it is refused)

    def hold(self) -> bool:
        """Renew the lease if this instance holds it, else try to acquire it. True when this
        instance holds it now; False when another does or Storage did not answer (the
        timers' work needs Storage too: nothing is lost by skipping a tick)."""
        was = self.held
        try:
            if self.held:
                self._lease.renew()
            else:
                self._acquire()
            self.held = True
        except HttpResponseError as e:
            if e.status_code != CONFLICT:
                log.warning("timer lease: %s", e.message)
            self.held = False
        except AzureError as e:
            log.warning("timer lease: Storage did not answer: %s", e)
            self.held = False
        if self.held != was:
            log.info("timer lease %s", "taken: this instance ticks" if self.held else "lost")
        return self.held

    def _acquire(self) -> None:
        try:
            self._lease.acquire(lease_duration=self.duration_s)
        except HttpResponseError as e:
            if e.status_code != 404:
                raise
            self._ensure_blob()
            self._lease.acquire(lease_duration=self.duration_s)

    def release(self) -> None:
        if not self.held:
            return
        self.held = False
        try:
            self._lease.release()
        except AzureError as e:  # it expires on its own
            log.warning("timer lease: release failed: %s", e)
