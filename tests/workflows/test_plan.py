"""planner.workflows.plan: the pieces the chapter "Your plan" strings together."""

from __future__ import annotations

import dataclasses

import pytest

from planner.capacity.knee import thresholds_from_loadtest
from planner.errors import PlannerInputError
from planner.manifests.generate import ScalingPlan, generate_manifests
from planner.readers.loadtest import read_loadtest
from planner.readers.trace import read_trace
from planner.readers.workload import read_manifest_set
from planner.simulate import fast
from planner.simulate.sweep import (
    SweepResult,
    cheapest_meeting,
    closest_to_goal,
    expand_grid,
    run_chunk,
)
from planner.workflows.plan import (
    DAYS_PER_WEEK,
    PlanSweep,
    change_text,
    choice_text,
    chosen_configuration,
    current_autoscaler,
    day_trace,
    default_grid,
    generated_autoscaler,
    manifest_thresholds,
    plan_fleet,
    simulate_week,
    sweep_plan,
)
from tests.conftest import DATA_DIR

LOADTEST = DATA_DIR / "loadtests" / "llama-3.1-8b_vllm_bench"


@pytest.fixture(scope="module")
def thresholds():
    steps = read_loadtest(LOADTEST)
    return steps, thresholds_from_loadtest(steps, ttft_p99_slo_ms=2000.0, itl_p99_slo_ms=50.0)


@pytest.fixture(scope="module")
def planned(thresholds):
    steps, result = thresholds
    found = manifest_thresholds(result, steps)
    plan = ScalingPlan(
        target_name="llama",
        concurrency_target=found["concurrency_target"],
        warmup_s=60.0,
        max_output_tokens=4096,
        itl_ms=50.0,
        max_replicas=6,
    )
    return generated_autoscaler(generate_manifests(plan))


@pytest.fixture(scope="module")
def fleet(thresholds):
    return plan_fleet(
        thresholds[1],
        kv_tokens=112_720,
        max_num_seqs=64,
        warmup_s=60.0,
        usd_per_gpu_hour=2.0,
        gpus_per_replica=1,
        ttft_slo_s=2.0,
    )


@pytest.fixture(scope="module")
def trace():
    return read_trace(DATA_DIR / "scenarios" / "steady_trickle.yaml", seed=1).until(300.0)


def test_thresholds_are_the_ones_planner_manifests_takes(thresholds):
    steps, result = thresholds
    found = manifest_thresholds(result, steps)
    assert found["concurrency_target"] == result.concurrency_target
    assert found["knee_concurrency"] == result.knee_concurrency
    assert "kv_usage_target" not in found  # vllm bench records no KV usage: nothing to put in a trigger


def test_no_knee_is_a_clear_error():
    steps = read_loadtest(LOADTEST)
    result = thresholds_from_loadtest(steps, ttft_p99_slo_ms=1.0, itl_p99_slo_ms=1.0)
    with pytest.raises(PlannerInputError, match="no concurrency target"):
        manifest_thresholds(result, steps)


def test_fleet_takes_the_load_tests_step_time_and_the_kv_tokens(thresholds, fleet):
    fit = thresholds[1].tpot_fit
    assert (fleet.replica.fixed_ms, fleet.replica.per_sequence_ms) == (fit.fixed_ms, fit.per_sequence_ms)
    assert (fleet.replica.kv_tokens, fleet.replica.max_num_seqs, fleet.usd_per_gpu_hour) == (112_720, 64, 2.0)


def test_generated_scaled_object_is_read_back(planned, thresholds):
    assert planned.kind == "ScaledObject" and planned.scaled_object.max_replica_count == 6
    assert planned.scaled_object.triggers[0].threshold == pytest.approx(thresholds[1].concurrency_target, abs=1e-3)


def test_default_grid():
    assert default_grid(40.0) == {
        "target": [20.0, 40.0],
        "min_replicas": [1, 2],
        "scale_down_window_s": [120, 600, 1800],
    }
    with pytest.raises(PlannerInputError, match="concurrency_target"):
        default_grid(float("nan"))


def test_sweep_picks_the_cheapest_meeting_the_goal(trace, planned, fleet):
    grid = {"min_replicas": [1, 3], "target": [10.0, 40.0]}
    sweep = sweep_plan(trace, planned, fleet, grid, 0.9)
    expected = run_chunk(trace, planned, fleet, expand_grid(grid))
    assert list(sweep.results) == expected
    assert sweep.best == cheapest_meeting(expected, 0.9) == sweep.chosen
    assert [r.cost_usd for r in sweep.front] == sorted(r.cost_usd for r in sweep.front)
    config = chosen_configuration(planned, fleet, sweep)
    assert config.autoscaler.scaled_object.min_replica_count == dict(sweep.chosen.values)["min_replicas"]


def test_a_flap_limit_passes_over_a_cheaper_flapping_setting(planned, fleet):
    # A quarter hour of growing traffic: with no scale-down window and one replica as the floor, the
    # cheapest setting meeting a loose goal scales down and up again several times.
    trace = read_trace(DATA_DIR / "scenarios" / "plan_half_hour.yaml", seed=1).until(900.0)
    grid = {"min_replicas": [1, 2], "target": [20.0, 40.0], "scale_down_window_s": [0, 300]}
    free = sweep_plan(trace, planned, fleet, grid, 0.5)
    assert free.best is not None and free.best.flap_cycles > 0, "the trace must make the cheapest setting flap"
    limited = sweep_plan(trace, planned, fleet, grid, 0.5, max_flap_cycles=free.best.flap_cycles - 1)
    assert limited.best is not None and limited.best.flap_cycles < free.best.flap_cycles
    assert limited.best.cost_usd >= free.best.cost_usd and limited.best == limited.chosen
    assert limited.best == cheapest_meeting(limited.results, 0.5, free.best.flap_cycles - 1)
    assert "within the limit" in choice_text(limited)


def _result(index, attainment, cost, flaps):
    return SweepResult(index, (("target", float(index)),), attainment, cost, cost, 0, flaps, 1, 0, 0)


def test_without_a_setting_within_the_limit_the_calmest_meeting_the_goal_is_offered():
    results = (_result(0, 0.99, 1.0, 9), _result(1, 0.995, 3.0, 4), _result(2, 0.999, 2.0, 4), _result(3, 0.5, 0.1, 0))
    sweep = closest_to_goal(results, 0.99)
    assert sweep.index == 2  # fewest flaps among those meeting the goal, then the cheaper
    plan = PlanSweep(results, (), None, sweep, 0.99, 3)
    assert "flaps more than 3 times" in choice_text(plan) and "(4)" in choice_text(plan)
    nothing = PlanSweep(results, (), None, results[0], 0.9999, None)
    assert choice_text(nothing).startswith("No configuration in the grid meets the goal")


def test_change_text():
    assert change_text(112.0, 100.0) == "12 % more"
    assert change_text(97.0, 100.0) == "3 % less"
    assert change_text(100.2, 100.0) == "about the same"
    assert change_text(5.0, 5.0) == "the same"
    assert change_text(5.0, 0.0) == "5 more"


def test_week_is_seven_simulated_days(trace, planned, fleet):
    week = simulate_week(trace, planned, dataclasses.replace(fleet, tick_s=5.0))
    day = fast.simulate(trace, planned, dataclasses.replace(fleet, tick_s=5.0))
    assert week.day.summary() == day.summary()
    assert week.cost_usd == DAYS_PER_WEEK * day.cost_usd and week.flap_cycles == DAYS_PER_WEEK * day.flap_cycles
    assert week.slo_attainment_frac == day.slo_attainment_frac


def test_current_autoscaler_by_name():
    manifests = read_manifest_set([DATA_DIR / "manifests" / "review"])
    names = [a.name for _, a in manifests.autoscalers]
    assert current_autoscaler(manifests).name == names[0]
    assert current_autoscaler(manifests, names[-1]).name == names[-1]
    with pytest.raises(PlannerInputError, match="no autoscaler named 'nope'"):
        current_autoscaler(manifests, "nope")
    empty = read_manifest_set([DATA_DIR / "manifests" / "plan_current" / "llama.yaml"])
    assert current_autoscaler(empty).name == "llama"


def test_fleet_drains_as_the_patch_says(thresholds):
    from planner.dynamics.grace import plan_grace

    grace = plan_grace(204.8, pre_stop_s=10)
    fleet = plan_fleet(
        thresholds[1],
        kv_tokens=112_720,
        max_num_seqs=64,
        warmup_s=60.0,
        usd_per_gpu_hour=2.0,
        gpus_per_replica=1,
        ttft_slo_s=2.0,
        grace=grace,
    )
    assert (fleet.termination_grace_period_s, fleet.shutdown_timeout_s, fleet.pre_stop_s) == (241, 226, 10)


# --------------------------------------------------------------------------- make_plan (issue 20)


@pytest.fixture(scope="module")
def chapter_plan(thresholds):
    """The chapter's default inputs, through the function the chapter and planner plan call."""
    from planner.workflows.plan import current_setup, make_plan

    steps, result = thresholds
    found = manifest_thresholds(result, steps)
    setup = current_setup(read_manifest_set([DATA_DIR / "manifests" / "plan_current"]))
    base = ScalingPlan(
        target_name="llama",
        concurrency_target=found["concurrency_target"],
        warmup_s=120.0,
        max_output_tokens=setup.max_tokens(0),
        itl_ms=50.0,
        max_replicas=12,
        max_num_seqs=256,
        knee_concurrency=found["knee_concurrency"],
        growth_frac=found["growth_frac"],
        label_matchers=setup.scope("llama"),
    )
    fleet = plan_fleet(
        result,
        kv_tokens=112_720,
        max_num_seqs=256,
        warmup_s=120.0,
        usd_per_gpu_hour=2.5,
        gpus_per_replica=1,
        ttft_slo_s=2.0,
    )
    day = day_trace(read_trace(DATA_DIR / "scenarios" / "plan_half_hour.yaml", seed=0), 0)
    plan = make_plan(
        day,
        setup.autoscaler,
        fleet,
        base,
        default_grid(found["concurrency_target"]),
        0.99,
        12,
        period_s=86_400.0,
        current_document=setup.document.data,
        workload_text=setup.workload_yaml,
        workload_source="llama.yaml",
    )
    return setup, base, plan


def test_the_chapters_current_setting_is_kept_when_it_is_best(chapter_plan):
    # Issue 20, 1: today's setting met 99 % (99.78 %) at $861 a week with 0 flaps; the old chapter picked a
    # $952 setting flapping 77 times.
    from planner.workflows.plan import dominates

    _, _, plan = chapter_plan
    assert plan.recommendation.case == "kept" and plan.recommended is plan.current
    assert plan.current.slo_attainment_frac >= 0.99 and plan.current.flap_cycles == 0
    assert not any(dominates(other, plan.recommended) for other in plan.results)
    assert plan.weekly(plan.current)["cost_usd_per_week"] == pytest.approx(7 * plan.current.cost_usd)
    assert plan.manifests_text.count("kind: ScaledObject") == 1 and "threshold: '5'" in plan.manifests_text


def test_the_patch_covers_the_longest_generation_the_linter_finds(chapter_plan):
    # Issue 20, 1: a 241 s grace period failed short-grace, the Deployment's --max-model-len 8192 taking 409.6 s.
    setup, base, plan = chapter_plan
    assert setup.max_tokens(0) == 8192 == base.max_output_tokens
    assert plan.generated.grace.drain_time_s == pytest.approx(409.6)
    assert plan.generated.grace.termination_grace_period_s == 466
    assert plan.errors == () and "terminationGracePeriodSeconds: 466" in plan.patched_workload_text
    assert "--shutdown-timeout=451" in plan.patched_workload_text


def test_the_generated_queries_keep_the_teams_selector(chapter_plan):
    # Issue 20, 2: the plan's query summed every vLLM in the cluster.
    _, base, plan = chapter_plan
    assert base.label_matchers == ('model_name="llama"',)
    so = plan.generated.scaled_object.document["spec"]["triggers"][0]["metadata"]["query"]
    assert (
        so == 'sum(vllm:num_requests_running{model_name="llama"}) + sum(vllm:num_requests_waiting{model_name="llama"})'
    )


def test_a_grid_point_is_emitted_with_exactly_its_values(chapter_plan):
    # Issue 20, 1: "run instead" carried minReplicaCount 1 and a 300 s window, not the chosen 2 and 1800 s.
    import yaml

    from planner.manifests.writer import dump_manifest
    from planner.readers.manifest import autoscaler_from_document
    from planner.workflows.plan import recommended_scaling_plan

    _, base, plan = chapter_plan
    point = next(
        r for r in plan.results if dict(r.values) == {"target": 53.333, "min_replicas": 2, "scale_down_window_s": 1800}
    )
    emitted = generate_manifests(recommended_scaling_plan(base, point))
    so = autoscaler_from_document("x.yaml", yaml.safe_load(dump_manifest(emitted.scaled_object))).scaled_object
    assert (so.min_replica_count, so.behavior.scale_down.stabilization_window_seconds, so.triggers[0].threshold) == (
        2,
        1800,
        53.333,
    )


def test_plan_grids_refuse_keys_the_manifests_cannot_carry():
    from planner.workflows.plan import check_plan_grid

    with pytest.raises(PlannerInputError, match="'signal' is not a value planner plan can write"):
        check_plan_grid({"signal": ["sum(x)"]})
    with pytest.raises(PlannerInputError, match="min_replicas: expected whole numbers >= 1"):
        check_plan_grid({"min_replicas": [0, 1]})


def test_review_target_keeps_the_teams_model_name_and_adds_the_namespace():
    # Issue 20, 2: manifest_review replaced {model_name="chat"} by {namespace="llm"}.
    from planner.workflows.plan import target_matchers

    manifests = read_manifest_set([DATA_DIR / "manifests" / "review"])
    assert target_matchers(manifests, "chat") == ('model_name="chat"', 'namespace="llm"')
    # A target no file describes is still scoped to its own pods.
    assert target_matchers(manifests, "nobody") == ('pod=~"nobody-[a-z0-9]+-[a-z0-9]+"',)
