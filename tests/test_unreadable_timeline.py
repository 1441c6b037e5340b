"""One client's uploaded timeline that is not a timeline (an upload is not checked as a
carried one is) leaves that client's series out, logged, as a missing one does. Before, the
finalizer raised on it: the last result's request (another client's) failed with the error,
and the timer then failed the whole run ("internal error: its due work: BadGzipFile")."""

from __future__ import annotations

import gzip
import logging

import pytest

from core.artifacts import ref
from core.models.state import RunState
from tests.test_thousand_clients import RATE, World


# Not gzip; gzip of JSON that is no timeline.
@pytest.mark.parametrize("bad", [b"not gzip at all", gzip.compress(b"[1, 2]", mtime=0)])
def test_a_client_whose_timeline_is_unreadable_does_not_fail_the_run(
    bad: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    world = World(3)
    run_id, start = world.started_and_measured()
    results = world.uploaded_results(start)  # every artifact uploaded (protocol 2)
    first, agent = results[0]
    world.service.put_artifact(run_id, first.item_id, "timeline", bad, agent)
    named = {**first.artifacts, "timeline": ref("timeline", bad)}
    results[0] = (first.model_copy(update={"artifacts": named}), agent)
    with caplog.at_level(logging.WARNING):
        # The last one finalizes the run: its own request reads the bad blob.
        assert all(world.service.store_result(r.model_dump(mode="json"), a) for r, a in results)
    run = world.store.runs.get(run_id)
    assert run.state == RunState.COMPLETED and run.error is None
    assert f"timeline of {first.item_id} in Blob Storage is unreadable" in caplog.text
    (agg,) = world.store.results.list_aggregates(run_id)
    assert agg.clients == 3 and not agg.failed_clients
    assert agg.read is not None and agg.read.iops == pytest.approx(3 * RATE.iops, rel=1e-9)
    # Its own view shows its figures without a series, not an error.
    full = world.service.full_result(run_id, first.item_id)
    assert full.read is not None and not full.series
