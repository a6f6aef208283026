"""Tests for planner.simulate.reference: determinism, Little's law, billing, the controller's cadence."""

from __future__ import annotations

import numpy as np
import pytest

from planner.errors import PlannerInputError
from planner.simulate.fleet import FleetSpec
from planner.simulate.reference import simulate
from planner.simulate.replica import ReplicaSpec
from tests.simulate_helpers import cron_scaled_object, poisson_trace, scaled_object, write_manifest

FLEET = FleetSpec(
    replica=ReplicaSpec(fixed_ms=6.0, per_sequence_ms=0.25, max_num_seqs=64),
    warmup_s=60.0,
    warmup_distribution="lognormal",
    warmup_spread_s=20.0,
    seed=11,
)
IN_FLIGHT = "sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)"


def test_same_seed_same_result_bit_for_bit(tmp_path):
    trace = poisson_trace(lambda t: 5.0 if t < 150 else 15.0, 300.0, 200, 240, seed=5)
    manifest = write_manifest(tmp_path, scaled_object("chat", IN_FLIGHT, 20, min_replicas=1, down_window_s=30))
    first = simulate(trace, manifest, FLEET)
    second = simulate(trace, manifest, FLEET)
    assert first.summary() == second.summary()
    assert first.events == second.events and len(first.events) >= 2
    assert first.timeseries.equals(second.timeseries)
    assert np.array_equal(first.ttft_s, second.ttft_s, equal_nan=True)
    other_seed = simulate(trace, manifest, FleetSpec(**{**FLEET.__dict__, "seed": 12}))
    assert other_seed.timeseries["replicas_ready"].tolist() != first.timeseries["replicas_ready"].tolist()


def test_littles_law_holds_in_steady_state(tmp_path):
    # A fixed fleet of two replicas at 10 req/s: L = lambda x W within 2 %.
    trace = poisson_trace(10.0, 900.0, 200, 240, seed=6)
    manifest = write_manifest(tmp_path, scaled_object("chat", IN_FLIGHT, 20, min_replicas=2, max_replicas=2))
    outcome = simulate(trace, manifest, FleetSpec(replica=FLEET.replica), duration_s=1000.0)
    start_s, end_s = 120.0, 840.0
    window = outcome.timeseries.query(f"{start_s} < t_s <= {end_s}")
    in_system = (window["running"] + window["waiting"]).mean()
    arrived = (outcome.arrival_s >= start_s) & (outcome.arrival_s < end_s)
    rate_rps = arrived.sum() / (end_s - start_s)
    # Time in system from the per-request timeline the engine kept.
    ttft_s = outcome.ttft_s[arrived]
    assert np.isfinite(ttft_s).all()
    time_in_system_s = outcome.latency_s[arrived].mean()
    assert in_system == pytest.approx(rate_rps * time_in_system_s, rel=0.02)


def test_a_fixed_fleet_bills_replicas_times_duration(tmp_path):
    trace = poisson_trace(2.0, 300.0, 100, 100, seed=7)
    manifest = write_manifest(tmp_path, scaled_object("chat", IN_FLIGHT, 20, min_replicas=3, max_replicas=3))
    outcome = simulate(trace, manifest, FleetSpec(usd_per_gpu_hour=3.0, gpus_per_replica=2), duration_s=600.0)
    assert outcome.gpu_hours == pytest.approx(3 * 2 * 600.0 / 3600.0)
    assert outcome.cost_usd == pytest.approx(3.0 * outcome.gpu_hours)
    assert outcome.scale_events == 0


def test_keda_polls_on_its_interval_and_the_hpa_every_15_s(tmp_path):
    # A burst at t = 0 that needs more replicas: the first scale-up comes at a sync instant.
    trace = poisson_trace(lambda t: 40.0 if t < 120 else 0.0, 240.0, 200, 240, seed=8)
    manifest = write_manifest(tmp_path, scaled_object("chat", IN_FLIGHT, 10, min_replicas=1, polling_s=30))
    outcome = simulate(trace, manifest, FleetSpec(replica=FLEET.replica))
    assert outcome.events
    assert all(t % 15 == 0 for t, _, _ in outcome.events)


def test_a_polling_interval_off_the_tick_grid_is_refused(tmp_path):
    trace = poisson_trace(1.0, 30.0, 10, 10, seed=1)
    manifest = write_manifest(tmp_path, scaled_object("chat", IN_FLIGHT, 20, polling_s=15))
    with pytest.raises(PlannerInputError, match="pollingInterval 15 s"):
        simulate(trace, manifest, FleetSpec(tick_s=2.0, scrape_interval_s=16.0, hpa_sync_period_s=16.0))


def test_the_tick_is_made_of_separable_steps(tmp_path):
    # The steps a vectorised engine mirrors, run by hand, give the same run as simulate().
    from planner.simulate.control import Control
    from planner.simulate.fleet import Fleet
    from planner.simulate.reference import (
        RunState,
        control_step,
        fleet_step,
        record_step,
        route_step,
        scrape_step,
        serve_step,
    )
    from planner.simulate.replica import RequestState

    trace = poisson_trace(lambda t: 5.0 if t < 60 else 20.0, 120.0, 200, 240, seed=3)
    manifest = write_manifest(tmp_path, scaled_object("chat", IN_FLIGHT, 20, min_replicas=1))
    spec = FleetSpec(replica=FLEET.replica)
    whole = simulate(trace, manifest, spec, duration_s=120.0)
    state = RunState(
        spec, Control(manifest), RequestState(trace.arrival_s, trace.input_tokens, trace.output_tokens), Fleet(spec)
    )
    state.fleet.add_pod(0.0, warm=True)
    state.spec_replicas = 1
    for k in range(120):
        control_step(state, float(k))
        fleet_step(state, float(k))
        arrived = route_step(state, float(k), k + 1.0)
        serve_step(state, float(k))
        if (k + 1) % 15 == 0:
            scrape_step(state, k + 1.0)
        record_step(state, k + 1.0, arrived, 1.0)
    assert state.events == list(whole.events)
    assert np.array_equal(state.req.done_s, whole.latency_s + whole.arrival_s, equal_nan=True)


# --- the wall clock: cron triggers ------------------------------------------------------------------

DAY_FLEET = FleetSpec(
    replica=ReplicaSpec(fixed_ms=6.0, per_sequence_ms=0.25, max_num_seqs=64), warmup_s=60.0, tick_s=15.0
)
WEEKDAYS_8_TO_18 = ("0 8 * * MON-FRI", "0 18 * * MON-FRI", "Europe/Dublin")


def _window(outcome, from_s: float, to_s: float):
    """The rows of ticks that start in ``[from_s, to_s)`` (a row is stamped with its tick's end)."""
    series = outcome.timeseries
    return series[(series["t_s"] > from_s) & (series["t_s"] <= to_s)]


def test_a_cron_window_holds_desired_replicas_through_a_day(tmp_path):
    # Monday 2024-01-01 from 00:00 UTC (Dublin is on GMT): light load that one replica serves alone.
    trace = poisson_trace(0.2, 86400.0, 200, 100, seed=3, tick_s=60.0)
    manifest = write_manifest(
        tmp_path, cron_scaled_object("chat", IN_FLIGHT, 20, [(*WEEKDAYS_8_TO_18, 4)], min_replicas=1, max_replicas=8)
    )
    outcome = simulate(trace, manifest, DAY_FLEET, duration_s=86400.0)
    assert outcome.events[0] == (8 * 3600.0, 1, 4)  # the first HPA sync at 08:00 asks for the window's 4
    inside = _window(outcome, 8 * 3600, 18 * 3600)
    assert inside["replicas_requested"].min() == 4
    assert _window(outcome, 8 * 3600 + 60, 18 * 3600)["replicas_ready"].min() == 4  # Ready once warm
    assert _window(outcome, 0, 8 * 3600)["replicas_requested"].max() == 1
    # 18:00 closes the window; the HPA's 300 s scale-down window holds 4 until 18:05.
    assert _window(outcome, 18 * 3600, 18 * 3600 + 300)["replicas_requested"].min() == 4
    assert _window(outcome, 18 * 3600 + 300, 86400)["replicas_requested"].max() == 1
    assert (18 * 3600.0 + 300, 4, 1) in outcome.events


def test_the_start_moves_the_window_and_a_weekend_has_none(tmp_path):
    trace = poisson_trace(0.2, 6 * 3600.0, 200, 100, seed=3, tick_s=60.0)
    manifest = write_manifest(tmp_path, cron_scaled_object("chat", IN_FLIGHT, 20, [(*WEEKDAYS_8_TO_18, 4)]))
    monday_7 = DAY_FLEET.start_epoch_s + 7 * 3600
    opened = simulate(trace, manifest, FleetSpec(**{**DAY_FLEET.__dict__, "start_epoch_s": monday_7}))
    assert opened.events[0] == (3600.0, 1, 4)  # 08:00 Dublin is one hour in
    saturday = DAY_FLEET.start_epoch_s + 5 * 86400 + 7 * 3600
    weekend = simulate(trace, manifest, FleetSpec(**{**DAY_FLEET.__dict__, "start_epoch_s": saturday}))
    assert weekend.events == ()


def test_a_cron_window_respects_behavior_and_max_replica_count(tmp_path):
    trace = poisson_trace(0.2, 4 * 3600.0, 200, 100, seed=3, tick_s=60.0)
    text = cron_scaled_object(
        "chat", IN_FLIGHT, 20, [("0 1 * * *", "0 3 * * *", "UTC", 10)], max_replicas=6, up_policy="Pods:1:60"
    )
    outcome = simulate(trace, write_manifest(tmp_path, text), DAY_FLEET)
    ups = [event for event in outcome.events if event[2] > event[1]]
    # One pod per 60 s (the scale-up policy) from 01:00, up to maxReplicaCount 6, not desiredReplicas 10.
    assert [(t - 3600.0, before, after) for t, before, after in ups] == [
        (0.0, 1, 2), (60.0, 2, 3), (120.0, 3, 4), (180.0, 4, 5), (240.0, 5, 6)
    ]  # fmt: skip
    assert _window(outcome, 3600 + 240, 3 * 3600)["replicas_requested"].min() == 6
