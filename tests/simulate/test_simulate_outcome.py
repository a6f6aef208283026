"""Tests for planner.simulate.outcome: attainment, flaps."""

from __future__ import annotations

import numpy as np
import pytest

from planner.simulate.outcome import count_flaps, request_latencies, slo_attainment_frac
from planner.simulate.replica import CUT, DONE, RequestState


def test_flap_cycles_count_capacity_removed_then_asked_for_again():
    assert count_flaps([(0, 1, 2), (15, 2, 3), (60, 3, 1), (90, 1, 2), (200, 2, 1), (230, 1, 3)]) == (4, 2)
    assert count_flaps([(0, 1, 2), (700, 2, 1)]) == (1, 0)
    assert count_flaps([]) == (0, 0)


def test_attainment_counts_cut_and_unserved_requests_as_misses():
    req = RequestState(np.zeros(4), np.full(4, 10), np.array([1, 11, 11, 11]))
    req.first_token_s[:] = [0.5, 1.0, 3.0, np.nan]
    req.done_s[:] = [0.5, 2.0, 4.0, np.nan]
    req.status[:] = [DONE, DONE, CUT, 0]
    ttft_s, itl_ms = request_latencies(req)
    assert ttft_s[:3].tolist() == [0.5, 1.0, 3.0]
    assert itl_ms[1] == pytest.approx(100.0)
    assert slo_attainment_frac(req, ttft_slo_s=2.0) == 0.5
    assert slo_attainment_frac(req, ttft_slo_s=2.0, itl_slo_ms=50.0) == 0.25
