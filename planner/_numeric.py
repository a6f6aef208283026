"""Small numeric helpers shared by the maths modules."""

from __future__ import annotations

import numpy as np

# Products of decimal inputs pick up float noise (0.7 x 10 = 7.000000000000001);
# rounding to 1e-9 before ceil or floor keeps that noise from moving a count by one.
COUNT_DECIMALS = 9


def ceil_count(values):
    """Round counts up, ignoring float noise below 1e-9; int or int array."""
    return as_int(np.ceil(np.round(values, COUNT_DECIMALS)))


def floor_count(values):
    """Round counts down, ignoring float noise below 1e-9; int or int array."""
    return as_int(np.floor(np.round(values, COUNT_DECIMALS)))


def as_int(values):
    """A Python int for a scalar, an int64 array otherwise."""
    if np.ndim(values) == 0:
        return int(values)
    return np.asarray(values, dtype=np.int64)
