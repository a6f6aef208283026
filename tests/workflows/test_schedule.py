"""planner.workflows.schedule: the calendar, floors written as cron windows, and the search verified by replay."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.autoscaler.cron_scaler import build_cron_scaler, is_active
from planner.errors import PlannerInputError
from planner.manifests.generate import CronWindow, ScalingPlan, generate_manifests, scheduled_scaled_object
from planner.manifests.lint import lint
from planner.readers.fleet import read_fleet
from planner.readers.manifest import autoscaler_from_document
from planner.readers.trace import read_trace
from planner.readers.workload import manifest_set_from_texts
from planner.simulate import simulate
from planner.simulate.fleet import FleetSpec
from planner.simulate.oracle import oracle_bound
from planner.simulate.replica import ReplicaSpec
from planner.simulate.supply import NodePoolSpec
from planner.simulate.traffic import stretch_days
from planner.workflows.schedule import (
    MINUTES_PER_DAY,
    MINUTES_PER_WEEK,
    calendar_buckets,
    cron_windows,
    default_scaling_plan,
    effective_floors,
    lead_s,
    make_schedule,
    minute_positions,
    oracle_floors,
)
from tests.conftest import REPO_ROOT
from tests.simulate_helpers import poisson_trace

TINY_FLEET = REPO_ROOT / "tests" / "data" / "schedule" / "tiny-replica.yaml"
MONDAY_S = datetime(2024, 1, 1, tzinfo=UTC).timestamp()


# -- the calendar ---------------------------------------------------------------------------------------------


def test_minutes_fall_on_the_local_week():
    # Monday 2024-01-01 00:00 UTC is Sunday 19:00 in New York, and Monday 00:00 in UTC.
    new_york = minute_positions(MONDAY_S, 3, "America/New_York", MINUTES_PER_WEEK)
    assert list(new_york) == [6 * MINUTES_PER_DAY + 19 * 60 + k for k in range(3)]
    assert list(minute_positions(MONDAY_S + 30.0, 2, "UTC", MINUTES_PER_WEEK)) == [0, 1]
    # Dublin springs forward on Sunday 2024-03-31 at 01:00 UTC: local 00:59 is followed by 02:00.
    before = datetime(2024, 3, 31, 0, 59, tzinfo=UTC).timestamp()
    sunday = 6 * MINUTES_PER_DAY
    assert list(minute_positions(before, 2, "Europe/Dublin", MINUTES_PER_WEEK)) == [sunday + 59, sunday + 120]
    assert list(minute_positions(before, 2, "Europe/Dublin", MINUTES_PER_DAY)) == [59, 120]


def test_a_week_of_arrivals_gives_weekday_buckets_and_less_gives_hours_of_the_day():
    week = poisson_trace(0.002, 7 * 86400.0, 100, 50, seed=1, tick_s=3600.0)
    assert calendar_buckets(week, MONDAY_S, "UTC").by_weekday
    assert calendar_buckets(week, MONDAY_S, "UTC").count == 168
    assert not calendar_buckets(week.until(6 * 86400.0), MONDAY_S, "UTC").by_weekday
    days = calendar_buckets(week.until(6 * 86400.0), MONDAY_S, "UTC")
    # Tuesday 13:30 UTC falls in hour 13 of the day; in New York (UTC-5) in hour 8.
    assert days.of_time(np.array([86400.0 + 13.5 * 3600])) == 13
    assert calendar_buckets(week, MONDAY_S, "America/New_York").of_time(np.array([86400.0 + 13.5 * 3600])) == 8 + 24


def test_a_floor_rises_a_cold_start_early_and_falls_on_the_hour():
    floors = [1] * 24
    floors[8], floors[9] = 3, 2
    level = effective_floors(floors, 5)
    assert level[8 * 60 - 6] == 1 and level[8 * 60 - 5] == 3  # the rise, 5 minutes early
    assert level[9 * 60 - 1] == 3 and level[9 * 60] == 2  # the fall, on the hour
    assert level[10 * 60 - 1] == 2 and level[10 * 60] == 1


def test_the_lead_is_the_time_to_ready_and_one_sync_in_whole_minutes():
    assert lead_s(FleetSpec(warmup_s=120.0)) == 180.0  # 120 + 15 s, up to 3 minutes
    assert lead_s(FleetSpec(warmup_s=45.0)) == 60.0
    nodes = NodePoolSpec(gpus_per_node=8, provision_s=300.0, node_init_s=60.0)
    fleet = FleetSpec(warmup_s=120.0, nodes=nodes, image_pull_s=90.0)
    assert lead_s(fleet) == 60.0 * np.ceil((fleet.time_to_ready_s(needs_node=True, image_cached=False) + 15.0) / 60.0)
    assert lead_s(fleet) > 570.0  # a new node's provisioning, init and image pull come first


# -- floors as cron windows -------------------------------------------------------------------------------------


def _held(windows, base: int, at_s: float) -> int:
    return _held_by([(build_cron_scaler(w.metadata), w.desired_replicas) for w in windows], base, at_s)


def _held_by(scalers, base: int, at_s: float) -> int:
    return max([desired for scaler, desired in scalers if is_active(scaler, at_s)] + [base])


def test_windows_that_repeat_every_weekday_are_one_trigger():
    weekday = [1] * 7 + [3] * 11 + [2] * 3 + [1] * 3
    weekend = [1] * 9 + [2] * 8 + [1] * 7
    windows = cron_windows(weekday * 5 + weekend * 2, 1, 3, "Europe/Dublin")
    assert [(w.start, w.end, w.desired_replicas) for w in windows] == [
        ("57 6 * * 1-5", "0 18 * * 1-5", 3),
        ("0 18 * * 1-5", "0 21 * * 1-5", 2),
        ("57 8 * * 0,6", "0 17 * * 0,6", 2),
    ]
    assert {w.timezone for w in windows} == {"Europe/Dublin"}


def test_a_window_across_midnight_ends_on_the_next_day():
    floors = [1] * 168
    floors[4 * 24 + 23] = floors[5 * 24] = 4  # Friday 23h and Saturday 00h
    (window,) = cron_windows(floors, 1, 10, "UTC")
    assert (window.start, window.end) == ("50 22 * * 5", "0 1 * * 6")


def test_floors_at_the_base_need_no_window_and_a_floor_that_never_changes_needs_two():
    assert cron_windows([2] * 24, 2, 3, "UTC") == ()
    both = cron_windows([3] * 24, 1, 3, "UTC")
    assert [(w.start, w.end, w.desired_replicas) for w in both] == [
        ("0 0 * * *", "0 12 * * *", 3),
        ("0 12 * * *", "0 0 * * *", 3),
    ]
    assert all(_held(both, 1, MONDAY_S + m * 60.0 + 1.0) == 3 for m in range(0, MINUTES_PER_DAY, 7))
    with pytest.raises(PlannerInputError, match="24 or 168"):
        cron_windows([1] * 25, 1, 3, "UTC")


@settings(max_examples=10)
@given(
    weekly=st.booleans(),
    runs=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 14)), min_size=1, max_size=25),
    base=st.integers(1, 2),
    lead_minutes=st.integers(0, 130),
)
def test_the_triggers_hold_the_floor_in_force_at_every_minute(weekly, runs, base, lead_minutes):
    # Runs of equal hours, as traffic gives them, so windows of many lengths appear (some across midnight and
    # the week's end); KEDA's own activity test decides each minute.
    levels = [level for level, hours in runs for _ in range(hours)] * 168
    floors = levels[:168] if weekly else levels[:24]
    windows = cron_windows(floors, base, lead_minutes, "UTC")
    level = np.maximum(effective_floors(floors, lead_minutes), base)
    cycle = len(level)
    changes = np.flatnonzero(level != np.roll(level, 1))
    minutes = set(range(0, cycle, 41)) | {int(c + d) % cycle for c in changes for d in (-1, 0)}
    scalers = [(build_cron_scaler(w.metadata), w.desired_replicas) for w in windows]
    for minute in sorted(minutes):
        assert _held_by(scalers, base, MONDAY_S + minute * 60.0 + 1.0) == level[minute], minute
    # Written as the generator writes them: KEDA builds each, and no two with different floors overlap.
    plan = ScalingPlan("vllm", 10.0, 120.0, 1000.0, 50.0, max_replicas=4, min_replicas=base, cron_windows=windows)
    text = yaml.safe_dump(generate_manifests(plan).scaled_object.document)
    assert not [f for f in lint(manifest_set_from_texts({"so.yaml": text})) if f.rule.startswith("cron-")]


# -- a team's ScaledObject --------------------------------------------------------------------------------------


def _team_scaled_object(formula: str = "", target: str = "40", metric_type: str = "AverageValue") -> dict:
    document = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "chat", "namespace": "llm"},
        "spec": {
            "scaleTargetRef": {"name": "chat"},
            "minReplicaCount": 1,
            "maxReplicaCount": 8,
            "triggers": [
                {"type": "prometheus", "name": "running", "metadata": {"query": "sum(a)", "threshold": "30"}},
                {"type": "cron", "name": "old", "metadata": {"start": "0 8 * * *", "end": "0 9 * * *"}},
                {"type": "prometheus", "name": "waiting", "metadata": {"query": "sum(b)", "threshold": "5"}},
            ],
        },
    }
    if formula:
        document["spec"]["advanced"] = {
            "scalingModifiers": {"formula": formula, "target": target, "metricType": metric_type}
        }
    return document


WINDOWS = (CronWindow("57 6 * * 1-5", "0 18 * * 1-5", "UTC", 3), CronWindow("0 18 * * 1-5", "0 21 * * 1-5", "UTC", 2))


def test_a_team_scaled_object_keeps_its_triggers_and_its_cron_ones_are_replaced():
    original = _team_scaled_object()
    written = scheduled_scaled_object(original, WINDOWS, "team.yaml").document
    triggers = written["spec"]["triggers"]
    assert [t["name"] for t in triggers] == ["running", "waiting", "cron_0", "cron_1"]
    assert triggers[2]["metadata"] == {"timezone": "UTC", "start": "57 6 * * 1-5", "end": "0 18 * * 1-5",
                                       "desiredReplicas": "3"}  # fmt: skip
    assert {k: v for k, v in written.items() if k != "spec"} == {k: v for k, v in original.items() if k != "spec"}
    assert original["spec"]["triggers"][1]["name"] == "old"  # the caller's document is not changed


def test_each_floor_joins_the_formula_in_its_units():
    formula = "max(running / 30, waiting / 5)"
    written = scheduled_scaled_object(_team_scaled_object(formula, target="1"), WINDOWS, "team.yaml").document
    assert written["spec"]["advanced"]["scalingModifiers"]["formula"] == f"max({formula}, cron_0, cron_1)"
    scaled = scheduled_scaled_object(_team_scaled_object("running + waiting", target="40"), WINDOWS[:1]).document
    assert scaled["spec"]["advanced"]["scalingModifiers"]["formula"] == "max(running + waiting, cron_0 * 40)"
    autoscaler = autoscaler_from_document("so.yaml", scaled)  # the KEDA port reads the composite as written
    assert autoscaler is not None and autoscaler.scaled_object.is_using_modifiers


@pytest.mark.parametrize(
    ("document", "message"),
    [
        (_team_scaled_object("running + waiting", metric_type="Value"), "metricType: Value"),
        (_team_scaled_object("max(running, old)", target="1"), "names the cron trigger 'old'"),
        ({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "spec": {}}, "an HPA has no schedule"),
        (_team_scaled_object() | {"spec": {"triggers": []}}, "only cron triggers"),
    ],
)
def test_a_scaled_object_the_schedule_cannot_join_is_refused_in_one_line(document, message):
    with pytest.raises(PlannerInputError, match=message) as error:
        scheduled_scaled_object(document, WINDOWS, "team.yaml")
    assert "\n" not in str(error.value) and "team.yaml" in str(error.value)


def test_a_window_above_the_maximum_is_refused():
    with pytest.raises(PlannerInputError, match="above max_replicas 8"):
        scheduled_scaled_object(_team_scaled_object(), (CronWindow("0 8 * * *", "0 9 * * *", "UTC", 9),))


# -- floors from the traffic -----------------------------------------------------------------------------------


def test_weekday_and_weekend_minimums_differ_on_a_week_with_quieter_weekends(shared_dir):
    trace = read_trace(shared_dir / "traces" / "AzureLLMInferenceTrace_conv.csv")
    week = stretch_days(trace, 0, 7, mean_factor=0.2)
    fleet = read_fleet(TINY_FLEET)
    buckets = calendar_buckets(week, fleet.start_epoch_s, "UTC")
    floors = oracle_floors(oracle_bound(week, fleet, 0.95), buckets, 100).reshape(7, 24)
    assert buckets.by_weekday
    weekday_peak, weekend_peak = floors[:5, 9:19].min(axis=0), floors[5:, 9:19].max(axis=0)
    assert np.all(weekday_peak > weekend_peak)  # every daytime hour, on every weekday
    assert floors.min() >= 1 and floors[:5].max() <= 100


def test_the_default_metric_trigger_is_a_target_below_the_batch_limit_and_scoped_to_its_pods():
    trace = poisson_trace(0.5, 600.0, 300, 200, seed=2)
    fleet = read_fleet(TINY_FLEET)
    plan = default_scaling_plan(trace, fleet)
    assert plan.concurrency_target == pytest.approx(4 / 1.2, abs=1e-3) and plan.max_replicas >= 4
    text = yaml.safe_dump(generate_manifests(plan).scaled_object.document)
    assert 'pod=~"vllm-' in text
    kv_bound = dataclasses.replace(fleet, replica=ReplicaSpec(max_num_seqs=64, kv_tokens=1000))
    assert default_scaling_plan(trace, kv_bound).concurrency_target == pytest.approx(2.0 / 1.2, abs=1e-3)


# -- the search -----------------------------------------------------------------------------------------------


def _surge(rate_rps: float = 1.5):
    # A quiet night, then a morning surge at 07:00 UTC for three hours: reacting alone waits a cold start.
    return poisson_trace(lambda t: 0.05 if t < 7 * 3600 else rate_rps, 10 * 3600.0, 300, 200, seed=3, tick_s=60.0)


@pytest.fixture(scope="module")
def surge_schedule():
    return make_schedule(_surge(), read_fleet(TINY_FLEET), attainment_goal_frac=0.99)


def test_a_morning_surge_gets_a_floor_a_cold_start_early_that_meets_the_goal(surge_schedule):
    schedule = surge_schedule
    assert schedule.reactive.slo_attainment_frac < 0.99 <= schedule.scheduled.slo_attainment_frac
    assert schedule.met and "meets 99 % attainment" in schedule.reason
    assert not schedule.by_weekday and len(schedule.floors) == 24
    assert schedule.floor_at(0, 7) > max(schedule.floors[:7]) and schedule.floor_at(0, 7) >= 2
    first = schedule.windows[0]
    assert first.start == "57 6 * * *" and first.desired_replicas == schedule.floor_at(0, 7)
    assert schedule.lead_s == 180.0
    # The replay raised the surge hour where the oracle's need fell short, and never lowered a floor.
    assert len(schedule.rounds) > 1 and all(7 in r.raised for r in schedule.rounds[:-1])
    floors = np.array([r.floors for r in schedule.rounds])
    assert np.all(np.diff(floors, axis=0) >= 0)


def test_the_written_scaled_object_replays_to_the_goal_at_no_less_than_the_oracle(surge_schedule):
    schedule = surge_schedule
    document = yaml.safe_load(schedule.scaled_object_text)
    outcome = simulate(_surge(), autoscaler_from_document("so.yaml", document), read_fleet(TINY_FLEET))
    assert outcome.slo_attainment_frac == schedule.scheduled.slo_attainment_frac >= 0.99
    assert outcome.cost_usd == pytest.approx(schedule.scheduled.cost_usd)
    assert schedule.oracle.cost_usd <= schedule.scheduled.cost_usd and schedule.oracle.cost_usd > 0
    assert [t["type"] for t in document["spec"]["triggers"]] == ["prometheus"] + ["cron"] * len(schedule.windows)
    # The floor holds from 06:57: at 07:00, before any load reached it, the fleet has the surge's replicas.
    ts = outcome.timeseries
    at_seven = ts[(ts.t_s >= 7 * 3600) & (ts.t_s < 7 * 3600 + 10)]
    assert at_seven.replicas_ready.min() >= schedule.floor_at(0, 7)
    serious = [f for f in schedule.findings if f.severity in ("error", "warning")]
    assert serious == [], [(f.rule, f.why) for f in serious]


def test_a_search_cut_short_says_the_goal_is_not_met():
    schedule = make_schedule(_surge(), read_fleet(TINY_FLEET), attainment_goal_frac=0.99, max_rounds=1)
    assert not schedule.met and len(schedule.rounds) == 1
    assert schedule.scheduled.slo_attainment_frac < 0.99
    assert "not met after 1 replays" in schedule.reason


def test_a_goal_no_fleet_can_reach_is_said_so():
    # A prompt whose prefill alone outlasts the objective: every request misses in any run.
    fleet = dataclasses.replace(
        read_fleet(TINY_FLEET),
        replica=ReplicaSpec(fixed_ms=30.0, per_sequence_ms=5.0, max_num_seqs=4, prefill_ms_per_token=10.0),
    )
    trace = poisson_trace(0.2, 1800.0, 300, 20, seed=4)
    schedule = make_schedule(trace, fleet, attainment_goal_frac=0.9)
    assert not schedule.met and schedule.bound.impossible_requests == len(trace)
    assert schedule.reason.startswith("No schedule can meet the goal") and len(schedule.rounds) == 1


def test_the_maximum_stops_the_search_and_is_named():
    plan = dataclasses.replace(default_scaling_plan(_surge(), read_fleet(TINY_FLEET)), max_replicas=2)
    schedule = make_schedule(_surge(), read_fleet(TINY_FLEET), plan, attainment_goal_frac=0.99)
    assert not schedule.met and "maxReplicaCount (2)" in schedule.reason
    assert max(schedule.floors) == 2


def test_a_team_scaled_object_with_a_formula_takes_the_schedule_in_its_formula():
    plan = default_scaling_plan(_surge(), read_fleet(TINY_FLEET))
    plan = dataclasses.replace(plan, kv_usage_target_frac=0.8, max_replicas=10)
    document = generate_manifests(plan).scaled_object.document
    # The surge's first hour: the formula runs in the lockstep engine, so the replay is kept short.
    trace = _surge().until(8 * 3600.0)
    schedule = make_schedule(trace, read_fleet(TINY_FLEET), document, attainment_goal_frac=0.99, source="team.yaml")
    written = yaml.safe_load(schedule.scaled_object_text)
    formula = written["spec"]["advanced"]["scalingModifiers"]["formula"]
    assert formula.startswith("max(max(inflight / ") and formula.endswith(
        ", ".join(["cron_0", *(f"cron_{k}" for k in range(1, len(schedule.windows)))]) + ")"
    )
    assert schedule.met and schedule.reactive.slo_attainment_frac < 0.99
    assert "from team.yaml" in schedule.scaled_object_text.splitlines()[0]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"attainment_goal_frac": 1.5}, "between 0 and 1"),
        ({"timezone": "Mars/Olympus"}, "unknown time zone Mars/Olympus"),
        ({"timezone": "Local"}, "name an IANA zone"),
        ({"max_rounds": 0}, "max_rounds"),
    ],
)
def test_bad_settings_are_refused_before_any_replay(options, message):
    with pytest.raises(PlannerInputError, match=message):
        make_schedule(_surge(), read_fleet(TINY_FLEET), **options)


def test_a_bound_given_is_used_as_computed_and_one_at_another_goal_is_refused(surge_schedule):
    trace, fleet = _surge(), read_fleet(TINY_FLEET)
    given_bound = oracle_bound(trace, fleet, 0.99)
    again = make_schedule(trace, fleet, attainment_goal_frac=0.99, bound=given_bound)
    assert again.bound is given_bound
    assert again.floors == surge_schedule.floors and again.scaled_object_text == surge_schedule.scaled_object_text
    with pytest.raises(PlannerInputError, match=r"oracle bound given is at 0\.9"):
        make_schedule(trace, fleet, attainment_goal_frac=0.99, bound=oracle_bound(trace, fleet, 0.9))
