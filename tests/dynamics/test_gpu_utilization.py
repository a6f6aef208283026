"""GPU utilization as NVML defines it, and what an HPA on it does."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.dynamics.gpu_utilization import (
    busy_frac_poisson,
    nvml_utilization_frac,
    replica_utilization_frac,
    utilization_hpa_trace,
)
from planner.errors import PlannerInputError


def test_nvml_definition_is_busy_time_over_the_period():
    assert nvml_utilization_frac(0.97, 1.0) == pytest.approx(0.97)
    assert nvml_utilization_frac(np.array([0.0, 1 / 6]), 1 / 6).tolist() == [0.0, 1.0]


@pytest.mark.parametrize(("busy_s", "period_s"), [(1.5, 1.0), (-0.1, 1.0), (0.5, 0.0)])
def test_nvml_refuses_impossible_samples(busy_s, period_s):
    with pytest.raises(PlannerInputError):
        nvml_utilization_frac(busy_s, period_s)


def test_idle_only_with_nothing_in_flight():
    # M/G/inf: in flight ~ Poisson(L), idle with probability exp(-L).
    assert busy_frac_poisson(0.0) == 0.0
    assert busy_frac_poisson(1.0) == pytest.approx(1 - math.exp(-1))
    assert busy_frac_poisson(3.0) == pytest.approx(0.9502, abs=1e-4)
    assert replica_utilization_frac(np.array([3.0]), 0.97)[0] == pytest.approx(0.97 * 0.9502, abs=1e-4)


@given(st.floats(0, 500), st.floats(0, 500))
def test_utilization_never_falls_as_load_rises(a, b):
    low, high = sorted((a, b))
    assert replica_utilization_frac(low) <= replica_utilization_frac(high) <= 0.97


def test_a_target_below_the_reading_pins_the_fleet_at_max():
    # 97 % against a 70 % target: ratio 1.386 at every evaluation -> maxReplicas.
    trace = utilization_hpa_trace(70.0, 120.0, 4, 16, 60.0, 600.0)
    assert trace["utilization_pct"].iloc[0] == pytest.approx(97.0, abs=0.01)
    assert trace["desired_replicas"].is_monotonic_increasing
    assert trace["desired_replicas"].iloc[-1] == 16
    assert "TooManyReplicas" in set(trace["reason"])
    # Pods still warming report no metric: the controller waits for them before adding more.
    assert trace["desired_replicas"].tolist()[:5] == [6, 6, 6, 6, 9]


def test_a_target_within_the_tolerance_never_acts():
    # 97 / 95 = 1.021, inside the 0.1 tolerance.
    trace = utilization_hpa_trace(95.0, 120.0, 4, 16, 60.0, 600.0)
    assert (trace["desired_replicas"] == 4).all()


def test_the_outcome_flips_at_the_tolerance():
    finals = {t: utilization_hpa_trace(t, 120.0, 4, 16, 60.0, 300.0)["desired_replicas"].iloc[-1] for t in (88.0, 89.0)}
    # 97/88 = 1.102 > 1.1: one more replica each warmup, without end; 97/89 = 1.090: never.
    assert finals[88.0] == 10 and finals[89.0] == 4


def test_bad_fleet_sizes_are_refused():
    with pytest.raises(PlannerInputError, match="min_replicas <= start_replicas <= max_replicas"):
        utilization_hpa_trace(70.0, 120.0, 20, 16, 60.0, 600.0)
