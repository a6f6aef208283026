"""planner.workflows.best_possible: reacting and a fitted schedule at several targets, bounded by the oracle."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from planner.errors import PlannerInputError
from planner.simulate.oracle import oracle_bound
from planner.workflows.best_possible import (
    REACTIVE,
    SCHEDULE,
    cold_start_effect_text,
    compare_with_oracle,
    gap_closed_frac,
    schedule_floor_replicas,
)
from tests.conftest import BEST_POSSIBLE_FRACS, BEST_POSSIBLE_GOAL

GOAL = BEST_POSSIBLE_GOAL
FRACS = BEST_POSSIBLE_FRACS


def test_the_gap_closed_is_the_share_of_reactings_excess_over_the_bound():
    assert gap_closed_frac(100.0, 80.0, 60.0) == pytest.approx(0.5)
    assert gap_closed_frac(100.0, 100.0, 60.0) == 0.0
    assert gap_closed_frac(100.0, 110.0, 60.0) == pytest.approx(-0.25)
    assert gap_closed_frac(100.0, 60.0, 60.0) == 1.0
    assert math.isnan(gap_closed_frac(60.0, 60.0, 60.0))


def test_each_target_has_one_run_per_strategy_and_the_bound_is_below_every_run(best_possible_setting):
    trace, fleet, plan, best = best_possible_setting
    assert best.targets == tuple(round(plan.concurrency_target * f, 3) for f in FRACS)
    for strategy in (REACTIVE, SCHEDULE):
        runs = best.runs(strategy)
        assert [dict(r.values) for r in runs] == [{"strategy": strategy, "target": t} for t in best.targets]
        for run in runs:
            # The regret is the run's cost less the cold-start bound at its own attainment: never negative.
            assert run.regret_usd is not None and run.regret_usd >= -1e-6
            if run.slo_attainment_frac >= GOAL:
                assert best.oracle_cost_usd <= run.cost_usd
    # The bound at the goal is the oracle's own, on the same trace and fleet.
    assert best.oracle_cost_usd == pytest.approx(oracle_bound(trace, fleet, GOAL).cold_start.cost_usd)
    assert best.curve.cold_start_cost_usd_at(GOAL) == pytest.approx(best.oracle_cost_usd)


def test_the_runs_are_the_schedules_replays_and_the_cheapest_meets_the_goal(best_possible_setting):
    _, _, _, best = best_possible_setting
    for k, schedule in enumerate(best.schedules):
        assert best.outcome_of(best.reactive[k]) is schedule.reactive.outcome
        assert best.outcome_of(best.scheduled[k]) is schedule.scheduled.outcome
        assert best.scheduled[k].cost_usd == schedule.scheduled.cost_usd
        assert best.schedule_of(best.reactive[k]) is schedule
    for strategy in (REACTIVE, SCHEDULE):
        cheapest = best.cheapest(strategy)
        meeting = [r for r in best.runs(strategy) if r.slo_attainment_frac >= GOAL]
        assert cheapest is not None and cheapest.cost_usd == min(r.cost_usd for r in meeting)
    # Reacting at the tightest target misses the goal; the schedule beside it is raised until it meets it.
    assert best.reactive[-1].slo_attainment_frac < GOAL <= best.scheduled[-1].slo_attainment_frac
    assert best.schedules[-1].met
    assert best.cheapest(REACTIVE, 1.0) is None


def test_the_floor_follows_the_hour_and_rises_a_lead_early(best_possible_setting):
    _, fleet, _, best = best_possible_setting
    schedule = best.schedules[-1]
    assert not schedule.by_weekday  # a day: hour-of-day buckets
    t_s = np.arange(0.0, 86400.0, 60.0)
    floor = schedule_floor_replicas(schedule, t_s, fleet.start_epoch_s)
    hour = (t_s // 3600).astype(int) % 24
    own = np.maximum([schedule.floor_at(0, h) for h in hour], schedule.base_replicas)
    assert np.all(floor >= own)
    lead_min = int(schedule.lead_s // 60)
    ahead = np.maximum([schedule.floor_at(0, (h + 1) % 24) for h in hour], schedule.base_replicas)
    within_lead = (t_s % 3600) >= 3600 - 60 * lead_min
    assert np.array_equal(floor[within_lead], np.maximum(own, ahead)[within_lead])
    assert np.array_equal(floor[~within_lead], own[~within_lead])
    assert np.any(floor > schedule.base_replicas)


def test_bad_targets_are_refused(best_possible_setting):
    trace, fleet, plan, _ = best_possible_setting
    with pytest.raises(PlannerInputError, match="target fractions"):
        compare_with_oracle(trace, fleet, plan, GOAL, target_fracs=())
    with pytest.raises(PlannerInputError, match="target 40"):
        compare_with_oracle(trace, fleet, dataclasses.replace(plan, concurrency_target=20.0), GOAL, target_fracs=(2.0,))


def test_the_cold_start_effect_is_named_when_it_adds_to_the_bound(best_possible_setting):
    _, _, _, best = best_possible_setting
    bound = best.bound
    text = cold_start_effect_text(bound)
    if bound.cold_start.cost_usd > bound.instant.cost_usd * 1.0005:
        assert text.startswith("The cold start adds")
    else:
        assert text.startswith("The two are equal here")
    dearer = dataclasses.replace(
        bound, cold_start=dataclasses.replace(bound.cold_start, cost_usd=1.25 * bound.instant.cost_usd)
    )
    assert cold_start_effect_text(dearer).startswith("The cold start adds 25.0 % to the bound")
