import itertools
import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.dynamics.kv_ramp import (
    compare_ramps,
    max_usage_ratio,
    ramp_replicas,
    scale_up_periods,
    warmups_to_reach,
)
from planner.errors import PlannerInputError


def test_w8_largest_ratio_at_target_080_is_125():
    assert max_usage_ratio(0.8) == 1.25


def test_w9_four_to_about_ten_takes_three_warmups():
    assert ramp_replicas(4, 0.8, 4).tolist() == [4, 5, 7, 9, 12]
    assert warmups_to_reach(4, 9, 0.8) == 3
    assert warmups_to_reach(4, 10, 0.8) == 4


def test_w4_unbounded_signal_steps_4_8_10():
    assert scale_up_periods(4, 10) == 2


def test_bounded_ramp_is_slower_than_an_unbounded_signal():
    comparison = compare_ramps(4, 10, 0.8, 240.0)
    assert comparison.bounded_time_s == 4 * 240.0
    assert comparison.unbounded_time_s == 240.0 + 15.0
    assert comparison.bounded_replicas[-1] >= 10


def test_target_inside_tolerance_never_scales():
    # 1 / 0.95 = 1.053 is within the 0.1 tolerance
    assert warmups_to_reach(4, 10, 0.95) is None
    assert ramp_replicas(4, 0.95, 3).tolist() == [4, 4, 4, 4]
    assert math.isinf(compare_ramps(4, 10, 0.95, 240.0).bounded_time_s)


def test_ramp_stops_once_the_load_is_served():
    assert ramp_replicas(4, 0.8, 7, goal_replicas=10).tolist() == [4, 5, 7, 9, 12, 12, 12, 12]
    assert ramp_replicas(4, 0.5, 5, goal_replicas=10).tolist() == [4, 8, 16, 16, 16, 16]  # the last step overshoots
    assert ramp_replicas(12, 0.8, 2, goal_replicas=10).tolist() == [12, 12, 12]  # already served
    with pytest.raises(PlannerInputError, match="goal_replicas"):
        ramp_replicas(4, 0.8, 2, goal_replicas=0)


@given(st.integers(1, 30), st.integers(1, 60), st.sampled_from([0.5, 0.6, 0.7, 0.8, 0.85, 0.9]))
def test_a_goal_ramp_ends_where_warmups_to_reach_says(start, goal, target):
    needed = warmups_to_reach(start, goal, target)
    ramp = ramp_replicas(start, target, needed + 3, goal_replicas=goal)
    assert ramp[needed] >= goal and (needed == 0 or ramp[needed - 1] < goal)
    assert (ramp[needed:] == ramp[needed]).all()  # nothing after the goal


def test_max_replicas_caps_the_ramp():
    assert ramp_replicas(4, 0.5, 3, max_replicas=10).tolist() == [4, 8, 10, 10]


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: max_usage_ratio(0.0), "target_frac"),
        (lambda: max_usage_ratio(1.5), "target_frac"),
        (lambda: ramp_replicas(0, 0.8, 3), "start_replicas"),
        (lambda: ramp_replicas(4, 0.8, -1), "n_warmups"),
        (lambda: ramp_replicas(4.5, 0.8, 2), "start_replicas"),
        (lambda: compare_ramps(4, 10, 0.8, 0.0), "warmup_s"),
    ],
)
def test_meaningless_inputs_name_the_parameter(call, name):
    with pytest.raises(PlannerInputError, match=name):
        call()


@given(start=st.integers(1, 200), target=st.floats(0.3, 1.0), warmups=st.integers(0, 8))
def test_ramps_are_monotonic_and_never_exceed_the_bound(start, target, warmups):
    ramp = ramp_replicas(start, target, warmups)
    assert np.all(np.diff(ramp) >= 0)
    bound = max_usage_ratio(target)
    for before, after in itertools.pairwise(ramp):
        assert after <= math.ceil(bound * before)


@given(start=st.integers(1, 50), goal=st.integers(1, 400), target=st.floats(0.3, 0.88))
def test_warmups_to_reach_agrees_with_the_ramp(start, goal, target):
    warmups = warmups_to_reach(start, goal, target)
    assert warmups is not None
    ramp = ramp_replicas(start, target, warmups)
    assert ramp[-1] >= goal
    if warmups > 0:
        assert ramp[-2] < goal
