import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.capacity.headroom import (
    backlog_requests,
    backlog_trajectory_requests,
    extra_replicas_frac,
    fleet_capacity_rps,
    growth_during_gap_rps,
    growth_rate_rps_per_s,
    reaction_time_s,
    replicas_for_step,
    step_headroom_frac,
    target_for_step,
)
from planner.capacity.littles_law import drain_rate_rps, in_flight_requests, replicas_for_target
from planner.errors import PlannerInputError


def test_w13_three_replicas_at_the_knee_serve_12_rps():
    mu = drain_rate_rps(48.0, 12.0)
    assert mu == 4.0
    assert fleet_capacity_rps(3, mu) == 12.0


def test_w14_backlog_during_a_240_s_warmup():
    assert backlog_requests(16.0, 12.0, 240.0) == 960.0


def test_w15_target_40_against_knee_48_absorbs_20_percent():
    assert step_headroom_frac(48, 40) == pytest.approx(0.20)


def test_w16_absorbing_a_60_percent_step_costs_a_third_more_gpus():
    target = target_for_step(48, 0.6)
    assert target == pytest.approx(30.0)
    in_flight = in_flight_requests(10.0, 12.0)
    baseline = replicas_for_step(in_flight, 48, 0.6)
    assert baseline == 4
    reference = replicas_for_target(in_flight, 40)
    assert reference == 3
    assert extra_replicas_frac(baseline, reference) == pytest.approx(1 / 3)


def test_w17_target_from_a_load_test_knee():
    assert target_for_step(48, 0.2) == pytest.approx(40.0)
    assert target_for_step(48, 0.0) == 48.0


def test_w18_reaction_time():
    assert reaction_time_s(30, 15, 60) == 105.0


def test_w19_growth_during_the_gap():
    slope = growth_rate_rps_per_s(30, 50, 600)
    assert slope == pytest.approx(0.0333, abs=1e-4)
    grown = growth_during_gap_rps(slope, reaction_time_s(30, 15, 60))
    assert grown == pytest.approx(3.5)
    assert grown / 33 == pytest.approx(0.10, abs=0.01)  # about 10 % of a 33 req/s fleet


def test_w20_step_deficit_before_help_arrives():
    assert backlog_requests(75.0, 33.0, 90.0) == pytest.approx(3780.0)


def test_no_backlog_when_capacity_covers_arrivals():
    assert backlog_requests(10.0, 12.0, 240.0) == 0.0


def test_trajectory_grows_then_drains():
    time_s = np.array([0.0, 60.0, 120.0, 180.0, 240.0])
    arrival = np.array([16.0, 16.0, 10.0, 10.0, 10.0])
    queue = backlog_trajectory_requests(time_s, arrival, 12.0)
    assert queue.tolist() == [0.0, 240.0, 480.0, 360.0, 240.0]


def test_trajectory_rejects_unordered_times():
    with pytest.raises(PlannerInputError, match="increasing"):
        backlog_trajectory_requests([0.0, 10.0, 5.0], 1.0, 1.0)


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: backlog_requests(-1, 12, 240), "arrival_rate_rps"),
        (lambda: step_headroom_frac(48, 0), "target_concurrency"),
        (lambda: target_for_step(48, -0.1), "step_frac"),
        (lambda: reaction_time_s(30, float("nan"), 60), "eval_interval_s"),
        (lambda: growth_rate_rps_per_s(30, 50, 0), "ramp_s"),
    ],
)
def test_meaningless_inputs_name_the_parameter(call, name):
    with pytest.raises(PlannerInputError, match=name):
        call()


@given(arrival=st.floats(0, 1e4), capacity=st.floats(0, 1e4), duration=st.floats(0, 3600))
def test_backlog_is_never_negative(arrival, capacity, duration):
    assert backlog_requests(arrival, capacity, duration) >= 0


@given(st.lists(st.tuples(st.floats(0, 100), st.floats(0, 100)), min_size=1, max_size=50))
def test_trajectory_is_never_negative(rates):
    arrival, capacity = (np.array(column) for column in zip(*rates, strict=True))
    queue = backlog_trajectory_requests(np.arange(arrival.size) * 15.0, arrival, capacity)
    assert np.all(queue >= 0)


@given(knee=st.floats(1, 512), step=st.floats(0, 5))
def test_target_for_step_absorbs_exactly_that_step(knee, step):
    assert step_headroom_frac(knee, target_for_step(knee, step)) == pytest.approx(step, abs=1e-9)


def test_step_frac_of_ten_to_sixteen_is_sixty_percent():
    from planner.capacity.headroom import step_frac

    assert step_frac(10.0, 16.0) == pytest.approx(0.6)
    assert step_frac(10.0, 8.0) == 0.0
    with pytest.raises(PlannerInputError, match="arrival_rate_rps"):
        step_frac(0.0, 16.0)


def test_step_backlog_grows_for_the_reaction_time_then_drains():
    from planner.capacity.headroom import step_backlog_trajectory_requests

    queue = step_backlog_trajectory_requests(np.array([0.0, 50.0, 100.0, 150.0]), 30.0, 75.0, 33.0, 80.0, 90.0)
    # 42 requests/s queue until 90 s (3,780), then 5 requests/s drain.
    assert queue.tolist() == [0.0, 2100.0, 3730.0, 3480.0]
    # The switch is sampled exactly even when the grid does not hit it.
    assert step_backlog_trajectory_requests(np.array([0.0, 90.0]), 30, 75, 33, 80, 90)[-1] == 3780.0


def test_a_backlog_clears_only_when_capacity_exceeds_arrivals():
    from planner.capacity.headroom import backlog_clear_s

    assert backlog_clear_s(3780.0, 80.0, 75.0) == 756.0
    assert backlog_clear_s(10.0, 75.0, 75.0) == float("inf")
    assert backlog_clear_s(0.0, 70.0, 75.0) == 0.0
    assert backlog_clear_s(np.array([10.0, 10.0]), np.array([80.0, 70.0]), 75.0).tolist() == [2.0, float("inf")]


def test_the_hpa_tolerance_eats_into_the_headroom():
    # The HPA adds a replica only above 1.1 x T, so at worst the fleet is at 44 per replica when a
    # rise starts: 48 / 44 - 1 = 9 % headroom, not 20 %.
    assert step_headroom_frac(48, 40, tolerance_frac=0.1) == pytest.approx(48 / 44 - 1)
    assert step_headroom_frac(48, 40, tolerance_frac=0.0) == pytest.approx(0.2)
    # The target that absorbs a 60 % step from anywhere in the band: 48 / (1.6 x 1.1).
    assert target_for_step(48, 0.6, tolerance_frac=0.1) == pytest.approx(27.2727, abs=1e-4)
    assert target_for_step(48, 0.6, tolerance_frac=0.1) * 1.1 * 1.6 == pytest.approx(48)
    with pytest.raises(PlannerInputError):
        target_for_step(48, 0.6, tolerance_frac=-0.1)


def test_a_ramp_queues_half_its_growth_times_the_square_of_the_time_past_the_spare():
    from planner.capacity.headroom import ramp_backlog_requests

    # 1 request/s more every minute, 13.6 requests/s spare (gone after 816 s), a 996 s cold start.
    growth = 1.0 / 60.0
    assert ramp_backlog_requests(growth, 996.0, 13.6) == pytest.approx(0.5 * growth * (996.0 - 816.0) ** 2)
    assert ramp_backlog_requests(growth, 800.0, 13.6) == 0.0  # still inside the spare capacity
    assert ramp_backlog_requests(0.0, 996.0, 13.6) == 0.0  # no growth, no queue
    assert isinstance(ramp_backlog_requests(growth, 996.0), float)
    times = np.array([0.0, 816.0, 996.0])
    assert ramp_backlog_requests(growth, times, 13.6).tolist() == pytest.approx([0.0, 0.0, 270.0])
    with pytest.raises(PlannerInputError, match="spare_rps"):
        ramp_backlog_requests(growth, 10.0, -1.0)


@given(st.floats(1e-4, 1.0), st.floats(0.0, 50.0), st.floats(1.0, 2000.0))
def test_the_ramp_backlog_is_the_fluid_queue_of_a_linear_ramp(growth, spare, duration):
    from planner.capacity.headroom import ramp_backlog_requests

    # The same queue integrated numerically: arrivals rising from the capacity minus the spare.
    time_s = np.linspace(0.0, duration, 20001)
    midpoints = (time_s[:-1] + time_s[1:]) / 2
    arrivals = np.append(100.0 - spare + growth * midpoints, 0.0)
    queue = backlog_trajectory_requests(time_s, arrivals, 100.0)
    exact = ramp_backlog_requests(growth, duration, spare)
    assert queue[-1] == pytest.approx(exact, rel=1e-3, abs=1e-3 * (1 + growth * duration**2))
