"""When DiskSpd measured (pure): its phases as its XML reports them, and where the measured
period lay on the Unix clock.

Sources, in the microsoft/diskspd repository: ``IORequestGenerator/IORequestGenerator.cpp``
(``_GenerateRequestsForTimeSpan`` runs the phases; ``GenerateRequests`` builds the
``SystemInformation`` printed as ``<RunTime>`` after them), ``Common/Common.h``
(``SystemInformation::GetXml``), and the wiki's "Customizing tests" (``-W``, ``-d``, ``-C``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

# SystemInformation::GetXml: "%u/%02u/%02u %02u:%02u:%02u UTC" from GetSystemTime.
_RUN_TIME_FORMAT: Final = "%Y/%m/%d %H:%M:%S UTC"


@dataclass(frozen=True)
class DiskSpdTiming:
    """DiskSpd's phases as its XML reports them: the profile's ``<Warmup>``, ``<Duration>``
    and ``<Cooldown>`` (whole seconds, as run), the measured ``<TestTimeSeconds>``, and
    ``<RunTime>`` as a Unix second (None when empty: DiskSpd's unit tests blank it)."""

    warmup_s: int
    duration_s: int | None
    cooldown_s: int
    test_time_s: float
    run_time_unix_s: int | None


def _text(el: ET.Element, path: str) -> str | None:
    found = el.find(path)
    if found is None or found.text is None:
        return None
    return found.text.strip()


def _seconds(span: ET.Element | None, tag: str) -> int | None:
    value = None if span is None else _text(span, tag)
    return int(value) if value else None


def read_timing(root: ET.Element, test_time_s: float) -> DiskSpdTiming:
    """The phases from the profile's (only) time span, and ``<RunTime>``. A missing
    ``<Warmup>`` counts as 0 (the floor in ``measured_start_s`` stays a floor) and a
    missing ``<Cooldown>`` as DiskSpd's default, 0."""
    span = root.find("Profile/TimeSpans/TimeSpan")
    run_time = _text(root, "System/RunTime")
    run_time_unix_s = None
    if run_time:
        try:
            stamp = datetime.strptime(run_time, _RUN_TIME_FORMAT).replace(tzinfo=UTC)
        except ValueError:
            raise ValueError(
                f"DiskSpd XML: <RunTime> {run_time!r} is not 'YYYY/MM/DD hh:mm:ss UTC'"
            ) from None
        run_time_unix_s = int(stamp.timestamp())
    return DiskSpdTiming(
        warmup_s=_seconds(span, "Warmup") or 0,
        duration_s=_seconds(span, "Duration"),
        cooldown_s=_seconds(span, "Cooldown") or 0,
        test_time_s=test_time_s,
        run_time_unix_s=run_time_unix_s,
    )


def measured_start_s(timing: DiskSpdTiming, *, launched_s: float, written_s: float) -> float:
    """The Unix instant DiskSpd's measured period began, from its XML.

    ``_GenerateRequestsForTimeSpan`` runs: set-up (threads, opening files), warm-up
    (``Sleep(1000 * Warmup)``), the measured period (``<TestTimeSeconds>``, timed with the
    performance counter), cool-down (``Sleep(1000 * Cooldown)``), then stops its threads;
    only after that does ``GenerateRequests`` build the ``SystemInformation`` whose
    ``GetSystemTime`` becomes ``<RunTime>``, and print the XML. So the measured period ended
    ``<Cooldown>`` before that stamp, and began ``<TestTimeSeconds>`` before its end:

        start = stamp - Cooldown - TestTimeSeconds

    ``<RunTime>`` is truncated to the second: the stamp lies in [RunTime, RunTime + 1).
    ``written_s``, when the agent saw the XML written (the output file's modification
    time), comes just after the stamp and places it within that second; a later or earlier
    ``written_s`` is clamped to it. What is left over is the threads' stopping after
    cool-down (their last I/Os), which makes the start at most that much late.

    Launch plus ``<Warmup>`` is a hard floor (the process cannot have measured before it
    started and warmed up); a start below it (a clock step, an XML from another run) is
    raised to it.
    """
    stamp = written_s
    if timing.run_time_unix_s is not None:
        stamp = min(max(written_s, timing.run_time_unix_s), timing.run_time_unix_s + 1.0)
    start = stamp - timing.cooldown_s - timing.test_time_s
    return max(start, launched_s + timing.warmup_s)
