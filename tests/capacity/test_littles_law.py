import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.capacity.littles_law import (
    drain_rate_rps,
    in_flight_requests,
    per_replica_load,
    queue_threshold_requests,
    replicas_for_target,
)
from planner.errors import PlannerInputError


def test_w11_ten_rps_for_twelve_seconds_needs_three_replicas_at_target_40():
    in_flight = in_flight_requests(10.0, 12.0)
    assert in_flight == 120.0
    assert replicas_for_target(in_flight, 40.0) == 3


def test_w12_sixteen_rps_needs_five_replicas_at_38_4_each():
    in_flight = in_flight_requests(16.0, 12.0)
    assert in_flight == 192.0
    assert per_replica_load(in_flight, 3) == pytest.approx(64.0)
    replicas = replicas_for_target(in_flight, 40.0)
    assert replicas == 5
    assert per_replica_load(in_flight, replicas) == pytest.approx(38.4)
    assert per_replica_load(in_flight, replicas) < 48  # under the knee


def test_w13_drain_rate_at_the_knee():
    assert drain_rate_rps(48.0, 12.0) == 4.0


def test_w32_drain_rate_and_queue_threshold():
    mu = drain_rate_rps(258.0, 10.0)
    assert mu == pytest.approx(25.8)
    assert queue_threshold_requests(5.0, mu) == pytest.approx(129.0)


def test_w33_demo_rig_threshold_about_seven():
    threshold = queue_threshold_requests(15.0, 0.46)
    assert threshold == pytest.approx(6.9)
    assert round(threshold) == 7


def test_float_noise_does_not_add_a_replica():
    # 0.7 x 10 = 7.000000000000001 in float64; a plain ceil would ask for 2.
    assert replicas_for_target(in_flight_requests(0.7, 10.0), 7.0) == 1


def test_idle_fleet_still_needs_one_replica():
    assert replicas_for_target(0.0, 40.0) == 1


def test_vectorised_over_arrival_rates():
    rates = np.array([5.0, 10.0, 16.0])
    replicas = replicas_for_target(in_flight_requests(rates, 12.0), 40.0)
    assert replicas.tolist() == [2, 3, 5]
    assert replicas.dtype == np.int64


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: in_flight_requests(-1.0, 12.0), "arrival_rate_rps"),
        (lambda: in_flight_requests(10.0, 0.0), "time_in_system_s"),
        (lambda: in_flight_requests(float("nan"), 12.0), "arrival_rate_rps"),
        (lambda: replicas_for_target(120.0, 0.0), "per_replica_target"),
        (lambda: drain_rate_rps(48.0, -12.0), "request_duration_s"),
        (lambda: queue_threshold_requests(float("inf"), 1.0), "wait_budget_s"),
        (lambda: per_replica_load(100.0, 0), "replicas"),
    ],
)
def test_meaningless_inputs_name_the_parameter(call, name):
    with pytest.raises(PlannerInputError, match=name):
        call()


@given(
    rate=st.floats(0, 1e4),
    extra=st.floats(0, 1e4),
    time_s=st.floats(0.01, 600),
    target=st.floats(1, 512),
)
def test_replicas_never_fall_as_arrivals_rise(rate, extra, time_s, target):
    low = replicas_for_target(in_flight_requests(rate, time_s), target)
    high = replicas_for_target(in_flight_requests(rate + extra, time_s), target)
    assert high >= low


@given(in_flight=st.floats(0, 1e6), target=st.floats(1, 512))
def test_replicas_hold_the_target(in_flight, target):
    replicas = replicas_for_target(in_flight, target)
    assert in_flight / replicas <= target * (1 + 1e-9)
    assert replicas == 1 or in_flight / (replicas - 1) > target * (1 - 1e-9)
    assert math.isfinite(replicas)
