"""Tests for planner.simulate.fleet: cold start, routing, the ReplicaSet's deletion order, drain."""

from __future__ import annotations

import math

import numpy as np
import pytest

from planner.errors import PlannerInputError
from planner.simulate.fleet import ROUND_ROBIN, Fleet, FleetSpec, deletion_order
from planner.simulate.replica import CUT, DONE, ReplicaSpec, RequestState, advance_replica


def test_deletion_order_not_ready_first_then_most_recently_ready_then_newest():
    now = 10_000.0
    ready = np.array([True, False, True, True])
    ready_s = np.array([100.0, np.nan, 9_990.0, 5_000.0])
    requested_s = np.array([0.0, 9_999.0, 9_900.0, 4_000.0])
    uid = np.array([4, 3, 2, 1])
    order = deletion_order(ready, ready_s, requested_s, uid, now)
    # The pod still warming up goes first, then the one Ready 10 s ago, then 5,000 s ago, then the oldest.
    assert order.tolist() == [1, 2, 3, 0]


def test_deletion_order_ties_on_the_log_scale_break_by_uid():
    now = 1_000.0
    # Ready 300 s and 400 s ago: both in the same power-of-two bucket of nanoseconds.
    order = deletion_order(
        np.array([True, True]), np.array([700.0, 600.0]), np.array([0.0, 0.0]), np.array([9, 5]), now
    )
    assert math.floor(math.log2(300e9)) == math.floor(math.log2(400e9))
    assert order.tolist() == [1, 0]


def test_cold_start_pods_are_not_ready_and_serve_nothing():
    fleet = Fleet(FleetSpec(warmup_s=90.0))
    fleet.add_pod(0.0, warm=True)
    fleet.scale_to(3, 10.0)
    assert fleet.routable(50.0) == [0]
    assert fleet.routable(100.0) == [0, 1, 2]
    assert fleet.serving(50.0) == [0]


def test_warmup_distribution_is_seeded():
    spec = FleetSpec(warmup_s=60.0, warmup_distribution="lognormal", warmup_spread_s=20.0, seed=7)
    draws = []
    for _ in range(2):
        fleet = Fleet(spec)
        for _ in range(5):
            fleet.add_pod(0.0)
        draws.append(fleet.ready_s)
    assert draws[0] == draws[1]
    assert len(set(draws[0])) == 5


def _requests(n):
    return RequestState(np.zeros(n), np.full(n, 10), np.full(n, 100))


def test_least_loaded_and_round_robin_routing():
    req = _requests(4)
    fleet = Fleet(FleetSpec())
    for _ in range(2):
        fleet.add_pod(0.0, warm=True)
    fleet.running[0].extend([90, 91, 92])
    for i in range(3):
        fleet.route(i, 0.0, req, [0, 1])
    assert list(fleet.waiting[1]) == [0, 1, 2]
    robin = Fleet(FleetSpec(router=ROUND_ROBIN))
    for _ in range(2):
        robin.add_pod(0.0, warm=True)
    for i in range(4):
        robin.route(i, 0.0, req, [0, 1])
    assert list(robin.waiting[0]) == [0, 2] and list(robin.waiting[1]) == [1, 3]


def test_no_ready_pod_holds_requests_at_the_gateway():
    req = _requests(1)
    fleet = Fleet(FleetSpec(warmup_s=30.0))
    fleet.route(0, 0.0, req, fleet.routable(0.0))
    assert list(fleet.gateway) == [0]
    fleet.add_pod(0.0)
    fleet.release_gateway(40.0, req)
    assert list(fleet.waiting[0]) == [0] and not fleet.gateway


def _drain(spec: FleetSpec, output_tokens: int):
    # One pod holding one request, deleted at t = 0; run ticks until it is gone.
    replica = ReplicaSpec(fixed_ms=10.0, per_sequence_ms=0.0, max_num_seqs=4)
    req = RequestState(np.zeros(1), np.array([10]), np.array([output_tokens]))
    fleet = Fleet(spec)
    fleet.add_pod(0.0, warm=True)
    fleet.waiting[0].append(0)
    req.replica[0] = 0
    fleet.delete_pod(0, 0.0)
    t = 0.0
    while math.isnan(fleet.removed_s[0]) and t < 1000:
        fleet.finish_terminations(t, req)
        if math.isnan(fleet.removed_s[0]):
            advance_replica(t, 1.0, fleet.running[0], fleet.waiting[0], req, replica, stop_s=fleet.stop_s[0])
        t += 1.0
    return req, fleet


def test_shutdown_timeout_zero_cuts_the_generation_at_sigterm():
    req, fleet = _drain(FleetSpec(termination_grace_period_s=30.0, shutdown_timeout_s=0.0), 500)
    assert req.status[0] == CUT
    assert fleet.removed_s[0] == 0.0


def test_prestop_and_shutdown_timeout_drain_within_the_grace_period():
    # 500 tokens at 10 ms = 5 s: finishes during a 10 s preStop.
    req, fleet = _drain(FleetSpec(termination_grace_period_s=30.0, pre_stop_s=10.0), 500)
    assert req.status[0] == DONE
    assert fleet.removed_s[0] == pytest.approx(10.0)
    # 5,000 tokens = 50 s: --shutdown-timeout 60 is capped by the 30 s grace period.
    req, fleet = _drain(FleetSpec(termination_grace_period_s=30.0, shutdown_timeout_s=60.0), 5000)
    assert req.status[0] == CUT
    assert fleet.removed_s[0] == pytest.approx(30.0)
    req, fleet = _drain(FleetSpec(termination_grace_period_s=120.0, shutdown_timeout_s=100.0), 5000)
    assert req.status[0] == DONE
    assert fleet.removed_s[0] == pytest.approx(50.0, abs=1.0)


def test_billing_runs_from_request_to_removal():
    fleet = Fleet(FleetSpec(gpus_per_replica=2))
    fleet.add_pod(0.0)
    fleet.add_pod(1800.0)
    fleet.removed_s[0] = 3600.0
    assert fleet.gpu_hours(7200.0) == pytest.approx(2 * (1.0 + 1.5))


def test_terminating_pods_take_no_new_requests():
    fleet = Fleet(FleetSpec())
    fleet.add_pod(0.0, warm=True)
    fleet.add_pod(0.0, warm=True)
    fleet.delete_pod(1, 5.0)
    assert fleet.routable(6.0) == [0]
    assert fleet.live() == [0]


@pytest.mark.parametrize(
    ("field", "value"),
    [("router", "random"), ("warmup_s", -1.0), ("tick_s", 0.0), ("gpus_per_replica", 0), ("scrape_interval_s", 1.5)],
)
def test_bad_fleet_parameters_are_named(field, value):
    with pytest.raises(PlannerInputError, match=field):
        FleetSpec(**{field: value}, tick_s=1.0) if field != "tick_s" else FleetSpec(tick_s=value)
