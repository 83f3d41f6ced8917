"""The few distribution functions the statistics need, straight from :mod:`scipy.special`.

``scipy.stats`` costs about a CPU second to import (its ~100 distribution classes), once per command, while
every test here needs only Student's t, the normal quantile and the chi-square tail. These are the special
functions that ``scipy.stats``' own distributions evaluate (SciPy 1.17, ``stats/_continuous_distns.py``:
``t._cdf = stdtr``, ``t._ppf = stdtrit``, ``norm._ppf = ndtri``, ``chi2._sf = chdtrc``), so the values are the
same to the bit. Each takes scalars or NumPy arrays.
"""

from __future__ import annotations

import numpy as np
from scipy import special


def t_cdf(x, df):
    """Student's t CDF, P(T ≤ x) on ``df`` degrees of freedom."""
    return special.stdtr(df, x)


def t_sf(x, df):
    """Student's t survival function, P(T > x) (= CDF at −x, by symmetry)."""
    return special.stdtr(df, np.negative(x))


def t_ppf(q, df):
    """Student's t quantile: the x with P(T ≤ x) = ``q``; −∞ at 0 and +∞ at 1, as ``scipy.stats`` sets the
    support's ends (``stdtrit`` itself gives +∞ at 0)."""
    x = special.stdtrit(df, q)
    return np.where(np.asarray(q) == 0, -np.inf, x)[()] if np.any(np.asarray(q) == 0) else x


def norm_ppf(q):
    """The standard normal quantile."""
    return special.ndtri(q)


def chi2_sf(x, df):
    """The chi-square survival function, P(X > x) on ``df`` degrees of freedom."""
    return special.chdtrc(df, x)
