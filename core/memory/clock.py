"""A clock that moves only when told (the simulation's time)."""

from __future__ import annotations


class SimClock:
    """Seconds since the epoch, as ``time.time`` gives them; ``advance`` moves it."""

    def __init__(self, start: float = 1_900_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("time does not go back")
        self.now += seconds

    def ms(self) -> int:
        return int(self.now * 1000)
