"""Student's two-sample t-test, closed form (pure, no scipy): the significance test of the
change-point detection in ``core.analysis.changepoint``."""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Relative size under which a spread or a difference of means is rounding, not signal
# (a constant series' mean and variance carry error of this order).
ROUNDING = 1e-12
# Relative rounding of a difference of running sums of squares (a few dozen float64 ulps).
ROUNDING_OF_SUMS = 32 * float(np.finfo(np.float64).eps)


def ttest_pvalue(left: FloatArray, right: FloatArray) -> float:
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
    if std_err <= ROUNDING * scale:
        return 1.0 if abs(diff) <= ROUNDING * scale else 0.0
    return student_t_two_sided(diff / std_err, n1 + n2 - 2)


def student_t_two_sided(t: float, df: int) -> float:
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


class SplitT:
    """Student's t (squared) of splitting ``x[start:end]`` at each of many points, each in
    O(1) from prefix sums of x and x^2, so a segment's candidates are ranked without
    slicing. The same pooled-variance statistic as ``ttest_pvalue``."""

    def __init__(self, x: FloatArray) -> None:
        centred = x - x.mean()  # sums of squares of centred values lose less to rounding
        self._sums = np.concatenate(([0.0], np.cumsum(centred)))
        self._squares = np.concatenate(([0.0], np.cumsum(centred * centred)))
        # A floor on the pooled variance (rounding of the spread) keeps t finite on
        # noise-free steps, as ttest_pvalue's p = 0 does.
        self._least_variance = (ROUNDING * (float(np.abs(centred).max()) or 1.0)) ** 2

    def squared(self, start: int, end: int, taus: npt.NDArray[np.int64]) -> FloatArray:
        """t^2 between x[start:tau] and x[tau:end] for each tau (start < tau < end - 1)."""
        n_1, n_2 = (taus - start).astype(np.float64), (end - taus).astype(np.float64)
        sum_1 = self._sums[taus] - self._sums[start]
        sum_2 = self._sums[end] - self._sums[taus]
        total = self._squares[end] - self._squares[start]
        within = total - sum_1 * sum_1 / n_1 - sum_2 * sum_2 / n_2
        # ``within`` is a difference of prefix sums: its rounding grows with the squares
        # summed up to ``end``. A variance below that is no spread at all; flooring it there
        # ranks noise-free splits by their difference of means, not by the rounding left.
        noise = ROUNDING_OF_SUMS * self._squares[end]
        least = max(self._least_variance, noise / (end - start - 2.0))
        pooled = np.maximum(within / (n_1 + n_2 - 2.0), least)
        diff = sum_2 / n_2 - sum_1 / n_1
        squared: FloatArray = diff * diff / (pooled * (1.0 / n_1 + 1.0 / n_2))
        return squared
