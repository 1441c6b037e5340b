"""The agent's outcomes, its refusal of an engine it cannot start, and clean orders (pure
or on a local directory: no server, no fio). The engines themselves run end to end in
tests/test_agent_protocol.py, tests/test_diskspd.py and the other agent tests."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from agent.cleanup import MAX_CLEAN_DELIVERIES, carry_out
from agent.config import AgentConfig, MountSpec
from agent.item_checks import refusal
from agent.mounts import MountWatch
from agent.outcome import Outcome
from core.models import WorkItem, Workload
from core.runs.clean import CleanOrder


def test_outcomes_are_the_words_logs_and_traces_show() -> None:
    # bench.outcome on the item's span (docs/operations.md) and the worker's log line.
    assert [str(o) for o in Outcome] == [
        "completed",
        "failed",
        "failed: mount down, handed back",
        "released",
        "dropped",
        "malformed",
        "cleaned",
        "aborted",
        "cancelled",
        "interrupted",
        "lease lost",
        "error",
    ]
    line = logging.LogRecord(
        "w", logging.INFO, "", 0, "message %s: %s", ("m1", Outcome.LEASE_LOST), None
    )
    assert line.getMessage() == "message m1: lease lost"
    assert f"{Outcome.MOUNT_DOWN}" == "failed: mount down, handed back"


def diskspd_item() -> WorkItem:
    return WorkItem(
        run_id="r-" + "a" * 32,
        item_id="r-" + "a" * 32 + ".s0.c0",
        step=0,
        client=0,
        clients=1,
        pool="win",
        targets=["disk"],
        engine="diskspd",
        workload=Workload(size="8m"),
    )


def test_an_agent_without_diskspd_refuses_its_items_for_good(tmp_path: Path) -> None:
    mounts = {"disk": str(tmp_path)}
    missing = refusal(diskspd_item(), "vm1", mounts, "fio", "no-such-diskspd.exe")
    assert missing == "agent vm1 cannot run DiskSpd (no-such-diskspd.exe)"
    # The fio binary does not matter to a DiskSpd item, nor DiskSpd's to a fio item.
    assert refusal(diskspd_item(), "vm1", mounts, "no-such-fio", "sh") == ""
    fio_item = diskspd_item().model_copy(update={"engine": "fio"})
    assert refusal(fio_item, "vm1", mounts, "sh", "no-such-diskspd.exe") == ""


def order(target: str, requested_at_ms: int) -> CleanOrder:
    return CleanOrder(
        id="c-" + "b" * 32,
        pool="default",
        target=target,
        requested_by="alice",
        requested_at_ms=requested_at_ms,
    )


def test_a_clean_order_is_carried_out_handed_back_or_dropped(tmp_path: Path) -> None:
    mount = tmp_path / "share"
    old = mount / ".benchsvc" / "vm1" / "bench.0.0"
    old.parent.mkdir(parents=True)
    old.write_bytes(b"x" * 4096)
    os.utime(old, (time.time() - 60, time.time() - 60))
    config = AgentConfig(
        api_url="http://api", queue_uri="q", mounts={"share": MountSpec(path=str(mount))}
    )
    watch = MountWatch(config.mounts)
    now_ms = int(time.time() * 1000)

    # Not this agent's target: another agent of the pool may have it, until the last delivery.
    assert carry_out(order("other", now_ms), 1, config, watch) is Outcome.RELEASED
    assert old.exists()
    last = MAX_CLEAN_DELIVERIES
    assert carry_out(order("other", now_ms), last, config, watch) is Outcome.DROPPED

    newer = old.with_name("bench.1.0")
    newer.write_bytes(b"y")  # written after the order: kept
    assert carry_out(order("share", now_ms - 1000), 1, config, watch) is Outcome.CLEANED
    assert not old.exists() and newer.exists()
