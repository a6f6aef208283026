"""The compiled kernels' pairwise sum equals numpy's ``ndarray.sum`` bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.simulate.fast._numeric import pairwise_sum


@settings(max_examples=300)
@given(st.integers(0, 700), st.integers(0, 2**32 - 1), st.integers(0, 5))
def test_pairwise_sum_is_numpys_sum(n, seed, offset):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal(n + offset) * 10.0 ** rng.uniform(-3, 6, n + offset)
    assert pairwise_sum(values, offset, n) == values[offset : offset + n].sum()


def test_a_left_to_right_sum_differs_so_the_test_can_fail():
    values = np.random.default_rng(1).standard_normal(200) * 1e6
    assert sum(values.tolist()) != values.sum()
    assert pairwise_sum(values, 0, 200) == values.sum()
