"""Aggregating one step of 24, 100 and 1,000 clients x 600 s (issue 17, point 8).

Each client runs at a constant rate of its own (1,000 + its index IOPS) for 600 s, with a
per-second latency histogram of 8 buckets (and, as a second row each, without: the
stored timeline's I/O and byte counts only), started on the same instant: the figure the
aggregate must give is the sum of the rates (checked, a known load), and its time is that
of ``core.analysis.aggregate.aggregate`` over the clients' stored timelines (median of 3,
wall and CPU; the machine is shared, CPU time is the steadier figure).
Usage: .venv/bin/python bench/aggregate_scale.py [--clients 24 100 1000] [--seconds 600]
Writes bench/out/aggregate_scale.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

from core.analysis.aggregate import aggregate
from core.models import DirectionResult, LatencyStats
from core.timeline import ClientSample, ClientTimeline, DirectionTimeline

OUT = Path(__file__).parent / "out"
T0 = 1_800_000_000_000
BUCKETS = [50_000 * 2**k for k in range(8)]  # ns


def sample(i: int, seconds: int, histograms: bool) -> ClientSample:
    rate = 1000.0 + i
    share = rate / len(BUCKETS)
    hist = {str(b): share for b in BUCKETS}
    stats = LatencyStats(min=BUCKETS[0], max=BUCKETS[-1], mean=BUCKETS[3], stddev=BUCKETS[2])
    whole = DirectionResult(
        io_bytes=int(rate * 4096 * seconds),
        total_ios=int(rate * seconds),
        runtime_ms=seconds * 1000,
        iops=rate,
        bw_bytes=rate * 4096,
        lat_ns=stats,
        clat_ns=stats,
        clat_percentiles_ns={"50.000000": float(BUCKETS[3]), "99.000000": float(BUCKETS[7])},
        clat_bins_ns={str(b): int(share * seconds) for b in BUCKETS},
    )
    timeline = ClientTimeline(
        start_ms=T0,
        end_ms=T0 + seconds * 1000,
        read=DirectionTimeline(
            ios=[rate] * seconds,
            bytes=[rate * 4096] * seconds,
            hist=[hist] * seconds if histograms else None,
        ),
    )
    return ClientSample(client=i, dirs={"read": whole}, timeline=timeline, start_skew_ms=0.0)


def measure(clients: int, seconds: int, repeat: int, histograms: bool) -> dict[str, Any]:
    samples = [sample(i, seconds, histograms) for i in range(clients)]
    expected = sum(1000.0 + i for i in range(clients))
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        agg = aggregate(samples)
        walls.append(time.perf_counter() - w)
        cpus.append(time.process_time() - c)
        assert agg.read is not None
        got = agg.read.iops
        if abs(got - expected) > 1e-6 * expected:
            raise AssertionError(f"{clients} clients: aggregate {got} IOPS, the load is {expected}")
    return {
        "clients": clients,
        "seconds": seconds,
        "histograms": histograms,
        "wall_s_median": statistics.median(walls),
        "cpu_s_median": statistics.median(cpus),
        "iops": expected,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", type=int, nargs="+", default=[24, 100, 1000])
    p.add_argument("--seconds", type=int, default=600)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", type=Path, default=OUT / "aggregate_scale.json")
    a = p.parse_args()
    # Both shapes of stored timeline: counts only, and with per-second latency histograms.
    rows = [measure(n, a.seconds, a.repeat, hist) for hist in (False, True) for n in a.clients]
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps({"rows": rows}, indent=2))
    for r in rows:
        print(json.dumps(r))


if __name__ == "__main__":
    main()
