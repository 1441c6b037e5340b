"""The deterministic simulation of the control plane (issue 24.6, tests/sim): 5,000 steps on
a fixed seed in every `make test`, and one more seed when SIM_SEED is set (SIM_STEPS steps,
default 5,000). A failure names its seed; ``python -m tests.sim SEED STEPS`` replays it
exactly and cuts it down to a shortest sequence, to keep in tests/test_sim_regressions.py."""

from __future__ import annotations

import os
import time
from collections import Counter

import pytest

from core.timestamps import iso_ms
from tests.sim.driver import Sim, actions
from tests.sim.invariants import Violation
from tests.sim.world import START

FIXED_SEED = 24_006
STEPS = 5_000
SEEDS = [FIXED_SEED] + ([int(os.environ["SIM_SEED"])] if os.environ.get("SIM_SEED") else [])


@pytest.mark.slow  # 5,000 steps: 3-5 s
@pytest.mark.parametrize("seed", SEEDS)
def test_the_simulation_keeps_every_invariant(seed: int) -> None:
    steps = STEPS if seed == FIXED_SEED else int(os.environ.get("SIM_STEPS", STEPS))
    sim = Sim()
    started = time.monotonic()
    try:
        done = sim.run(actions(seed, steps, sim))
    except Violation as v:
        trace = "\n".join(sim.trace[-25:])
        pytest.fail(
            f"seed {seed}: {v} after {len(sim.drawn)} steps\n{trace}\n"
            f"replay and shrink: python -m tests.sim {seed} {steps}"
        )
    took = time.monotonic() - started
    kinds = Counter(a.kind for a in sim.drawn)
    outcomes = Counter(p.outcome for p in sim.world.posts)
    stored = sum(1 for *_, created, _ in sim.world.results_stored if created)
    print(
        f"seed {seed}: {len(sim.drawn)} steps + {done - len(sim.drawn)} settling, "
        f"{took:.1f} s; POSTs {dict(outcomes)}; results stored {stored}; {dict(kinds)}"
    )
    assert len(sim.drawn) == steps
    # Not a world where nothing happens: runs were accepted and refused, results stored,
    # and every kind of fault was injected.
    assert outcomes["ok"] >= 20 and outcomes["unavailable"] >= 20 and outcomes["refused"] >= 5
    assert stored >= 10
    for kind in ("pause", "pause_in", "queue_pause", "flaky", "crash", "restart", "die", "cancel"):
        assert kinds[kind] > 0, kind


def test_a_seed_replays_exactly() -> None:
    """The same seed draws the same actions and ends in the same documents."""
    worlds = []
    for _ in range(2):
        sim = Sim()
        sim.run(actions(7, 600, sim))
        docs = sim.world.store.table["runs"].docs.values()
        runs = sorted((d["id"], d["state"], d.get("error")) for d in docs)
        worlds.append((sim.drawn, sim.trace, runs, sim.world.clock()))
    assert worlds[0] == worlds[1]


def test_every_stored_stamp_comes_from_the_simulated_clock() -> None:
    """The services stamp documents from the clock they are given (core.timestamps), never
    the wall clock: in a world whose clock starts in 2030, every ``*_at`` of every stored
    document lies between its start and its end."""
    sim = Sim()
    sim.run(actions(7, 600, sim))
    first, last = iso_ms(int(START * 1000)), iso_ms(sim.world.clock.ms())
    stamps = [
        (name, doc["id"], key, value)
        for name, table in sim.world.store.table.items()
        for doc in table.docs.values()
        for key, value in doc.items()
        if key.endswith("_at") and isinstance(value, str)
    ]
    kinds = {key for _, _, key, _ in stamps}
    assert {"created_at", "updated_at", "claimed_at", "ready_at", "ended_at"} <= kinds, kinds
    assert [s for s in stamps if not first <= s[3] <= last] == []
