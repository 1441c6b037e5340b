"""Running a seed, and cutting a failing sequence down to a shortest one that still breaks
the same invariant (delta debugging: drop chunks, halving their size, while it fails)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from tests.sim.driver import Action, Sim, actions
from tests.sim.invariants import Violation


def run_seed(seed: int, steps: int) -> tuple[Sim, Violation | None]:
    sim = Sim()
    try:
        sim.run(actions(seed, steps, sim))
    except Violation as v:
        return sim, v
    return sim, None


def replay(sequence: Sequence[Action]) -> Violation | None:
    sim = Sim()
    try:
        sim.run(list(sequence))
    except Violation as v:
        return v
    return None


def shrink(sequence: Sequence[Action], kind: str, budget_s: float = 600.0) -> list[Action]:
    """The shortest sequence found within ``budget_s`` that still breaks ``kind``."""
    current = list(sequence)
    chunk = max(1, len(current) // 2)
    deadline = time.monotonic() + budget_s
    while chunk >= 1 and time.monotonic() < deadline:
        removed = False
        start = 0
        while start < len(current) and time.monotonic() < deadline:
            candidate = current[:start] + current[start + chunk :]
            found = replay(candidate)
            if found is not None and found.kind == kind:
                current, removed = candidate, True
            else:
                start += chunk
        if not removed:
            chunk //= 2
    return current


def explore(seed: int, steps: int) -> int:
    started = time.monotonic()
    sim, violation = run_seed(seed, steps)
    took = time.monotonic() - started
    if violation is None:
        print(f"seed {seed}: {steps} steps, no violation ({took:.1f} s)")
        return 0
    print(f"seed {seed}: {violation} after {len(sim.drawn)} actions ({took:.1f} s)")
    shortest = shrink(sim.drawn, violation.kind)
    print(f"shortest sequence ({len(shortest)} actions):")
    print("[\n" + "".join(f"    {a!r},\n" for a in shortest) + "]")
    return 1
