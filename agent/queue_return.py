"""After the queue could not be reached: let the holders of leases renew first.

While the queue service is down, nobody can renew a message's visibility or receive one, so
the visibility of a message whose holder is alive and well can run out during the outage
(agent.lease keeps such a lease while the API accepts its heartbeats). When the service comes
back, the first agent to receive takes that message, and its claim fails a client of a
started multi-client step (core.runs.protocol: the holder "stopped renewing its lease").
That is how the chaos test's surviving client was failed after an Azurite restart of about
20 s. So an idle agent that found the queue down does not receive again as soon as it
answers: it probes it with a read that receives nothing, and once it answers waits
``QUEUE_RETURN_GRACE_S``, longer than a holder's lease thread takes to try its renewal
again (a beat, a renewal and a heartbeat of at most 2 s each).
"""

from __future__ import annotations

import logging
import threading

from adapters.queue import WorkQueues, work_queue_name
from core.errors import StoreUnavailable

log = logging.getLogger(__name__)

QUEUE_RETURN_GRACE_S = 5.0
PROBE_EVERY_S = 1.0


def after_outage(
    queues: WorkQueues,
    pool: str,
    stop: threading.Event,
    *,
    grace_s: float = QUEUE_RETURN_GRACE_S,
    probe_every_s: float = PROBE_EVERY_S,
) -> None:
    """Return once the pool's queue answers a read and ``grace_s`` has passed since, or at
    once when ``stop`` is set."""
    while not stop.is_set():
        try:
            queues.approximate_count(work_queue_name(pool))  # a read: it receives nothing
        except StoreUnavailable:
            stop.wait(probe_every_s)
            continue
        except Exception:  # crash-only: a probe that fails otherwise ends the wait
            log.exception("probing the queue failed")
        log.info("queue back: receiving again in %g s (holders renew first)", grace_s)
        stop.wait(grace_s)
        return
