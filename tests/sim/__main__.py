"""Run the simulation from the command line: ``python -m tests.sim SEED [STEPS]``; a
failure prints the seed, the violation and the shortest sequence found that still breaks
it (tests/sim/shrink.py), ready to keep as a regression test."""

from __future__ import annotations

import sys

from tests.sim.shrink import explore

if __name__ == "__main__":
    seed = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 5_000
    sys.exit(explore(seed, steps))
