"""What bound the run, as people see it: benchctl's table and markdown, and the chat bot's
result card, from an aggregate built the real way (tests/test_ceilings.py)."""

from __future__ import annotations

import io
from typing import Any

from rich.console import Console

from core.chat.cards import adaptive_card, json_reply, result_reply
from tables.runs import print_run, run_markdown
from tests.documents import run_view
from tests.test_ceilings import MIB, ULTRA_LARGE_101, aggregate_of, registry_entry, result

RUN_ID = "r-" + "c" * 32


def run_with(agg: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": RUN_ID,
        "target": "vol1",
        "state": "completed",
        "items": [],
        "steps": [{"step": 0, "clients": agg["clients"], "point": None, "aggregate": agg}],
        "aggregate": agg,
        "requested_by": {"name": "me", "door": "bot-webhook"},
    }


def shown(run: dict[str, Any]) -> str:
    out = io.StringIO()
    print_run(run, Console(file=out, width=200))
    return out.getvalue()


def test_status_table_names_the_bound_and_lists_the_limits() -> None:
    agg = aggregate_of(
        ULTRA_LARGE_101, [result(c, "Standard_E32s_v5", read=12_761 * MIB / 12) for c in range(12)]
    )
    text = shown(run_with(agg))
    assert (
        "bound by the target (target vol1 throughput): 12,761.0 MiB/s of 12,800.0 MiB/s (100%)"
        in text
    )
    assert (
        "clients' network egress (12 x Standard_E32s_v5), not metered for reads (not a bound)"
        in text
    )
    md = run_markdown(run_with(agg))
    assert "#### What bound the run" in md
    assert "- step 0: bound by the target (target vol1 throughput)" in md


def test_nothing_reached_says_the_nearest_and_nothing_known_says_so() -> None:
    disk = registry_entry(facts={"kind": "managed-disk", "sku": "S30"})
    agg = aggregate_of(disk, [result(0, None, read=240 * 4096, bs=4096)])
    assert "no limit reached; nearest: target vol1 IOPS, 240 IOPS of 500 IOPS (48%)" in shown(
        run_with(agg)
    )
    unknown = aggregate_of("[]", [result(0, None, read=MIB)])
    assert "bound by: no limit known" in shown(run_with(unknown))


def test_the_bots_result_card_carries_the_bound() -> None:
    agg = aggregate_of(registry_entry(limits={"read_mibps": 40}), [result(0, None, read=39 * MIB)])
    run = run_view(
        id=RUN_ID,
        target="vol1",
        aggregate=agg,
        requested_by={"name": "me", "role": "runner", "door": "bot-webhook"},
    )
    reply = result_reply(run, "http://x")
    assert json_reply(reply).facts["Bound by"] == "target vol1 read throughput (98%)"
    facts = adaptive_card(reply).model_dump(mode="json")["attachments"][0]["content"]["body"][-1][
        "facts"
    ]
    assert {"title": "Bound by", "value": "target vol1 read throughput (98%)"} in facts
