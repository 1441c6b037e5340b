"""Change-point detection for benchmark time series (pure, numpy only).

Method: E-divisive means (Matteson & James, 2014, "A Nonparametric Approach for Multiple
Change Point Analysis of Multivariate Data", JASA 109(505), doi:10.1080/01621459.2013.849605,
arXiv:1306.4933) with the significance test of Apache Otava, formerly Hunter (Fleming et al.,
2023, "Hunter: Using Change Point Detection to Hunt for Performance Regressions", ICPE,
doi:10.1145/3578244.3583719), as Otava 0.8.0 implements it in ``otava/analysis.py``.

- Candidate: in a segment Z[s:e], the tau and kappa that maximise the energy statistic
  Q(Z[s:tau], Z[tau:kappa]) with alpha = 1, as in M&J (and Otava's PairDistanceCalculator;
  MongoDB's implementation fixes kappa = e). Every block sum of pair distances comes from one
  2-D prefix sum of |z_i - z_j|, so a segment costs O((e - s)^2) numpy work, no Python loop.
- Significance: a two-sided Student's t-test (pooled variance) between the two sides of the
  split, as Otava's ``TTestSignificanceTester`` does, instead of M&J's permutation test.
  Why: a permutation p-value can only reach 0.001 with at least 999 permutations of the
  O(n^2) search (about 1000x the search: around a second per 200-point series, not a
  millisecond), and it is random; the t-test is deterministic and closed-form. Its known
  weakness: it tests a split chosen to look different (selection bias), so the nominal
  p-value is optimistic on pure noise. At the default 0.001, 48 of 2000 pure-noise series
  of 150 points (2.4%) get a change; at 0.0001, 2 of 2000 (see tests and bench/detect.py).
  Otava passes population (ddof=0) standard deviations to the t-test; here they are the
  sample (ddof=1) ones the test is defined with.
- Which split is tested (our addition): the t-test compares the whole segment either side,
  at tau and, when kappa < e, at kappa; the more significant is kept. Testing tau alone
  misses a dip that recovers to a different level: Q rightly pairs tau with kappa at the
  recovery, but Z[tau:e] mixes both levels and its mean difference washes out (50 of 2101
  two-step series missed in bench/detect.py; none with kappa tested, same false positives).
  Testing Z[s:tau] against Z[tau:kappa] instead quadrupled the false positives (194 of 2000).
- Hierarchy: recursive bisection as in M&J: split a segment, recurse on both halves, stop in
  a segment whose best split is not significant; each side of a split keeps at least
  ``min_size`` points (ecp's ``min.size``). Then Otava's merge step (Fleming et al.): each
  change point is re-tested between its final neighbours and, while one fails, the weakest is
  dropped and its neighbours re-tested. So every reported p-value is the one over the
  adjacent segments, and it is significant.

Unlike Otava's ``compute_change_points``, there are no sliding windows: the whole series is
searched at once, as M&J and MongoDB (Daly et al., 2020, "Change Point Detection in Software
Performance Testing", ICPE, doi:10.1145/3358960.3379127) do; windows pay off for series of
thousands of points, not the hundreds a benchmark history has.
"""

from __future__ import annotations

import csv
import functools
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

DEFAULT_PVALUE = 0.001
MIN_SIZE = 5
# Relative size under which a spread or a difference of means is rounding, not signal
# (a constant series' mean and variance carry error of this order).
_ROUNDING = 1e-12


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


def detect(
    values: Sequence[float], *, pvalue: float = DEFAULT_PVALUE, min_size: int = MIN_SIZE
) -> list[ChangePoint]:
    """Change points of a series by E-divisive means with a t-test (see the module doc).

    Matteson & James (2014) for the statistic and the bisection; Fleming et al. (2023) for
    the t-test and the merge step. Returns the change points sorted by index; none when the
    series is shorter than ``2 * min_size``.
    """
    if not 0.0 < pvalue < 1.0:
        raise ValueError(f"pvalue must be in (0, 1), got {pvalue}")
    if min_size < 2:
        # Q and the t-test divide by (size - 1).
        raise ValueError(f"min_size must be at least 2, got {min_size}")
    x = np.asarray(values, dtype=np.float64)
    if x.ndim != 1:
        raise ValueError("values must be a one-dimensional sequence")
    if not np.all(np.isfinite(x)):
        raise ValueError("values must be finite numbers")
    n = len(x)
    if n < 2 * min_size:
        return []

    prefix = _pair_prefix_sums(x)
    weights = _q_weights(n, min_size)
    splits: list[int] = []
    pending = [(0, n)]
    while pending:
        start, end = pending.pop()
        if end - start < 2 * min_size:
            continue
        tau, kappa = _best_split(prefix, weights, start, end, min_size)
        # kappa too: a dip that recovers elsewhere only shows as a split there.
        best_p, best = _ttest_pvalue(x[start:tau], x[tau:end]), tau
        if end - kappa >= min_size:
            p_kappa = _ttest_pvalue(x[start:kappa], x[kappa:end])
            if p_kappa < best_p:
                best_p, best = p_kappa, kappa
        if best_p <= pvalue:
            splits.append(best)
            pending += [(start, best), (best, end)]
    splits.sort()
    return _merge(x, splits, pvalue)


def classify(cp: ChangePoint, *, higher_is_better: bool) -> str:
    """``"regression"`` when the mean moved the bad way for the metric, else ``"improvement"``.

    IOPS and bandwidth are higher-is-better; latencies are lower-is-better.
    """
    worse = cp.after_mean < cp.before_mean if higher_is_better else cp.after_mean > cp.before_mean
    return "regression" if worse else "improvement"


def detect_csv(
    text: str, *, higher_is_better: bool | None = None, pvalue: float = DEFAULT_PVALUE
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
    for cp in detect(values, pvalue=pvalue):
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


def _pair_prefix_sums(x: FloatArray) -> FloatArray:
    """P[a, b] = sum of |x_i - x_j| over i < a, j < b: any block sum in four look-ups."""
    n = len(x)
    prefix = np.zeros((n + 1, n + 1))
    prefix[1:, 1:] = np.abs(x[:, None] - x[None, :]).cumsum(axis=0).cumsum(axis=1)
    return prefix


@dataclass(frozen=True)
class _QWeights:
    """Weights of Q over the relative grid (tau - start, kappa - start) of any segment.

    Q(X, Y) = 2/(n+m) S_XY - 2m/((n+m)(n-1)) W_X - 2n/((n+m)(m-1)) W_Y, with n = |X|,
    m = |Y|, S_XY the sum of cross distances and W_X, W_Y the sums over pairs within
    (M&J's Q = mn/(m+n) E, with E's binomial coefficients written out). The weights depend only on
    n = tau - start and m = kappa - tau, so the grid of a segment of length L is the
    top-left corner of the grid of the whole series: computed once per series.
    """

    cross: FloatArray  # 2/(n+m), applied to the parts of S_XY that are not P[tau, kappa]
    tau_kappa: FloatArray  # the weight of P[tau, kappa]: in S_XY and, twice, in W_Y
    within_x: FloatArray  # 2m/((n+m)(n-1))
    diagonal: FloatArray  # n/((n+m)(m-1)): W_Y's P[kappa, kappa] + P[tau, tau], halved
    invalid: FloatArray  # 0 where |Y| >= min_size, -inf elsewhere


# Series of one length come in runs (a metric's history); keep a few grids, read-only.
@functools.lru_cache(maxsize=8)
def _q_weights(length: int, min_size: int) -> _QWeights:
    n_x = np.arange(min_size, length - min_size + 1, dtype=np.float64)[:, None]
    kappa = np.arange(2 * min_size, length + 1, dtype=np.float64)[None, :]
    n_y = kappa - n_x
    valid = n_y >= min_size
    total = n_x + n_y
    n_y_safe = np.where(valid, n_y, 2.0)  # keeps the unused cells finite
    cross = 2.0 / total
    diagonal = n_x / (total * (n_y_safe - 1.0))
    weights = _QWeights(
        cross=cross,
        tau_kappa=cross + 2.0 * diagonal,
        within_x=2.0 * n_y / (total * (n_x - 1.0)),
        diagonal=diagonal,
        invalid=np.where(valid, 0.0, -np.inf),
    )
    for grid in (weights.cross, weights.tau_kappa, weights.within_x, weights.diagonal):
        grid.setflags(write=False)  # shared by the cache
    weights.invalid.setflags(write=False)
    return weights


def _best_split(
    prefix: FloatArray, weights: _QWeights, start: int, end: int, min_size: int
) -> tuple[int, int]:
    """The (tau, kappa) maximising M&J's Q(Z[start:tau], Z[tau:kappa]) (alpha = 1).

    Block sums from the prefix sums: S_XY = P[t,k] - P[s,k] - P[t,t] + P[s,t],
    2 W_X = P[t,t] - 2 P[s,t] + P[s,s], 2 W_Y = P[k,k] - 2 P[t,k] + P[t,t] (P symmetric).
    Both sides keep min_size points.
    """
    size = end - start - 2 * min_size + 1
    taus = slice(start + min_size, end - min_size + 1)
    kappas = slice(start + 2 * min_size, end + 1)
    diag = np.diagonal(prefix)
    p_tt, p_kk = diag[taus], diag[kappas]
    p_st, p_sk = prefix[start, taus], prefix[start, kappas]
    p_tk = prefix[taus, kappas]
    within_x = (p_tt - 2.0 * p_st + prefix[start, start]) / 2.0
    cw = weights.cross[:size, :size]
    q = weights.tau_kappa[:size, :size] * p_tk
    q += cw * ((p_st - p_tt)[:, None] - p_sk[None, :])
    q -= weights.within_x[:size, :size] * within_x[:, None]
    q -= weights.diagonal[:size, :size] * (p_kk[None, :] + p_tt[:, None])
    q += weights.invalid[:size, :size]
    row, col = divmod(int(np.argmax(q)), size)
    return start + min_size + row, start + 2 * min_size + col


def _ttest_pvalue(left: FloatArray, right: FloatArray) -> float:
    """Two-sided p-value of Student's two-sample t-test with pooled variance.

    The test Otava's TTestSignificanceTester applies (scipy's ttest_ind_from_stats with
    equal_var=True), here with ddof=1 variances. With no spread on either side the test is
    undefined: equal means are no change (p = 1), different means a certain one (p = 0).
    """
    n1, n2 = len(left), len(right)
    mean1, mean2 = float(left.mean()), float(right.mean())
    pooled = (float(((left - mean1) ** 2).sum()) + float(((right - mean2) ** 2).sum())) / (
        n1 + n2 - 2
    )
    scale = max(abs(mean1), abs(mean2), 1e-300)
    diff = mean2 - mean1
    std_err = math.sqrt(pooled * (1.0 / n1 + 1.0 / n2))
    if std_err <= _ROUNDING * scale:
        return 1.0 if abs(diff) <= _ROUNDING * scale else 0.0
    return _student_t_two_sided(diff / std_err, n1 + n2 - 2)


def _student_t_two_sided(t: float, df: int) -> float:
    """P(|T| >= |t|) for Student's t with df degrees of freedom: I_{df/(df+t^2)}(df/2, 1/2).

    Abramowitz & Stegun 26.7.1; the incomplete beta by its continued fraction.
    """
    return _regularized_beta(df / (df + t * t), df / 2.0, 0.5)


def _regularized_beta(x: float, a: float, b: float) -> float:
    """I_x(a, b) by the continued fraction of A&S 26.5.8, evaluated with modified Lentz.

    The method of Press et al., Numerical Recipes (3rd ed.), section 6.4 (``betai``/
    ``betacf``): the fraction converges fast for x < (a+1)/(a+b+2), else use symmetry.
    """
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = (
        math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    )
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(x, a, b) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(1.0 - x, b, a) / b


def _beta_fraction(x: float, a: float, b: float) -> float:
    tiny = 1e-300
    c = 1.0
    d = 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 1000):
        # Even then odd term of the fraction (A&S 26.5.8).
        for numerator in (
            m * (b - m) * x / ((a + 2 * m - 1.0) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1.0)),
        ):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return result


def _merge(x: FloatArray, splits: list[int], pvalue: float) -> list[ChangePoint]:
    """Otava's merge step (Fleming et al., 2023; otava.analysis.merge): re-test each change point
    between its neighbours; drop the weakest failing one and re-test until all pass."""
    points = [_describe(x, splits, i) for i in range(len(splits))]
    while points:
        weakest = max(range(len(points)), key=lambda i: points[i].pvalue)
        if points[weakest].pvalue <= pvalue:
            break
        del splits[weakest]
        del points[weakest]
        # Only the neighbours' segments changed.
        for i in (weakest - 1, weakest):
            if 0 <= i < len(points):
                points[i] = _describe(x, splits, i)
    return points


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
        pvalue=_ttest_pvalue(before, after),
    )
