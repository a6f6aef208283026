"""The Little's law chapter uses its parameters: a papermill run on other numbers changes the page."""

from tests.notebooks import glued, run_chapter


def test_default_run_glues_the_worked_example(tmp_path):
    values = glued(run_chapter("littles_law", tmp_path))
    assert values["replicas"] == 3  # W11
    assert values["backlog"] == "960"  # W14
    assert values["safe_replicas"] == 4  # W16


def test_papermill_parameters_reach_every_number(tmp_path):
    values = glued(run_chapter(
        "littles_law", tmp_path,
        knee_concurrency=64.0, request_duration_s=9.5, target_concurrency=52.0,
        arrival_rate_rps=30.0, step_arrival_rate_rps=45.0, warmup_s=120.0,
    ))
    # 30 x 9.5 = 285 in flight -> ceil(285 / 52) = 6 replicas; mu = 64 / 9.5 per replica.
    assert values["in_flight"] == "285"
    assert values["replicas"] == 6
    # 6 x 64 / 9.5 = 40.4 req/s >= 45? no: (45 - 40.42) x 120 = 549 queued.
    assert values["backlog"] == "549"
    assert values["step_pct"] == "50%"
