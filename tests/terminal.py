"""What a process started from a terminal has, for tests that act as one."""

from __future__ import annotations

import signal


def hears_ctrl_c() -> None:
    """Run in the child before it starts (``preexec_fn``). A process started from a
    background job, as ``make test`` starts its side lane or a CI runner its script,
    inherits SIGINT ignored, and Python then never raises KeyboardInterrupt: a test of
    Ctrl-C would see the CLI run on to the end. A terminal's Ctrl-C reaches a process
    that has SIGINT at its default."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
