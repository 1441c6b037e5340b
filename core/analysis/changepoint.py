"""Change-point detection for benchmark time series (pure, numpy only).

Method: Apache Otava's split and merge (formerly Hunter: Fleming et al., 2023, "Hunter: Using
Change Point Detection to Hunt for Performance Regressions", ICPE,
doi:10.1145/3578244.3583719; ``split``, ``merge`` and ``compute_change_points`` in Otava's
``otava/analysis.py``) around E-divisive means (Matteson & James, 2014; ``core.analysis.edivisive``)
with Otava's t-test significance (``core.analysis.student_t``), in three steps:

1. Split (Otava's ``split``): windows of ``window`` points, each starting half a window
   after the previous one or at the last split found, whichever is later. In each window
   E-divisive's bisection finds the significant splits: O(window^2) per window and about
   2 n / window windows, so time grows linearly with n and memory stays O(window^2 + n).
   Searched whole, the series cost O(n^2) in both (8,000 points: 11.8 s and 4.4 GiB).
   Consecutive windows overlap by half a window, so every index has ``min_size`` points
   either side in some window; a window starts at or after every split found so far, so
   no split is found twice. A series of at most ``window`` points is one window, searched
   whole as M&J and MongoDB (Daly et al., 2020, "Change Point Detection in Software
   Performance Testing", ICPE, doi:10.1145/3358960.3379127) do.
2. Select (our addition): the windows' splits are only candidates. They are re-chosen by
   bisection over the whole series: in a segment (the whole series first) the candidate
   with the largest t statistic is tested on the segment's two sides and, when
   significant, splits it. Why: each window tests afresh, so a long series gets about
   2 n / window chances for a run of noise to look significant inside its window (the
   t-test tests the split chosen to look most different), and a short run keeps looking
   different from long neighbours in the merge step below. Measured on 20 series of 8,000
   points of pure noise (1.5-4 %), with the default floor: 10 false changes without this
   step, none with it; in one window it changes nothing (the 10,000 series of
   bench/detect.py give the same answers). A split must hold against everything up to
   its neighbouring splits, as when the whole series was one window, at O(n) cost
   (prefix sums). The price, as when searched whole (same counts at 2,000 points): a short
   dip that recovers to the same level in a long series shows only if it moves the mean
   of everything after it; at 8,000 points and 3 % noise a 10 % dip of 60 points is found
   in 4 of 10 series, of 100 points in all.
3. Merge (Otava's ``merge``): each split is re-tested between its final neighbours and,
   while one fails, the weakest is dropped and its neighbours re-tested. Then, as with
   Otava's ``min_magnitude``, while the smallest change is below ``min_magnitude_pct`` it
   is dropped and its neighbours re-tested. So every reported p-value is the one over the
   adjacent segments, it is significant, and every reported change is at least the floor.
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core.analysis.edivisive import bisect
from core.analysis.magnitude import DEFAULT_MIN_MAGNITUDE_PCT
from core.analysis.student_t import SplitT, ttest_pvalue

FloatArray = npt.NDArray[np.float64]

DEFAULT_PVALUE = 0.001
MIN_SIZE = 5
# Otava's default is 50; 200 keeps a benchmark history of up to 200 points in one window,
# searched whole as before, and costs about 1 ms per window.
WINDOW = 200


@dataclass(frozen=True)
class ChangePoint:
    """A significant change: ``index`` is the 0-based index of the first value after it.

    The statistics are over the adjacent segments: from the previous change point (or the
    start) to this one, and from this one to the next (or the end). Standard deviations are
    sample ones (ddof=1). ``change_pct`` is (after - before) / before * 100, and 0.0 when
    the mean before is 0 (Otava's convention; it keeps the figure finite for JSON).
    """

    index: int
    before_mean: float
    after_mean: float
    before_std: float
    after_std: float
    change_pct: float
    pvalue: float

    @property
    def magnitude_pct(self) -> float:
        """The larger of the relative changes forward and backward, in percent (Otava's
        ``change_magnitude``): a step down and the same step back up weigh the same."""
        forward = abs(self.after_mean / self.before_mean - 1.0) if self.before_mean else 0.0
        backward = abs(self.before_mean / self.after_mean - 1.0) if self.after_mean else 0.0
        return max(forward, backward) * 100.0


def detect(
    values: Sequence[float],
    *,
    pvalue: float = DEFAULT_PVALUE,
    min_size: int = MIN_SIZE,
    min_magnitude_pct: float = DEFAULT_MIN_MAGNITUDE_PCT,
    window: int = WINDOW,
) -> list[ChangePoint]:
    """Change points of a series: E-divisive means with a t-test in windows, their splits
    re-selected over the whole series, then Otava's merge with a floor on the magnitude,
    ``min_magnitude_pct`` percent (see the module doc and ``ChangePoint.magnitude_pct``).

    Matteson & James (2014) for the statistic and the bisection; Fleming et al. (2023) for
    the t-test, the windows and the merge step. Returns the change points sorted by index;
    none when the series is shorter than ``2 * min_size``.
    """
    if not 0.0 < pvalue < 1.0:
        raise ValueError(f"pvalue must be in (0, 1), got {pvalue}")
    if min_size < 2:
        # Q and the t-test divide by (size - 1).
        raise ValueError(f"min_size must be at least 2, got {min_size}")
    if not (math.isfinite(min_magnitude_pct) and min_magnitude_pct >= 0.0):
        raise ValueError(f"min_magnitude_pct must be a number >= 0, got {min_magnitude_pct}")
    if window < 4 * min_size:
        # Half-window steps must leave min_size points either side of every index.
        raise ValueError(f"window must be at least 4 * min_size = {4 * min_size}, got {window}")
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError("values must be a one-dimensional sequence")
    if not np.all(np.isfinite(x)):
        raise ValueError("values must be finite numbers")
    if len(x) < 2 * min_size:
        return []
    candidates = _split(x, pvalue, min_size, window)
    return _merge(x, _select(x, candidates, pvalue, min_size), pvalue, min_magnitude_pct)


def _split(x: FloatArray, pvalue: float, min_size: int, window: int) -> list[int]:
    """Otava's split step: the union of the splits found in each window, sorted."""
    splits: list[int] = []
    start = 0
    while True:
        end = min(start + window, len(x))
        splits += [start + i for i in bisect(x[start:end], pvalue=pvalue, min_size=min_size)]
        if end == len(x):
            return splits
        # Later windows find only splits at least min_size after this one: no duplicates.
        start = max(splits[-1] if splits else 0, start + window // 2)


def _select(x: FloatArray, candidates: list[int], pvalue: float, min_size: int) -> list[int]:
    """The candidates (sorted) that hold over the whole series, by bisection over them.

    In a segment (the whole series first), the candidate whose split has the largest t
    statistic between the two sides is tested; when significant it splits the segment and
    both halves are searched in turn, else the segment is done. As in one window's
    bisection, a split must hold against everything up to its neighbouring splits, so a
    short run of noise that looked different inside one window is dropped when the series
    around it is long and stable (see the module doc).
    """
    cand = np.asarray(candidates, dtype=np.int64)  # sorted: see _split
    t_of = SplitT(x)
    chosen: list[int] = []
    pending = [(0, len(x))] if candidates else []
    while pending:
        start, end = pending.pop()
        first = int(np.searchsorted(cand, start + min_size))
        last = int(np.searchsorted(cand, end - min_size, side="right"))
        if first >= last:
            continue
        taus = cand[first:last]
        best = int(taus[int(np.argmax(t_of.squared(start, end, taus)))])
        if ttest_pvalue(x[start:best], x[best:end]) <= pvalue:
            chosen.append(best)
            pending += [(start, best), (best, end)]
    return sorted(chosen)


def classify(cp: ChangePoint, *, higher_is_better: bool) -> str:
    """``"regression"`` when the mean moved the bad way for the metric, else ``"improvement"``.

    IOPS and bandwidth are higher-is-better; latencies are lower-is-better.
    """
    worse = cp.after_mean < cp.before_mean if higher_is_better else cp.after_mean > cp.before_mean
    return "regression" if worse else "improvement"


def detect_csv(
    text: str,
    *,
    higher_is_better: bool | None = None,
    pvalue: float = DEFAULT_PVALUE,
    min_magnitude_pct: float = DEFAULT_MIN_MAGNITUDE_PCT,
) -> dict[str, list[dict[str, int | str | float]]]:
    """Change points of one series given as CSV with the header ``timestamp,value``.

    Returns ``{"change_points": [{"index", "timestamp", "before", "after", "change_pct",
    "pvalue"}, ...]}``, with ``"kind"`` added to each when ``higher_is_better`` is given.
    Raises ValueError naming the row and column of bad input. Method: see ``detect``.
    """
    rows = [row for row in csv.reader(io.StringIO(text.lstrip("\ufeff"))) if row]
    if not rows:
        raise ValueError("CSV is empty: expected a header 'timestamp,value'")
    header = [cell.strip().lower() for cell in rows[0]]
    if header != ["timestamp", "value"]:
        raise ValueError(
            f"CSV row 1 (header): expected 'timestamp,value', got {','.join(rows[0])!r}"
        )
    timestamps: list[str] = []
    values: list[float] = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) != 2:
            raise ValueError(
                f"CSV row {number}: expected 2 columns (timestamp,value), got {len(row)}"
            )
        stamp, cell = row[0].strip(), row[1].strip()
        if not stamp:
            raise ValueError(f"CSV row {number}, column 'timestamp': empty")
        try:
            value = float(cell)
        except ValueError:
            raise ValueError(
                f"CSV row {number}, column 'value': {cell!r} is not a number"
            ) from None
        if not math.isfinite(value):
            raise ValueError(f"CSV row {number}, column 'value': {cell!r} is not a finite number")
        timestamps.append(stamp)
        values.append(value)
    if len(values) < 2 * MIN_SIZE:
        raise ValueError(
            f"CSV has {len(values)} data rows: at least {2 * MIN_SIZE} are needed "
            f"({MIN_SIZE} on each side of a change)"
        )

    found: list[dict[str, int | str | float]] = []
    for cp in detect(values, pvalue=pvalue, min_magnitude_pct=min_magnitude_pct):
        item: dict[str, int | str | float] = {
            "index": cp.index,
            "timestamp": timestamps[cp.index],
            "before": cp.before_mean,
            "after": cp.after_mean,
            "change_pct": cp.change_pct,
            "pvalue": cp.pvalue,
        }
        if higher_is_better is not None:
            item["kind"] = classify(cp, higher_is_better=higher_is_better)
        found.append(item)
    return {"change_points": found}


def _merge(
    x: FloatArray, splits: list[int], pvalue: float, min_magnitude_pct: float
) -> list[ChangePoint]:
    """Otava's merge step (Fleming et al., 2023; ``merge`` in otava/analysis.py): re-test each
    change point between its neighbours and drop the weakest failing one; once all pass, drop
    the smallest change while it is below the floor (Otava's ``min_magnitude``). After each
    drop only the neighbours' segments changed, so only they are re-tested."""
    points = [_describe(x, splits, i) for i in range(len(splits))]
    while points:
        weakest = max(range(len(points)), key=lambda i: points[i].pvalue)
        if points[weakest].pvalue <= pvalue:
            weakest = min(range(len(points)), key=lambda i: points[i].magnitude_pct)
            if points[weakest].magnitude_pct >= min_magnitude_pct:
                break
        del splits[weakest]
        del points[weakest]
        for i in (weakest - 1, weakest):
            if 0 <= i < len(points):
                points[i] = _describe(x, splits, i)
    return points


def at_splits(values: Sequence[float], splits: Sequence[int]) -> list[ChangePoint]:
    """Change points at given indices (sorted), each with the statistics over its adjacent
    segments, as ``detect`` reports them: another metric's figures at the change points of
    one it follows (bandwidth at those of IOPS, core.analysis.series)."""
    x = np.asarray(values, dtype=np.float64)
    cuts = list(splits)
    return [_describe(x, cuts, i) for i in range(len(cuts))]


def _describe(x: FloatArray, splits: list[int], i: int) -> ChangePoint:
    """The change point splits[i] with stats over its adjacent segments."""
    lo = splits[i - 1] if i > 0 else 0
    hi = splits[i + 1] if i + 1 < len(splits) else len(x)
    before, after = x[lo : splits[i]], x[splits[i] : hi]
    before_mean, after_mean = float(before.mean()), float(after.mean())
    return ChangePoint(
        index=splits[i],
        before_mean=before_mean,
        after_mean=after_mean,
        before_std=float(before.std(ddof=1)),
        after_std=float(after.std(ddof=1)),
        change_pct=(after_mean - before_mean) / before_mean * 100.0 if before_mean else 0.0,
        pvalue=ttest_pvalue(before, after),
    )
