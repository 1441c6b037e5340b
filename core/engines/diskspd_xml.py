"""DiskSpd's XML output (``-Rxml``, pure) read into the service's result types (its timing:
``core.engines.diskspd_time``).

Sources, all in the microsoft/diskspd repository:

- the XML: ``XmlResultParser/XmlResultParser.cpp`` (``ParseResults``, ``_PrintTargetResults``,
  ``_PrintTargetLatency``, ``_PrintLatencyPercentiles``, ``_PrintTargetIops``, ``_PrintIops``),
  ``Common/Common.h`` (``SystemInformation::GetXml``) and ``Common/Common.cpp``
  (``Profile``/``TimeSpan``/``Target::GetXml``);
- how DiskSpd's own tooling reads it: ``Process-DiskSpd.ps1`` sums ``ReadCount``/``ReadBytes``
  over ``Results/TimeSpan/Thread/Target`` and divides by ``TestTimeSeconds``; so do we.

The output, abridged::

    <Results>
      <System> <Tool><Version>2.2.0</Version>...</Tool>
               <RunTime>2025/03/14 09:26:53 UTC</RunTime> ... </System>
      <Profile> ... <TimeSpans><TimeSpan> <Duration/><Warmup/><Cooldown/> ...
          <IoBucketDuration>1000</IoBucketDuration>
          <Targets><Target><Path/><BlockSize>4096</BlockSize><RequestCount/>
                           <ThreadsPerFile/>...</Target></Targets>
      </TimeSpan></TimeSpans></Profile>                        (what was asked)
      <TimeSpan>                                               (what was measured)
        <TestTimeSeconds>60.00</TestTimeSeconds> <ThreadCount/> <CpuUtilization/>
        <Latency>  (-L: all threads and targets merged) <AverageReadMilliseconds/>
                   <ReadLatencyStdev/> ... <Bucket><Percentile>99.9</Percentile>
                   <ReadMilliseconds/><WriteMilliseconds/><TotalMilliseconds/></Bucket>...
        <Iops>     (-D: merged) <Bucket SampleMillisecond="1000" Read=".." Write=".."/>...
        <Thread><Id>0</Id>
          <Target><Path/><ReadBytes/><ReadCount/><WriteBytes/><WriteCount/>
                  [-L: <AverageReadLatencyMilliseconds/><ReadLatencyStdev/>...]
                  [-D: <Iops><Bucket .../>...</Iops>]</Target>
        </Thread>...
      </TimeSpan>
    </Results>

DiskSpd differs from fio in ways the results carry:

- its latency is timed from just before an I/O is issued to its completion, i.e. fio's
  ``lat`` (not ``clat``); it is stored in both ``lat_ns`` and ``clat_ns``, and its
  percentiles in both ``lat_percentiles_ns`` and ``clat_percentiles_ns``;
- it keeps no histogram we could merge (``clat_bins_ns`` is empty, ``has_bins=False``), so
  aggregated percentiles are approximate and say so.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Final

from core.engines.diskspd_cpu import counters_summary
from core.engines.diskspd_time import DiskSpdTiming, read_timing
from core.engines.fio_output import DIRECTIONS, percentile_key
from core.host_counters import CountersSummary
from core.models import Direction, DirectionResult, LatencyStats, SeriesPoint
from core.timeline import ClientSample, timeline_from_seconds

_DIR_TAG: Final[dict[Direction, str]] = {"read": "Read", "write": "Write"}
_ZERO = LatencyStats(min=0.0, max=0.0, mean=0.0, stddev=0.0)


@dataclass(frozen=True)
class DiskSpdResult:
    """One DiskSpd run read from its XML.

    ``series`` points are per second; their ``t`` is ``start_unix_s`` + n for the n-th
    second of the measured period, or n itself (1, 2, 3 ...) when no start was given:
    DiskSpd's buckets count from the start of measurement (``placed`` moves them onto the
    clock). ``outstanding_ios`` is threads x ``-o`` summed over targets, from the profile.
    ``counters``: the client's CPU over the measured time, from ``<CpuUtilization>``
    (core.engines.diskspd_cpu).
    """

    dirs: dict[Direction, DirectionResult]
    series: dict[Direction, list[SeriesPoint]]
    test_time_s: float
    version: str
    has_latency: bool
    timing: DiskSpdTiming
    outstanding_ios: int | None = None
    counters: CountersSummary | None = None

    def placed(self, start_unix_s: float) -> DiskSpdResult:
        """The same result with its series on the Unix clock, measurement having begun at
        ``start_unix_s``: the n-th second ends at start + n, within Unix second
        floor(start) + n (``SeriesPoint.t``). Only relative series (from ``parse_xml``
        without a start) may be placed."""
        offset = math.floor(start_unix_s)
        series = {
            d: [p.model_copy(update={"t": p.t + offset}) for p in points]
            for d, points in self.series.items()
        }
        return replace(self, series=series)


def _root(text: str) -> ET.Element:
    # DiskSpd writes no DTD; refusing one rules out entity-expansion attacks, the risk of
    # parsing with the standard library rather than defusedxml.
    if "<!DOCTYPE" in text or "<!ENTITY" in text:
        raise ValueError("DiskSpd XML must not contain a DTD")
    start = text.find("<Results")
    if start < 0:
        raise ValueError("not a DiskSpd XML result (no <Results>): was -Rxml given?")
    body = text[start:]
    try:
        root = ET.fromstring(body)  # noqa: S314 - DTDs refused above
    except ET.ParseError as e:
        raise ValueError(f"DiskSpd XML is not well-formed: {e}") from None
    if root.tag != "Results":
        raise ValueError(f"DiskSpd XML root is <{root.tag}>, not <Results>")
    return root


def _text(el: ET.Element, path: str) -> str | None:
    found = el.find(path)
    if found is None or found.text is None:
        return None
    return found.text.strip()


def _count(target: ET.Element, tag: str) -> int:
    value = _text(target, tag)
    if value is None:
        raise ValueError(f"DiskSpd XML: <Target> has no <{tag}>")
    return int(value)


def _ms_to_ns(text: str) -> float:
    # DiskSpd prints milliseconds with 3 decimals (a microsecond): whole nanoseconds are
    # exact, and rounding drops binary noise such as 286999.99999999994.
    return float(round(float(text) * 1_000_000))


def _pooled(parts: Iterable[tuple[int, float, float]]) -> tuple[float, float]:
    """(count, mean, stddev) groups -> mean and standard deviation of the union."""
    live = [(n, m, s) for n, m, s in parts if n > 0]
    total = sum(n for n, _, _ in live)
    if not total:
        return 0.0, 0.0
    mean = sum(n * m for n, m, _ in live) / total
    second_moment = sum(n * (s * s + m * m) for n, m, s in live) / total
    return mean, math.sqrt(max(second_moment - mean * mean, 0.0))


def _latency(
    latency: ET.Element, targets: Sequence[ET.Element], tag: str
) -> tuple[LatencyStats, dict[str, float]]:
    """One direction's statistics and percentiles (ns) from the ``-L`` sections.

    Percentiles come from ``<Latency><Bucket>`` rows (``<Percentile>`` and
    ``<ReadMilliseconds>``/``<WriteMilliseconds>``), which DiskSpd computes from all
    threads' and targets' histograms merged (``_PrintLatencyPercentiles``). Its 0th and
    100th rows are the minimum and maximum; the others go under fio's keys ("99.900000").
    DiskSpd goes to 99.9999999, which fio's six decimals would spell "100.000000": that
    row is left out rather than passed off as a maximum.

    Mean and standard deviation: ``<Latency><AverageReadMilliseconds>`` and
    ``<ReadLatencyStdev>``, DiskSpd's own figures over the merged histogram (what
    Process-DiskSpd.ps1 reports); when absent, the per-target
    ``<AverageReadLatencyMilliseconds>``/``<ReadLatencyStdev>`` pooled by I/O count.
    """
    percentiles: dict[str, float] = {}
    low = high = 0.0
    for bucket in latency.findall("Bucket"):
        p_text, v_text = _text(bucket, "Percentile"), _text(bucket, f"{tag}Milliseconds")
        if p_text is None or v_text is None:
            continue
        p, ns = float(p_text), _ms_to_ns(v_text)
        if p <= 0.0:
            low = ns
        elif p >= 100.0:
            high = ns
        elif (key := percentile_key(p)) != percentile_key(100.0):
            percentiles.setdefault(key, ns)

    mean_text = _text(latency, f"Average{tag}Milliseconds")
    sd_text = _text(latency, f"{tag}LatencyStdev")
    if mean_text is not None:
        mean, sd = _ms_to_ns(mean_text), _ms_to_ns(sd_text or "0")
    else:
        parts = []
        for t in targets:
            t_mean = _text(t, f"Average{tag}LatencyMilliseconds")
            if t_mean is not None:
                t_sd = float(_text(t, f"{tag}LatencyStdev") or 0.0)
                parts.append((_count(t, f"{tag}Count"), float(t_mean), t_sd))
        mean_ms, sd_ms = _pooled(parts)
        mean, sd = float(round(mean_ms * 1e6)), float(round(sd_ms * 1e6))
    return LatencyStats(min=low, max=high, mean=mean, stddev=sd), percentiles


def _block_sizes(root: ET.Element) -> tuple[dict[str, int], int | None]:
    """Block size per target path, from the profile (``Target/<BlockSize>``), and the
    first one as the default for a path the profile does not name."""
    sizes: dict[str, int] = {}
    first: int | None = None
    for t in root.findall("Profile/TimeSpans/TimeSpan/Targets/Target"):
        bs = _text(t, "BlockSize")
        if bs is None:
            continue
        first = int(bs) if first is None else first
        sizes.setdefault(_text(t, "Path") or "", int(bs))
    return sizes, first


def _bucket_ms(root: ET.Element, buckets: Sequence[ET.Element]) -> int:
    """The ``-D`` interval: the profile's ``<IoBucketDuration>``, else the first bucket's
    end (bucket i ends at SampleMillisecond = interval x (i + 1), ``_PrintIops``)."""
    declared = _text(root, "Profile/TimeSpans/TimeSpan/IoBucketDuration")
    if declared is not None and int(declared) > 0:
        return int(declared)
    return min(int(b.get("SampleMillisecond", "0")) for b in buckets) or 1000


def _per_second(rates: dict[int, float], bucket_ms: int) -> dict[int, float]:
    """{bucket end ms: per-second rate} -> {second n (1-based): per-second rate}.

    Second n covers ((n-1) s, n s]. Each bucket's rate is spread over the seconds it
    overlaps, and each second gets the overlap-weighted mean; with 1000 ms buckets this
    is the identity. A second no bucket covers has no point.
    """
    weighted: dict[int, float] = defaultdict(float)
    covered: dict[int, int] = defaultdict(int)
    for end, rate in rates.items():
        start = end - bucket_ms
        n = max(start // 1000 + 1, 1)
        while (n - 1) * 1000 < end:
            overlap = min(end, n * 1000) - max(start, (n - 1) * 1000)
            if overlap > 0:
                weighted[n] += rate * overlap
                covered[n] += overlap
            n += 1
    return {n: weighted[n] / covered[n] for n in sorted(weighted) if covered[n]}


def _series(
    root: ET.Element,
    span: ET.Element,
    directions: Iterable[Direction],
) -> dict[Direction, list[SeriesPoint]]:
    """Per-second IOPS and bandwidth from the ``-D`` buckets, at relative seconds 1, 2, ...

    Each ``<Thread><Target><Iops>`` holds ``<Bucket SampleMillisecond= Read= Write=>`` rows
    whose Read/Write are already per second (count / interval, ``_PrintIops``); they are
    summed over threads and targets, and bandwidth is IOPS x that target's ``BlockSize``.
    When no target has its own rows, the merged ``<TimeSpan><Iops>`` is used instead.
    """
    sizes, default_bs = _block_sizes(root)
    sources: list[tuple[ET.Element, str | None]] = [
        (section, _text(t, "Path"))
        for t in span.findall("Thread/Target")
        if (section := t.find("Iops")) is not None
    ]
    if not sources and (merged := span.find("Iops")) is not None:
        sources = [(merged, None)]
    buckets = [b for section, _ in sources for b in section.findall("Bucket")]
    if not buckets:
        return {}
    if default_bs is None:
        raise ValueError("DiskSpd XML: the profile gives no <BlockSize> for bandwidth")
    bucket_ms = _bucket_ms(root, buckets)
    out: dict[Direction, list[SeriesPoint]] = {}
    for d in directions:
        iops: dict[int, float] = defaultdict(float)
        bw: dict[int, float] = defaultdict(float)
        for element, path in sources:
            bs = sizes.get(path or "", default_bs)
            for b in element.findall("Bucket"):
                end, rate = int(b.get("SampleMillisecond", "0")), float(b.get(_DIR_TAG[d], "0"))
                iops[end] += rate
                bw[end] += rate * bs
        per_s_iops, per_s_bw = _per_second(iops, bucket_ms), _per_second(bw, bucket_ms)
        out[d] = [SeriesPoint(t=n, iops=per_s_iops[n], bw_bytes=per_s_bw[n]) for n in per_s_iops]
    return out


def _outstanding(root: ET.Element) -> int | None:
    """I/Os a client kept in flight, from the profile: with ``-t``, threads per file x
    ``-o`` per target; with ``-F``/``-O``, total threads x requests per thread."""
    span = root.find("Profile/TimeSpans/TimeSpan")
    if span is None:
        return None
    targets = span.findall("Targets/Target")
    threads = int(_text(span, "ThreadCount") or 0)
    per_thread = int(_text(span, "RequestCount") or 0)
    if threads and per_thread:
        return threads * per_thread
    if threads:
        return threads * sum(int(_text(t, "RequestCount") or 0) for t in targets)
    total = sum(
        int(_text(t, "ThreadsPerFile") or 1) * int(_text(t, "RequestCount") or 0) for t in targets
    )
    return total or None


def parse_xml(text: str, *, start_unix_s: float | None = None) -> DiskSpdResult:
    """Read one DiskSpd ``-Rxml`` output (a single time span: what ``command_line`` runs).

    Per direction: ``total_ios``/``io_bytes`` are ``<ReadCount>``/``<ReadBytes>`` (and
    Write) summed over every ``<Thread><Target>``; IOPS and bandwidth are those sums over
    ``<TimeSpan><TestTimeSeconds>``, the measured time (warm-up and cool-down excluded).
    A direction without I/O is left out, as with fio. Without ``-L`` the latency figures
    are zero, the percentiles empty and ``has_latency`` false; without ``-D`` there is no
    series. ``start_unix_s``: the Unix instant measurement started (after warm-up), to
    place the series in time (``DiskSpdResult.placed``; ``core.engines.diskspd_time`` finds it).
    """
    root = _root(text)
    spans = root.findall("TimeSpan")
    if len(spans) != 1:
        raise ValueError(f"DiskSpd XML has {len(spans)} measured time spans; expected 1")
    span = spans[0]
    error = _text(span, "Error")
    if error:
        raise ValueError(f"DiskSpd reported: {error}")
    seconds_text = _text(span, "TestTimeSeconds")
    if seconds_text is None or float(seconds_text) <= 0:
        raise ValueError("DiskSpd XML has no positive <TestTimeSeconds>")
    test_time_s = float(seconds_text)
    targets = span.findall("Thread/Target")
    if not targets:
        raise ValueError("DiskSpd XML has no <Thread><Target> results")
    latency = span.find("Latency")

    dirs: dict[Direction, DirectionResult] = {}
    for d in DIRECTIONS:
        tag = _DIR_TAG[d]
        ios = sum(_count(t, f"{tag}Count") for t in targets)
        if not ios:
            continue
        nbytes = sum(_count(t, f"{tag}Bytes") for t in targets)
        stats, percentiles = _latency(latency, targets, tag) if latency is not None else (_ZERO, {})
        dirs[d] = DirectionResult(
            io_bytes=nbytes,
            total_ios=ios,
            runtime_ms=round(test_time_s * 1000),
            iops=ios / test_time_s,
            bw_bytes=nbytes / test_time_s,
            lat_ns=stats,
            clat_ns=stats,
            clat_percentiles_ns=percentiles,
            clat_bins_ns={},
            lat_percentiles_ns=percentiles,
        )
    result = DiskSpdResult(
        dirs=dirs,
        series=_series(root, span, list(dirs)),
        test_time_s=test_time_s,
        version=_text(root, "System/Tool/Version") or "unknown",
        has_latency=latency is not None,
        timing=read_timing(root, test_time_s),
        outstanding_ios=_outstanding(root),
        counters=counters_summary(span, test_time_s),
    )
    return result if start_unix_s is None else result.placed(start_unix_s)


def sample_from_xml(
    text: str, *, client: int, label: str, start_unix_s: float | None = None
) -> ClientSample:
    """One client for offline aggregation (``core.analysis.aggregate.aggregate``). DiskSpd keeps no
    histogram, so ``has_bins=False``: aggregated percentiles are the worst client's, marked
    inexact. Without ``start_unix_s`` series seconds are relative (1, 2, 3 ...), so several
    clients line up only if they started measuring together."""
    r = parse_xml(text, start_unix_s=start_unix_s)
    start_ms = round((start_unix_s or 0) * 1000)
    return ClientSample(
        client=client,
        dirs=r.dirs,
        timeline=timeline_from_seconds(start_ms, start_ms + round(r.test_time_s * 1000), r.series),
        agent_id=label,
        outstanding_ios=r.outstanding_ios,
        has_bins=False,
    )
