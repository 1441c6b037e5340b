"""E-divisive means on one window of a series (pure, numpy only): the split step of
``core.analysis.changepoint``.

Matteson & James (2014), "A Nonparametric Approach for Multiple Change Point Analysis of
Multivariate Data", JASA 109(505), doi:10.1080/01621459.2013.849605, arXiv:1306.4933.

- Candidate: in a segment Z[s:e], the tau and kappa that maximise the energy statistic
  Q(Z[s:tau], Z[tau:kappa]) with alpha = 1, as in M&J (and Otava's PairDistanceCalculator;
  MongoDB's implementation fixes kappa = e). Every block sum of pair distances comes from one
  2-D prefix sum of |z_i - z_j| over the window, so a segment costs O((e - s)^2) numpy work,
  no Python loop, and a window of w points O(w^2) memory: bounded, since the caller never
  hands over more than one window.
- Significance: a two-sided Student's t-test (pooled variance) between the two sides of the
  split, as Otava's ``TTestSignificanceTester`` does, instead of M&J's permutation test.
  Why: a permutation p-value can only reach 0.001 with at least 999 permutations of the
  O(n^2) search (about 1000x the search), and it is random; the t-test is deterministic and
  closed-form. Its known weakness: it tests a split chosen to look different (selection
  bias), so the nominal p-value is optimistic on pure noise; the merge step and the
  magnitude floor of ``core.analysis.changepoint`` answer that.
- Which split is tested (our addition): the t-test compares the whole segment either side,
  at tau and, when kappa < e, at kappa; the more significant is kept. Testing tau alone
  misses a dip that recovers to a different level: Q rightly pairs tau with kappa at the
  recovery, but Z[tau:e] mixes both levels and its mean difference washes out (50 of 2101
  two-step series missed in bench/detect.py; none with kappa tested, same false positives).
  Testing Z[s:tau] against Z[tau:kappa] instead quadrupled the false positives (194 of 2000).
- Hierarchy: recursive bisection as in M&J: split a segment, recurse on both halves, stop in
  a segment whose best split is not significant; each side of a split keeps at least
  ``min_size`` points (ecp's ``min.size``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from core.analysis.student_t import ttest_pvalue

FloatArray = npt.NDArray[np.float64]


def bisect(x: FloatArray, *, pvalue: float, min_size: int) -> list[int]:
    """The significant splits of ``x`` (indices into it, sorted) by M&J's bisection.

    Costs O(len(x)^2) time and memory: the caller passes one window, not a long series.
    """
    n = len(x)
    if n < 2 * min_size:
        return []
    prefix = pair_prefix_sums(x)
    weights = q_weights(n, min_size)
    splits: list[int] = []
    pending = [(0, n)]
    while pending:
        start, end = pending.pop()
        if end - start < 2 * min_size:
            continue
        tau, kappa = best_split(prefix, weights, start, end, min_size)
        # kappa too: a dip that recovers elsewhere only shows as a split there.
        best_p, best = ttest_pvalue(x[start:tau], x[tau:end]), tau
        if end - kappa >= min_size:
            p_kappa = ttest_pvalue(x[start:kappa], x[kappa:end])
            if p_kappa < best_p:
                best_p, best = p_kappa, kappa
        if best_p <= pvalue:
            splits.append(best)
            pending += [(start, best), (best, end)]
    return sorted(splits)


def pair_prefix_sums(x: FloatArray) -> FloatArray:
    """P[a, b] = sum of |x_i - x_j| over i < a, j < b: any block sum in four look-ups."""
    n = len(x)
    prefix = np.zeros((n + 1, n + 1))
    prefix[1:, 1:] = np.abs(x[:, None] - x[None, :]).cumsum(axis=0).cumsum(axis=1)
    return prefix


@dataclass(frozen=True)
class QWeights:
    """Weights of Q over the relative grid (tau - start, kappa - start) of any segment.

    Q(X, Y) = 2/(n+m) S_XY - 2m/((n+m)(n-1)) W_X - 2n/((n+m)(m-1)) W_Y, with n = |X|,
    m = |Y|, S_XY the sum of cross distances and W_X, W_Y the sums over pairs within
    (M&J's Q = mn/(m+n) E, with E's binomial coefficients written out). The weights depend
    only on n = tau - start and m = kappa - tau, so the grid of a segment of length L is the
    top-left corner of the grid of the whole window: computed once per window length.
    """

    cross: FloatArray  # 2/(n+m), applied to the parts of S_XY that are not P[tau, kappa]
    tau_kappa: FloatArray  # the weight of P[tau, kappa]: in S_XY and, twice, in W_Y
    within_x: FloatArray  # 2m/((n+m)(n-1))
    diagonal: FloatArray  # n/((n+m)(m-1)): W_Y's P[kappa, kappa] + P[tau, tau], halved
    invalid: FloatArray  # 0 where |Y| >= min_size, -inf elsewhere


# Windows mostly have one length (the window) and series of one length come in runs (a
# metric's history); keep a few grids, read-only.
@functools.lru_cache(maxsize=8)
def q_weights(length: int, min_size: int) -> QWeights:
    n_x = np.arange(min_size, length - min_size + 1, dtype=np.float64)[:, None]
    kappa = np.arange(2 * min_size, length + 1, dtype=np.float64)[None, :]
    n_y = kappa - n_x
    valid = n_y >= min_size
    total = n_x + n_y
    n_y_safe = np.where(valid, n_y, 2.0)  # keeps the unused cells finite
    cross = 2.0 / total
    diagonal = n_x / (total * (n_y_safe - 1.0))
    weights = QWeights(
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


def best_split(
    prefix: FloatArray, weights: QWeights, start: int, end: int, min_size: int
) -> tuple[int, int]:
    """The (tau, kappa) maximising M&J's Q(Z[start:tau], Z[tau:kappa]) (alpha = 1).

    Block sums from the prefix sums: S_XY = P[t,k] - P[s,k] - P[t,t] + P[s,t],
    2 W_X = P[t,t] - 2 P[s,t] + P[s,s], 2 W_Y = P[k,k] - 2 P[t,k] + P[t,t] (P symmetric).
    Both sides keep min_size points. Ties go to the smallest tau, then the smallest kappa.
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
