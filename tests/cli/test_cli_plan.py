"""``planner plan`` end to end: real traffic, a slower replica, the rules of the recommendation, clean manifests."""

from __future__ import annotations

import json

import pytest
import yaml

from planner.cli import main
from planner.errors import PlannerInputError
from planner.readers.manifest import autoscaler_from_document
from planner.simulate.sweep import SweepResult
from planner.workflows.plan import dominates, meets_goals
from tests.conftest import DATA_DIR, REPO_ROOT

PLAN_DATA = REPO_ROOT / "tests" / "data" / "plan"
SLOW_FLEET = PLAN_DATA / "slow-replica.yaml"  # about 3.4 requests/s per replica on the Azure conversation trace
GRID = PLAN_DATA / "grid.yaml"
CURRENT = DATA_DIR / "manifests" / "plan_current" / "llama.yaml"
# The chapter's made-up team on the slow replica, half an hour of growing traffic, a 95 % goal.
HALF_HOUR_INPUTS = (
    "--trace",
    str(DATA_DIR / "scenarios" / "plan_half_hour.yaml"),
    "--manifest",
    str(CURRENT),
    "--fleet",
    str(SLOW_FLEET),
    "--grid",
    str(GRID),
    "--concurrency-target",
    "48",
    "--attainment-goal",
    "0.95",
)
HALF_HOUR = (*HALF_HOUR_INPUTS, "--max-flap-cycles", "4")
UNSELECTED = "sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)"


def _plan(capsys, *argv: str) -> dict:
    status = main(["plan", *argv, "--json"])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    return json.loads(captured.out)


def _as_result(row: dict) -> SweepResult:
    return SweepResult(
        row["index"],
        (),
        row["slo_attainment_frac"],
        row["cost_usd_per_week"],
        0.0,
        0,
        row["flap_cycles_per_week"],
        row["peak_replicas"],
        0,
        0,
    )


def _check_rules(plan: dict) -> None:
    keys = (
        "cost_usd_per_week",
        "slo_attainment_frac",
        "flap_cycles_per_week",
        "scale_events_per_week",
        "peak_replicas",
    )
    for row in (plan["current"], plan["recommended"], *plan["front"]):
        assert all(key in row for key in keys)
    candidates = [_as_result(r) for r in (plan["current"], *plan["configurations"])]
    recommended = _as_result(plan["recommended"])
    assert not any(dominates(other, recommended) for other in candidates)  # never dominated
    assert plan["recommended"]["index"] in [r["index"] for r in plan["front"]]
    goal, limit = plan["attainment_goal_frac"], plan["max_flap_cycles"]
    weeks = plan["weeks_per_trace"]
    per_trace_limit = limit * weeks if limit is not None else None
    current = _as_result(plan["current"])
    if meets_goals(current, goal, per_trace_limit):
        cheaper = [
            c
            for c in candidates[1:]
            if meets_goals(c, goal, per_trace_limit)
            and c.cost_usd < current.cost_usd
            and c.flap_cycles <= current.flap_cycles
        ]
        assert (plan["case"] == "kept") == (not cheaper and plan["case"] != "same-cost-better")
    # No setting costs less than the oracle at its own attainment, and none meeting the goal less than the oracle.
    weeks = plan["weeks_per_trace"]
    assert plan["oracle_cost_usd_per_week"] == pytest.approx(plan["oracle_cost_usd"] * weeks)
    for row in (plan["current"], *plan["configurations"]):
        assert row["regret_usd"] >= -1e-9 and row["regret_usd_per_week"] == pytest.approx(row["regret_usd"] * weeks)
        if row["slo_attainment_frac"] >= goal:
            assert row["cost_usd_per_week"] >= plan["oracle_cost_usd_per_week"] - 1e-6
    rows = {r["index"]: r for r in (plan["current"], *plan["configurations"])}
    assert plan["recommended"]["regret_usd"] == rows[plan["recommended"]["index"]]["regret_usd"]
    # What is written lints clean together with the patched Deployment.
    assert [f for f in plan["findings"] if f["severity"] == "error"] == []
    assert UNSELECTED not in plan["manifests"]
    assert "terminationGracePeriodSeconds" in plan["deployment_patch"]


def _emitted_values(plan: dict) -> dict:
    autoscaler = autoscaler_from_document("scaledobject.yaml", yaml.safe_load(plan["manifests"]))
    so = autoscaler.scaled_object
    return {
        "target": so.triggers[0].threshold,
        "min_replicas": so.min_replica_count,
        "max_replicas": so.max_replica_count,
        "scale_down_window_s": so.behavior.scale_down.stabilization_window_seconds,
    }


def test_half_an_hour_of_growing_traffic_on_a_slow_replica_replaces_the_waiting_queue(capsys):
    # The chapter's made-up team on the slow replica: its waiting-queue ScaledObject misses 95 %.
    plan = _plan(capsys, *HALF_HOUR)
    _check_rules(plan)
    assert plan["case"] == "current-misses" and plan["recommended"]["meets_goals"]
    assert _emitted_values(plan) == {"max_replicas": 12, **plan["recommended"]["values"]}
    assert 'model_name="llama"' in plan["manifests"]  # the team's own selector survives
    assert "misses the attainment goal" in plan["reason"]


@pytest.fixture(scope="module")
def conv_trace(shared_dir):
    return shared_dir / "traces" / "AzureLLMInferenceTrace_conv.csv"


def test_real_conversation_traffic_on_a_slow_replica_replaces_a_failing_setting(shared_dir, conv_trace, capsys):
    # A real waiting-queue ScaledObject with no selector and at most 3 pods, on an hour of Azure's
    # conversation trace stretched to a day; each replica drains about 3.4 requests/s.
    manifest = shared_dir / "real-world" / "manifests" / "92-seed003-attempt2-waiting.yaml"
    plan = _plan(
        capsys,
        "--trace",
        str(conv_trace),
        "--manifest",
        str(manifest),
        "--fleet",
        str(SLOW_FLEET),
        "--grid",
        str(GRID),
        "--concurrency-target",
        "48",
        "--max-flap-cycles",
        "20",
        "--stretch-day",
    )
    _check_rules(plan)
    assert plan["weeks_per_trace"] == 7
    assert plan["case"] == "current-misses" and not plan["current"]["meets_goals"]
    assert plan["recommended"]["meets_goals"] and plan["recommended"]["flap_cycles_per_week"] <= 7 * 20
    # The manifests carry exactly the recommended values.
    assert _emitted_values(plan) == {**{"max_replicas": 3}, **plan["recommended"]["values"]}
    # No selector in the team's query and no workload in its file: scoped to the target's pods.
    assert 'pod=~"qwen-vllm-[a-z0-9]+-[a-z0-9]+"' in plan["manifests"]


def test_real_code_traffic_finds_a_cheaper_setting_that_flaps_no_more(shared_dir, capsys, tmp_path):
    code = shared_dir / "traces" / "AzureLLMInferenceTrace_code.csv"
    plan = _plan(
        capsys,
        "--trace",
        str(code),
        "--manifest",
        str(CURRENT),
        "--fleet",
        str(SLOW_FLEET),
        "--grid",
        str(GRID),
        "--concurrency-target",
        "48",
        "--max-flap-cycles",
        "4",
        "--out",
        str(tmp_path / "out"),
    )
    _check_rules(plan)
    assert plan["case"] == "cheaper" and plan["current"]["meets_goals"]
    assert plan["recommended"]["cost_usd_per_week"] < plan["current"]["cost_usd_per_week"]
    assert plan["recommended"]["flap_cycles_per_week"] <= plan["current"]["flap_cycles_per_week"]
    assert _emitted_values(plan) == {"max_replicas": 12, **plan["recommended"]["values"]}
    assert 'model_name="llama"' in plan["manifests"]
    written = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert written == ["deployment-patch.yaml", "patched-llama.yaml", "scaledobject.yaml"]
    patched = (tmp_path / "out" / "patched-llama.yaml").read_text(encoding="utf-8")
    assert "--shutdown-timeout=451" in patched and "terminationGracePeriodSeconds: 466" in patched


def test_real_conversation_traffic_keeps_a_current_setting_that_is_best(conv_trace, capsys):
    plan = _plan(
        capsys,
        "--trace",
        str(conv_trace),
        "--manifest",
        str(CURRENT),
        "--fleet",
        str(SLOW_FLEET),
        "--grid",
        str(GRID),
        "--concurrency-target",
        "48",
        "--max-flap-cycles",
        "20",
    )
    _check_rules(plan)
    assert plan["case"] == "kept" and plan["recommended"] == plan["current"]
    assert plan["reason"].startswith("Keep the current setting")
    kept = yaml.safe_load(plan["manifests"])
    assert kept == [d for d in yaml.safe_load_all(CURRENT.read_text(encoding="utf-8"))][1]  # the team's own


@pytest.mark.parametrize(
    "args, message",
    [
        (["--grid", str(PLAN_DATA / "bad-grid.yaml")], "'warmup_s' is not a value planner plan can write"),
        (["--attainment-goal", "2"], "--attainment-goal: expected a fraction"),
        (["--max-flap-cycles", "-1"], "--max-flap-cycles: expected a number >= 0"),
        (["--start", "next monday"], "--start: expected an ISO date and time"),
        (["--forecasts", "arima"], "--forecasts: unknown method arima"),
        (["--forecasts", "--forecast-targets", "0.5,x"], "--forecast-targets: expected comma-separated fractions"),
        (["--forecasts", "all", "--forecast-targets", "0"], "--forecast-targets: expected numbers > 0"),
    ],
)
def test_bad_input_exits_2_with_one_line(tmp_path, capsys, args, message):
    (PLAN_DATA / "bad-grid.yaml").exists() or pytest.fail("missing test data")
    status = main(
        [
            "plan",
            "--trace",
            str(DATA_DIR / "scenarios" / "plan_half_hour.yaml"),
            "--manifest",
            str(CURRENT),
            "--concurrency-target",
            "48",
            *args,
        ]
    )
    err = capsys.readouterr().err
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1


def test_start_reaches_the_plan(monkeypatch, capsys):
    # The replay's wall clock is the fleet's: --start sets it before make_plan simulates anything.
    import planner.cli.plan as cli_plan

    seen = []

    def capture(trace, current, fleet, *args, **kwargs):
        seen.append(fleet.start_epoch_s)
        raise PlannerInputError("stop here")

    monkeypatch.setattr(cli_plan, "make_plan", capture)
    argv = ["plan", "--trace", str(DATA_DIR / "scenarios" / "plan_half_hour.yaml"), "--manifest", str(CURRENT)]
    assert main([*argv, "--concurrency-target", "48", "--start", "2024-06-03T08:00+01:00"]) == 2
    assert main([*argv, "--concurrency-target", "48"]) == 2
    assert seen == [1717398000.0, 1704067200.0]
    assert "stop here" in capsys.readouterr().err


def test_forecasts_are_priced_beside_reactive_scaling_around_the_recommendation(capsys):
    from planner.simulate.sweep import SweepResult
    from planner.workflows.forecast_comparison import gpu_hours_at_attainment

    plan = _plan(
        capsys, *HALF_HOUR_INPUTS, "--forecasts", "predict_linear,max_over_time", "--forecast-targets", "1,1.5"
    )
    section = plan["forecasts"]
    assert [s["name"] for s in section["strategies"]] == ["reactive", "predict_linear", "max_over_time"]
    target = plan["recommended"]["values"]["target"]
    for strategy in section["strategies"]:
        assert [run["target"] for run in strategy["runs"]] == [round(target * f, 3) for f in (1, 1.5)]
        runs = [
            SweepResult(k, (), r["slo_attainment_frac"], r["cost_usd"], r["gpu_hours"], 0, 0, 0, 0, 0)
            for k, r in enumerate(strategy["runs"])
        ]
        value, _, note = gpu_hours_at_attainment(runs, 0.95)
        assert strategy["gpu_hours_at_goal"] == value and strategy["note"] == note
    assert section["strategies"][0]["gpu_hours_at_goal"] is not None  # 1 meets 95 %, 1.5 does not
    assert section["strategies"][0]["query"] == ""
    assert section["strategies"][1]["query"].startswith("predict_linear((sum(vllm:num_requests_running{")
    assert 'model_name="llama"' in section["strategies"][2]["query"]  # the team's selector, as in the plan
    # The reactive runs are the recommended setting at those targets: at the recommended target itself it
    # costs what the plan's own replay of it does, per replayed span.
    reactive = section["strategies"][0]["runs"][0]
    weeks = plan["weeks_per_trace"]
    assert reactive["gpu_hours"] * weeks == pytest.approx(plan["recommended"]["gpu_hours_per_week"])


def test_without_json_the_forecasts_table_names_each_strategy_and_its_query(capsys):
    import dataclasses

    from planner.cli.plan import _print_forecasts
    from planner.workflows.forecast_comparison import gpu_hours_at_attainment
    from tests.explorers.test_explorers_forecasts import _comparison

    base = _comparison()
    strategies = []
    for strategy in base.strategies:
        value, bracket, note = gpu_hours_at_attainment(strategy.runs, 0.98)
        strategies.append(dataclasses.replace(strategy, gpu_hours_at_goal=value, bracket_gpu_hours=bracket, note=note))
    _print_forecasts(dataclasses.replace(base, strategies=tuple(strategies)))
    out = capsys.readouterr().out
    reactive, seasonal = (s.gpu_hours_at_goal for s in strategies)
    assert "Predictive triggers beside reactive scaling, priced at 98 % attainment" in out
    assert f"reactive  {reactive:.1f} GPU-hours at 98 % [target 10: 20.0 h, 99.90 %" in out
    assert (
        f"seasonal  {seasonal:.1f} GPU-hours at 98 % ({100 * (seasonal / reactive - 1):+.1f} % against reactive)" in out
    )
    assert out.rstrip().endswith("seasonal: q")


def test_a_schedule_beside_the_recommendation_is_priced_against_it_and_the_oracle(capsys):
    plan = _plan(capsys, *HALF_HOUR, "--schedule", "Europe/Dublin")
    schedule = plan["schedule"]
    assert schedule["timezone"] == "Europe/Dublin" and schedule["attainment_goal_frac"] == 0.95
    assert plan["case"] == "current-misses" and schedule["beside"] == "the generated ScaledObject"
    # The metric trigger alone is the recommendation, replayed again: the same run.
    assert schedule["reactive"]["slo_attainment_frac"] == plan["recommended"]["slo_attainment_frac"]
    assert schedule["oracle"]["cost_usd"] == pytest.approx(plan["oracle_cost_usd"])
    for run in ("scheduled", "reactive"):
        assert schedule["oracle"]["cost_usd"] <= schedule[run]["cost_usd"]
    assert schedule["met"] and schedule["scheduled"]["slo_attainment_frac"] >= 0.95
    assert not [f for f in schedule["findings"] if f["severity"] == "error"]
    assert yaml.safe_load(schedule["scaled_object"])["kind"] == "ScaledObject"


def test_an_unknown_schedule_zone_is_one_line_and_exit_2_before_any_replay(capsys, monkeypatch):
    def no_replay(*args, **kwargs):
        raise AssertionError("the zone is checked before any replay")

    monkeypatch.setattr("planner.cli.plan.make_plan", no_replay)
    status = main(["plan", *HALF_HOUR, "--schedule", "Mars/Olympus"])
    err = capsys.readouterr().err
    assert status == 2 and err.count("\n") == 1 and "--schedule 'Mars/Olympus'" in err


def test_a_kept_scaled_object_gets_its_schedule_beside_itself(shared_dir, capsys):
    # A week of Azure's code trace on the slow replica: the team's waiting-queue ScaledObject meets 99 % and is
    # kept, so the floors go beside it, and its replay alone is the recommendation's run.
    plan = _plan(
        capsys,
        "--trace",
        str(shared_dir / "traces" / "AzureLLMInferenceTrace_code.csv"),
        "--stretch-days",
        "7",
        "--manifest",
        str(shared_dir / "real-world" / "manifests" / "92-seed003-attempt2-waiting.yaml"),
        "--fleet",
        str(SLOW_FLEET),
        "--concurrency-target",
        "48",
        "--attainment-goal",
        "0.99",
        "--schedule",
    )
    schedule = plan["schedule"]
    assert plan["case"] == "kept" and schedule["beside"] == "the current ScaledObject"
    assert schedule["reactive"]["slo_attainment_frac"] == plan["recommended"]["slo_attainment_frac"]
    assert schedule["reactive"]["cost_usd"] == pytest.approx(plan["recommended"]["cost_usd_per_week"])
    assert "query: sum(vllm:num_requests_waiting)" in schedule["scaled_object"]
