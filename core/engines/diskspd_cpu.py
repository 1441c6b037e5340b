"""The client's CPU from DiskSpd's own XML (pure): what a Windows run's counters say.

DiskSpd measures every CPU of the machine over its measured time (warm-up and cool-down
excluded) and prints it under ``<TimeSpan><CpuUtilization>``: one ``<CPU>`` row per logical
processor and an ``<Average>`` over them, each with ``UsagePercent``, ``UserPercent``,
``KernelPercent`` and ``IdlePercent`` (microsoft/diskspd ``ResultParser``/``XmlResultParser``
``_PrintCpuUtilization``; PerfKitBenchmarker's ``diskspd.py`` reads the same ``Average``).
Windows' kernel time includes idle time; DiskSpd subtracts it, so Usage = User + Kernel and
Usage + Idle = 100.

The Linux agent samples /proc/stat each second instead (core.counters). DiskSpd gives one
figure for the whole measured period, so there is no per-second maximum, and Windows has no
iowait or steal counters: those stay None (not measured), never 0.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET

from core.host_counters import CountersSummary, CpuSummary


def _pct(el: ET.Element, tag: str) -> float | None:
    found = el.find(tag)
    if found is None or found.text is None:
        return None
    value = float(found.text.strip())
    if not 0.0 <= value <= 100.0:
        raise ValueError(f"DiskSpd XML: <{tag}> {value} is not a percentage")
    return value


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def cpu_summary(span: ET.Element) -> CpuSummary | None:
    """The measured time span's ``<CpuUtilization>`` as the host's CPU summary, or None
    when DiskSpd printed none. ``busiest_cpu_pct`` is the busiest logical processor: a
    client bound by one CPU (an interrupt or a single submitting thread) shows there while
    the average stays low."""
    cpu = span.find("CpuUtilization")
    if cpu is None:
        return None
    average = cpu.find("Average")
    rows = cpu.findall("CPU")
    usages = [u for row in rows if (u := _pct(row, "UsagePercent")) is not None]
    if average is not None:
        busy, user, kernel = (
            _pct(average, t) for t in ("UsagePercent", "UserPercent", "KernelPercent")
        )
    else:  # an XML cut short of its average: the rows' mean is the same figure
        busy = _mean(usages)
        user = _mean([u for row in rows if (u := _pct(row, "UserPercent")) is not None])
        kernel = _mean([k for row in rows if (k := _pct(row, "KernelPercent")) is not None])
    if busy is None or user is None or kernel is None:
        return None
    return CpuSummary(
        source="diskspd",
        busy_pct_mean=busy,
        user_pct_mean=user,
        system_pct_mean=kernel,
        busiest_cpu_pct=max(usages) if usages else None,
    )


def counters_summary(span: ET.Element, test_time_s: float) -> CountersSummary | None:
    """A DiskSpd run's counters: its CPU over ``test_time_s`` (whole seconds); no network
    or NFS figures (DiskSpd measures neither)."""
    cpu = cpu_summary(span)
    if cpu is None:
        return None
    return CountersSummary(seconds=round(test_time_s), cpu=cpu)
