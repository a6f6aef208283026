"""Shared fixtures: the repository root, bundled data, and the optional shared corpus."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import settings

REPO_ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = REPO_ROOT / "data"
TEST_DATA_DIR = Path(__file__).resolve().parent / "data"
# Real traces, manifests and scrapes other teams published, kept beside the
# checkout rather than copied in.
SHARED_DIR = REPO_ROOT.parent / "shared"


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    """The shared corpus folder; tests that need it skip where it is absent."""
    if not SHARED_DIR.is_dir():
        pytest.skip(f"shared corpus not found at {SHARED_DIR} (it sits beside the checkout in CI)")
    return SHARED_DIR


# The best_possible setting: the workflow, its charts and its explorer read one comparison, made once per
# test process (a reactive and a scheduled run at each target, and the oracle: seconds of work).
BEST_POSSIBLE_GOAL = 0.99
BEST_POSSIBLE_FRACS = (1.0, 1.9)


@pytest.fixture(scope="session")
def best_possible_setting():
    """A day of the bundled trace stretched (daily cycle eight to one) on seed 003's rig with a 5-minute cold start.

    Returns the trace, the fleet, its default scaling plan and their comparison with the oracle.
    """
    import dataclasses

    from planner.readers.fleet import read_fleet
    from planner.readers.trace import read_trace
    from planner.simulate.traffic import WeeklyEnvelope, stretch_days
    from planner.workflows.best_possible import compare_with_oracle
    from planner.workflows.schedule import default_scaling_plan

    source = read_trace(DATA_DIR / "traces" / "steady-0.6rps-12min.csv")
    trace = stretch_days(source, 0, 1, envelope=WeeklyEnvelope(peak_to_trough=8.0), mean_factor=2.0)
    fleet = dataclasses.replace(
        read_fleet(DATA_DIR / "fleets" / "seed003-rig.yaml"), warmup_s=300.0, ttft_slo_s=2.0, tick_s=5.0
    )
    plan = default_scaling_plan(trace, fleet)
    best = compare_with_oracle(trace, fleet, plan, BEST_POSSIBLE_GOAL, target_fracs=BEST_POSSIBLE_FRACS)
    return trace, fleet, plan, best


# Property tests: no per-example deadline (a loaded 2-core CI machine is slow at random).
# "ci" (`make unit`, `make test`, and wherever CI is set) runs a fixed example sequence, so a
# failure reproduces, and lowers what a test asks for to at most 200 examples; "thorough"
# (`make test-thorough`) runs each test's own count (up to 3,000) on fresh examples; "dev"
# (`make unit-fast`) tries at most 10 per test.
settings.register_profile("default", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True, print_blob=True)
settings.register_profile("thorough", deadline=None, print_blob=True)
settings.register_profile("dev", deadline=None, max_examples=10)
# The most examples a test gets under each capped profile, whatever its own settings ask for.
CAPPED_PROFILES = {"dev": 10, "ci": 200}
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") else "default"))

# Markers by module, so `make unit-fast` can leave out what starts a kernel, a
# browser or a long simulation (`-m "not notebook and not browser and not slow"`).
# tests/test_fast_loop.py fails when a module starts a kernel or a browser unmarked.
NOTEBOOK_MODULES = {
    # papermill runs of the chapters (a default run is read from the build's cache)
    "test_book_backlog",
    "test_book_cold_start",
    "test_book_drain",
    "test_book_flapping",
    "test_book_hpa_chapters",
    "test_book_kv_capacity",
    "test_book_lab",
    "test_book_littles_law",
    "test_book_manifest_review",
    "test_book_your_plan",
    "test_book_forecasts",
    "test_book_best_possible",
    "test_loadtest_thresholds_notebook",
    "test_book_executed",
    # tiny books built by jupyter-book, nbval, and `planner report` (papermill + jupyter-book)
    "test_book_pipeline",
    "test_page_assets",
    "test_cli_report",
    "test_status_page",
    "test_book_cache_build",
    # the forked kernels the chapters run in (tests/kernel_fork.py)
    "test_kernel_fork",
}
BROWSER_MODULES = {
    # the system Chromium through Playwright
    "test_check_built_book",
    "test_lab_rendering",
    "test_cli_report",
    "test_book_your_plan",
}
# Slow whatever the hypothesis profile, by name: a test-local kernel compiled afresh, a
# property test whose own @given (inside the test, out of the profile's reach) must see
# enough cases to cover every branch, a Dask cluster.
SLOW_TESTS = {
    "test_simulate_fast_decision::test_the_kernel_runs_inside_another_kernel",
    "test_simulate_fast_replica::test_the_kernel_equals_the_python_model_on_generated_replicas",
    "test_simulate_fast_replica::test_the_kernel_equals_the_python_model_on_large_batches",
    "test_cli_sweep::test_unreachable_scheduler_exits_2",
    "test_cli_sweep::test_dask_cluster_gives_the_local_results_even_when_a_worker_is_killed",
    # a week of real traffic, searched and replayed again through planner lint and planner simulate
    "test_cli_schedule::test_a_week_of_real_traffic_lints_clean_and_meets_the_goal_in_replay",
    # many replays, or every real manifest, or the reference engine beside the fast one
    "test_simulate_fast_supply::test_a_sweep_over_the_node_pools_grid_keys_gives_the_reference_results",
    "test_schedule::test_weekday_and_weekend_minimums_differ_on_a_week_with_quieter_weekends",
    "test_simulate_fast::test_fast_equals_reference_on_every_accepted_real_world_manifest",
    "test_simulate_fast::test_forecast_triggers_run_alike",
    "test_simulate_fast::test_forecasts_and_reacting_in_one_group_each_get_the_reference_result",
    "test_cli_plan::test_real_conversation_traffic_on_a_slow_replica_replaces_a_failing_setting",
    "test_cli_plan::test_a_kept_scaled_object_gets_its_schedule_beside_itself",
    "test_simulate_fast::test_a_store_that_drops_old_scrapes_changes_no_decision",
    # A second or more on 2 cores (medians of two `make unit-fast --durations=0` runs): days of simulated
    # traffic, engines compared tick by tick, subprocesses of the CLI, scans of every minute of a week.
    # `make unit` and `make test` run them; the fast loop keeps each module's quicker tests.
    "test_replica_queues::test_closed_forms_agree_with_the_integrated_model",
    "test_simulate_fast_twins::test_every_step_kernel_matches_its_reference_twin_tick_by_tick",
    "test_simulate_fast_twins::test_every_step_kernel_matches_its_reference_twin_tick_by_tick_with_a_node_pool",
    "test_cron_scaler::test_the_first_overlap_is_the_first_minute_both_windows_are_open",
    "test_simulate_fast_supply::test_fast_equals_reference_on_each_feature_of_the_node_pool",
    "test_simulate_fast_supply::test_fast_equals_reference_on_the_azure_conversation_trace",
    "test_simulate_fast_supply::test_configurations_with_a_node_pool_share_a_fleet_and_each_gets_what_it_gets_alone",
    "test_simulate_fast_supply::test_fast_equals_reference_on_generated_node_pools",
    "test_simulate_fast_supply::test_a_generated_group_on_a_node_pool_gives_each_member_what_it_gets_alone",
    "test_cli_sweep::test_stretch_day_sweeps_a_day_of_the_trace",
    "test_knee::test_grid_agrees_with_the_knee_at_every_pair",
    "test_simulate_fast::test_a_seasonal_naive_trigger_runs_compiled_alike",
    "test_simulate_fast::test_cron_windows_across_a_daylight_saving_change_run_compiled_alike",
    "test_simulate_fast::test_fast_equals_reference_on_generated_inputs",
    "test_simulate_fast::test_cron_triggers_run_compiled_alike",
    "test_simulate_reference::test_a_cron_window_holds_desired_replicas_through_a_day",
    "test_simulate_reference::test_the_start_moves_the_window_and_a_weekend_has_none",
    "test_plan::test_the_chapters_current_setting_is_kept_when_it_is_best",
    "test_simulate_calibration::test_simulated_mean_tpot_within_10_percent_at_every_level",
    "test_charts_loadtest_thresholds::test_every_chart_fits_the_content_column",
    "test_cli_traffic::test_a_week_in_simulate_and_plan",
    "test_simulate_fast_allocator::test_with_the_threshold_fixed_freed_large_arrays_leave_resident_memory",
    "test_simulate_fast_decision::test_a_day_of_syncs_with_long_policy_periods_fits_the_history",
    "test_simulate_fast_compiled::test_a_group_of_cron_schedules_gives_each_member_its_own_windows",
    "test_cli_knee::test_console_script_end_to_end",
    "test_schedule::test_the_triggers_hold_the_floor_in_force_at_every_minute",
    "test_readme::test_the_python_example_runs",
    "test_simulate_supply::test_a_placeholder_gives_its_gpu_to_a_real_pod_at_once",
    "test_simulate_supply::test_a_failed_node_request_backs_off_and_retries",
    "test_simulate_discrete_event::test_with_chunked_prefill_the_engines_agree_below_saturation",
    "test_promql_promtool::test_forecasts_a_day_back_give_prometheus_values",
    "test_lint_real_world_2::test_the_folder_linted_together_prints_json",
    "test_simulate_oracle::test_the_proof_lemmas_hold_tick_by_tick_on_real_traffic",
}


def cap_max_examples(items, cap: int) -> None:
    """Lower every hypothesis test's own ``max_examples`` to ``cap`` (a test may ask for 3,000)."""
    for item in items:
        function = getattr(getattr(item, "obj", None), "__func__", getattr(item, "obj", None))
        own = getattr(function, "_hypothesis_internal_use_settings", None)
        if own is not None and own.max_examples > cap:
            function._hypothesis_internal_use_settings = settings(own, max_examples=cap)


def pytest_collection_modifyitems(config, items):
    slow = set()
    for item in items:
        module = item.path.stem
        if item.path.suffix == ".ipynb" or module in NOTEBOOK_MODULES:
            item.add_marker(pytest.mark.notebook)
            slow.add(id(item))  # a kernel's start alone takes seconds
        if module in BROWSER_MODULES:
            item.add_marker(pytest.mark.browser)
        if f"{module}::{getattr(item, 'originalname', item.name)}" in SLOW_TESTS:
            item.add_marker(pytest.mark.slow)
            slow.add(id(item))
    # The longest tests first, so the two xdist workers do not wait on one at the end.
    items.sort(key=lambda item: id(item) not in slow)
    cap = CAPPED_PROFILES.get(settings.get_current_profile_name())
    if cap is not None:
        cap_max_examples(items, cap)
