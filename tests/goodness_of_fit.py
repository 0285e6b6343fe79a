"""Statistical helpers shared by the tests: chi-square goodness of fit of integer draws to a known law.

Every statistical test of the suite fails with probability at most :data:`ALPHA` when the code under test is
correct (OpenDP's convention for sampler tests), and each asserts the p-value against it.

>>> import numpy as np
>>> from privsyn_core.privacy.noise import discrete_laplace
>>> draws = discrete_laplace(2.0, 20_000, np.random.default_rng(0))
>>> bool(discrete_laplace_pvalue(draws, 2.0) > ALPHA), bool(discrete_laplace_pvalue(draws, 1.0) < ALPHA)
(True, True)
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from scipy import stats

from privsyn_core.privacy.noise import discrete_laplace_pmf

#: False-failure rate of each statistical test.
ALPHA = 1e-6

#: Smallest expected count of a chi-square bin (Cochran's rule); smaller bins are pooled.
MIN_EXPECTED = 5.0


def chi_square_pvalue(samples: np.ndarray, pmf: Callable[[np.ndarray], np.ndarray], support: np.ndarray) -> float:
    r"""Chi-square p-value of integer ``samples`` against the law with probability mass ``pmf`` on ``support``.

    The bins are the points of ``support`` plus one bin for everything outside it (mass :math:`1 - \sum pmf`);
    bins with expected count below :data:`MIN_EXPECTED` are pooled into one (a draw in a pool of mass 0 gives
    p = 0).  Under the null the statistic is :math:`\chi^2_{k-1}` asymptotically.

    Parameters
    ----------
    samples : numpy.ndarray
        Integer draws.
    pmf : callable
        Probability mass function, vectorised over an integer array.
    support : numpy.ndarray
        The integers given a bin of their own (before pooling).

    Returns
    -------
    float
        The p-value.
    """
    samples = np.asarray(samples)
    n = len(samples)
    observed = np.array([np.count_nonzero(samples == z) for z in support], dtype=float)
    expected = np.asarray(pmf(support), dtype=float) * n
    observed = np.append(observed, n - observed.sum())  # outside the support
    expected = np.append(expected, n - expected.sum())
    keep = expected >= MIN_EXPECTED
    pooled_obs = np.append(observed[keep], observed[~keep].sum())
    pooled_exp = np.append(expected[keep], expected[~keep].sum())
    if pooled_exp[-1] <= 0:  # no mass in the pool: a draw there is impossible under the null
        if pooled_obs[-1] > 0:
            return 0.0
        pooled_obs, pooled_exp = pooled_obs[:-1], pooled_exp[:-1]
    return float(stats.chisquare(pooled_obs, pooled_exp).pvalue)


def discrete_laplace_pvalue(samples: np.ndarray, sigma: float) -> float:
    r"""Chi-square p-value of integer ``samples`` against the discrete Laplace law :math:`Lap_\mathbb{Z}(\sigma)`.

    :math:`P(Z = z) \propto e^{-|z|/\sigma}`; the support tested point by point is :math:`|z| \le 12\sigma + 3`
    (beyond it the tails are pooled with the sparse bins).
    """
    half = int(12 * sigma) + 3
    support = np.arange(-half, half + 1)
    return chi_square_pvalue(samples, lambda s: discrete_laplace_pmf(s, sigma), support)
