"""The outcome kernel against the numpy functions it replaces, bit for bit."""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.simulate.fast.outcome import request_summary
from planner.simulate.outcome import request_latencies, slo_met
from planner.simulate.replica import CUT, DONE, RUNNING, WAITING, RequestState


def requests(n: int, seed: int) -> RequestState:
    """Requests in every state: done, cut, running with or without a first token, waiting; 1-token answers."""
    rng = np.random.default_rng(seed)
    arrival_s = np.sort(rng.uniform(0.0, 100.0, n))
    req = RequestState(arrival_s, rng.integers(1, 500, n), rng.choice([1, 2, 7, 300], n))
    req.status[:] = rng.choice([DONE, CUT, RUNNING, WAITING], n)
    has_first = (req.status == DONE) | (rng.random(n) < 0.6)
    req.first_token_s = np.where(has_first, arrival_s + rng.exponential(2.0, n), np.nan)
    req.done_s = np.where(req.status == DONE, req.first_token_s + rng.exponential(5.0, n), np.nan)
    return req


@settings(max_examples=60, deadline=None)
@given(
    st.integers(0, 400), st.integers(0, 10_000), st.sampled_from([0.5, 2.0, 10.0]), st.sampled_from([None, 5.0, 40.0])
)
def test_the_kernel_computes_what_the_numpy_functions_do(n, seed, ttft_slo_s, itl_slo_ms):
    req = requests(n, seed)
    ttft_s, met = np.empty(n), np.empty(n, dtype=bool)
    finite_ttft_s, finite_itl_ms = np.empty(n), np.empty(n)
    n_met, n_done, n_cut, n_ttft, itl_mean_ms = request_summary(
        req.arrival_s,
        req.output_tokens,
        req.status,
        req.first_token_s,
        req.done_s,
        ttft_slo_s + 1e-9,
        itl_slo_ms + 1e-9 if itl_slo_ms is not None else math.nan,
        ttft_s,
        met,
        finite_ttft_s,
        finite_itl_ms,
    )
    expected_ttft, expected_itl = request_latencies(req)
    expected_met = slo_met(req, ttft_slo_s, itl_slo_ms)
    assert np.array_equal(ttft_s, expected_ttft, equal_nan=True)
    assert np.array_equal(met, expected_met)
    assert n_met == np.count_nonzero(expected_met) and (n == 0 or n_met / n == float(expected_met.mean()))
    assert n_done == np.count_nonzero(req.status == DONE) and n_cut == np.count_nonzero(req.status == CUT)
    finite_ttft = expected_ttft[np.isfinite(expected_ttft)]
    assert np.array_equal(finite_ttft_s[:n_ttft], finite_ttft)
    finite_itl = expected_itl[np.isfinite(expected_itl)]
    if finite_itl.size:
        assert itl_mean_ms == float(finite_itl.mean())  # numpy's pairwise sum, over the count
    else:
        assert math.isnan(itl_mean_ms)


def test_means_over_more_than_one_block_are_numpys():
    # Past 128 values numpy's sum splits in halves: the kernel must too.
    req = requests(5000, 3)
    req.status[:] = DONE
    req.first_token_s = req.arrival_s + 0.1
    req.done_s = req.first_token_s + np.random.default_rng(4).uniform(0.0, 60.0, 5000)
    n = len(req)
    out = [np.empty(n), np.empty(n, dtype=bool), np.empty(n), np.empty(n)]
    itl_mean_ms = request_summary(
        req.arrival_s, req.output_tokens, req.status, req.first_token_s, req.done_s, 2.0, math.nan, *out
    )[4]
    _, itl_ms = request_latencies(req)
    assert itl_mean_ms == float(itl_ms[np.isfinite(itl_ms)].mean())
