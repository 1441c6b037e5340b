"""Pure parts of the fleet (issue 18): BENCH_POOLS, the admission rule, when an elastic pool
grows and shrinks, liveness and usage, and the Azure scaler's request body."""

from __future__ import annotations

import pytest
from azure.mgmt.compute.models import Sku
from hypothesis import given
from hypothesis import strategies as st

from adapters.azure_scaler import capacity_update, scale_sets
from core.fleet.admission import fleet_errors
from core.fleet.pools import PoolConfig, parse_pools
from core.fleet.scaling import wanted_capacity
from core.models.agents import AgentMount, AgentRecord


def agent(name: str, *, seen_ms: int, mounts: tuple[str, ...] = ("scratch",)) -> AgentRecord:
    return AgentRecord(
        id=name,
        pool="p",
        session="0" * 32,
        mounts=[
            AgentMount(
                alias=m, path="/x", fstype="ext4", source="/dev/x", options="rw", usable=True
            )
            for m in mounts
        ],
        engines=["fio"],
        heartbeat_s=30,
        registered_ms=0,
        last_seen_ms=seen_ms,
    )


def test_bench_pools_entries() -> None:
    fixed, elastic, bare = parse_pools("a:size=12:price=2.016, b:max=8:min=1:idle=60:vmss=v-b,c")
    assert (fixed.declared_size, fixed.price, fixed.elastic) == (12, 2.016, False)
    assert (elastic.declared_size, elastic.min, elastic.idle, elastic.vmss) == (8, 1, 60, "v-b")
    assert bare == PoolConfig(name="c") and bare.declared_size is None
    for bad, says in (
        ("a:size=0", "size"),
        ("a:size=2:max=3", r"fixed \(size\) or elastic \(max\)"),
        ("a:max=2:min=3", "min 3 is above max 2"),
        ("a:colour=red", "colour"),
        ("a,a", "listed twice"),
        ("a:size", "is not KEY=VALUE"),
    ):
        with pytest.raises(ValueError, match=says):
            parse_pools(bad)


def test_gone_after_three_silent_periods_and_usage_until_then() -> None:
    a = agent("a", seen_ms=100_000)
    assert a.status(100_000 + 90_000) == "live" and a.status(100_000 + 90_001) == "gone"
    assert a.used_ms(500_000) == 100_000  # registration to its last sign of life


def test_admission_rule() -> None:
    now = 1_000_000
    live, gone = agent("l", seen_ms=now), agent("g", seen_ms=0, mounts=("old",))
    kw = dict(pool="p", single_target=True, engine="fio", now_ms=now)
    # Never heard from, nothing declared: not judged.
    assert fleet_errors(targets=["x"], clients=9, config=None, records=[], **kw) == []  # type: ignore[arg-type]
    # Live agents are judged; gone ones only when none is live.
    [e] = fleet_errors(targets=["old"], clients=1, config=None, records=[live, gone], **kw)  # type: ignore[arg-type]
    assert e.field == "target" and e.message.endswith("agents mount: scratch")
    assert fleet_errors(targets=["old"], clients=1, config=None, records=[gone], **kw) == []  # type: ignore[arg-type]
    # Clients: the declared size (an elastic pool's max), else the live agents.
    elastic = PoolConfig(name="p", max=4)
    assert fleet_errors(targets=["scratch"], clients=4, config=elastic, records=[live], **kw) == []  # type: ignore[arg-type]
    [e] = fleet_errors(targets=["scratch"], clients=5, config=elastic, records=[live], **kw)  # type: ignore[arg-type]
    assert (e.field, e.message) == (
        "clients",
        "5 clients at once, but pool p grows to at most 4 agents",
    )
    [e] = fleet_errors(targets=["scratch"], clients=2, config=None, records=[live], **kw)  # type: ignore[arg-type]
    assert e.field == "clients"


@given(
    demand=st.integers(0, 20),
    busy=st.integers(0, 20),
    current=st.integers(0, 20),
    idle_ms=st.integers(0, 2_000_000),
)
def test_elastic_capacity_stays_in_range_and_shrinks_only_when_idle_long_enough(
    demand: int, busy: int, current: int, idle_ms: int
) -> None:
    config = PoolConfig(name="p", max=8, min=1, idle=900)
    wanted = wanted_capacity(
        config, demand=demand, busy=busy, current=current, idle_since_ms=0, now_ms=idle_ms
    )
    if wanted is None:
        return
    assert config.min <= wanted <= 8
    if wanted < current:  # shrinking
        assert demand == 0 and busy == 0 and idle_ms >= 900_000 and wanted == config.min
    if wanted > current:  # growing: to what the runs need, within the range
        assert (demand > current or current < 1) and wanted == min(max(demand, 1), 8)


def test_the_azure_scaler_sends_only_the_capacity() -> None:
    body = capacity_update(Sku(name="Standard_E32s_v5", tier="Standard", capacity=0), 12)
    assert body.as_dict() == {
        "sku": {"name": "Standard_E32s_v5", "tier": "Standard", "capacity": 12}
    }
    assert scale_sets(parse_pools("a,b:max=3:vmss=vmss-b-x")) == {"b": "vmss-b-x"}
    with pytest.raises(ValueError, match="without vmss: b"):
        scale_sets(parse_pools("b:max=3"))
