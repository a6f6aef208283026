"""planner.workflows.plan.recommend: each rule on hand-made candidate sets, and the front on three objectives."""

from __future__ import annotations

import itertools
import random

import pytest

from planner.errors import PlannerInputError
from planner.simulate.sweep import SweepResult
from planner.workflows.plan import (
    CHEAPER,
    CURRENT_INDEX,
    CURRENT_MISSES,
    KEPT,
    NONE_MEETS,
    SAME_COST_BETTER,
    dominates,
    meets_goals,
    plan_front,
    recommend,
)


def _r(index, cost, attainment, flaps):
    return SweepResult(index, (("target", float(index)),), attainment, cost, cost, 2 * flaps, flaps, 3, 0, 0)


def _current(cost, attainment, flaps):
    return SweepResult(CURRENT_INDEX, (("current", "ScaledObject x"),), attainment, cost, cost, 0, flaps, 3, 0, 0)


def test_the_issues_case_keeps_the_current_setting():
    # Issue 20: the current setting meets 99 % (99.78 %) at $861 a week with 0 flaps; the old plan took a
    # $952 setting flapping 77 times, while a cheaper one flapping more sat beside it.
    current = _current(861.0 / 7, 0.9978, 0)
    swept = [_r(8, 857.0 / 7, 0.9998, 21), _r(9, 875.0 / 7, 1.0, 28), _r(11, 952.0 / 7, 1.0, 11)]
    pick = recommend(current, swept, 0.99, 12)
    assert pick.case == KEPT and pick.is_current and pick.result is current
    assert "Keep the current setting" in pick.reason and "no swept setting" in pick.reason


def test_a_strictly_cheaper_setting_that_flaps_no_more_replaces_the_current_one():
    current = _current(10.0, 0.995, 2)
    swept = [_r(0, 9.0, 0.999, 2), _r(1, 8.0, 0.992, 1), _r(2, 7.0, 0.999, 3), _r(3, 6.0, 0.98, 0)]
    pick = recommend(current, swept, 0.99, 5)
    # #2 is cheaper but flaps more than today; #3 misses the goal; #1 is the cheapest that qualifies.
    assert (pick.case, pick.result.index) == (CHEAPER, 1)
    assert "20.0 % less" in pick.reason and "flapping no more" in pick.reason


def test_cheaper_but_flapping_more_does_not_replace_a_current_setting_that_meets_the_goals():
    current = _current(10.0, 0.995, 0)
    pick = recommend(current, [_r(0, 9.0, 0.999, 1)], 0.99, 5)
    assert pick.case == KEPT


def test_a_setting_at_the_same_cost_that_dominates_the_current_one_is_taken():
    current = _current(10.0, 0.991, 2)
    pick = recommend(current, [_r(0, 10.0, 0.999, 2), _r(1, 11.0, 1.0, 0)], 0.99, 5)
    assert (pick.case, pick.result.index) == (SAME_COST_BETTER, 0)


def test_when_the_current_setting_misses_the_cheapest_that_meets_both_goals_is_taken():
    current = _current(5.0, 0.90, 0)
    swept = [_r(0, 6.0, 0.995, 9), _r(1, 7.0, 0.995, 1), _r(2, 8.0, 1.0, 0), _r(3, 7.0, 0.999, 1)]
    pick = recommend(current, swept, 0.99, 3)
    assert (pick.case, pick.result.index) == (CURRENT_MISSES, 3)  # same cost as #1, higher attainment
    assert "misses the attainment goal (90.00 % < 99 %)" in pick.reason


def test_a_current_setting_that_flaps_too_much_misses_the_goals():
    current = _current(5.0, 0.999, 40)
    pick = recommend(current, [_r(0, 6.0, 0.995, 2)], 0.99, 12)
    assert pick.case == CURRENT_MISSES and "flaps 40 times, more than the limit of 12" in pick.reason


def test_when_nothing_meets_the_goals_the_calmest_or_the_closest_is_offered():
    current = _current(5.0, 0.99, 30)
    pick = recommend(current, [_r(0, 6.0, 0.995, 20), _r(1, 4.0, 0.995, 25)], 0.99, 3)
    assert (pick.case, pick.result.index) == (NONE_MEETS, 0) and "flaps least (20)" in pick.reason
    pick = recommend(_current(5.0, 0.5, 0), [_r(0, 6.0, 0.9, 0), _r(1, 9.0, 0.9, 0)], 0.99, None)
    assert (pick.case, pick.result.index) == (NONE_MEETS, 0) and "comes closest (90.00 %)" in pick.reason


def test_nan_attainment_never_meets_a_goal():
    assert not meets_goals(_r(0, 1.0, float("nan"), 0), 0.0)
    pick = recommend(_current(1.0, float("nan"), 0), [_r(0, 2.0, 0.999, 0)], 0.99, None)
    assert pick.case == CURRENT_MISSES


def test_goals_out_of_range_are_refused():
    with pytest.raises(PlannerInputError, match="attainment goal"):
        recommend(_current(1.0, 1.0, 0), [], 1.5)
    with pytest.raises(PlannerInputError, match="flap limit"):
        recommend(_current(1.0, 1.0, 0), [], 0.9, -1)


def test_the_front_keeps_a_calmer_setting_a_cheaper_flapping_one_does_not_dominate():
    calm, flappy, worse = _r(0, 10.0, 1.0, 0), _r(1, 9.0, 1.0, 50), _r(2, 11.0, 1.0, 1)
    assert not dominates(flappy, calm) and dominates(calm, worse)
    assert [r.index for r in plan_front([calm, flappy, worse])] == [1, 0]


@pytest.mark.parametrize("seed", range(40))
def test_the_recommendation_is_never_dominated_and_keeps_the_rules(seed):
    rng = random.Random(seed)
    costs, attainments, flaps = [8.0, 9.0, 10.0, 11.0], [0.97, 0.99, 0.995, 1.0], [0, 1, 4, 9]
    results = [_r(i, rng.choice(costs), rng.choice(attainments), rng.choice(flaps)) for i in range(8)]
    current = _current(rng.choice(costs), rng.choice(attainments), rng.choice(flaps))
    goal, limit = rng.choice([0.99, 0.995]), rng.choice([None, 1, 4])
    pick = recommend(current, results, goal, limit)
    candidates = [current, *results]
    assert not any(dominates(other, pick.result) for other in candidates)
    assert pick.result in plan_front(candidates)
    if meets_goals(current, goal, limit):
        better = [
            r
            for r in results
            if meets_goals(r, goal, limit) and r.cost_usd < current.cost_usd and r.flap_cycles <= current.flap_cycles
        ]
        if better:
            assert pick.case == CHEAPER and pick.result.cost_usd == min(r.cost_usd for r in better)
        elif any(dominates(r, current) for r in results):
            assert pick.case == SAME_COST_BETTER
        else:
            assert pick.case == KEPT and pick.result is current
    elif any(meets_goals(r, goal, limit) for r in results):
        assert pick.case == CURRENT_MISSES and meets_goals(pick.result, goal, limit)
        assert pick.result.cost_usd == min(r.cost_usd for r in results if meets_goals(r, goal, limit))
    else:
        assert pick.case == NONE_MEETS


def test_the_front_is_exactly_the_non_dominated_set():
    values = list(itertools.product([1.0, 2.0], [0.9, 1.0], [0, 3]))
    results = [_r(i, c, a, f) for i, (c, a, f) in enumerate(values)]
    front = plan_front(results)
    assert [r.index for r in front] == [2]  # $1, 100 %, 0 flaps dominates every other corner
    trade_offs = [_r(0, 1.0, 0.9, 0), _r(1, 2.0, 1.0, 0), _r(2, 1.0, 1.0, 3), _r(3, 2.0, 0.9, 3)]
    assert [r.index for r in plan_front(trade_offs)] == [2, 0, 1]
    assert all(not any(dominates(o, r) for o in results) for r in front)
