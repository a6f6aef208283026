"""The Little's law chapter uses its parameters: a papermill run on other numbers changes the page."""

from tests.notebooks import glued, run_chapter


def test_default_run_glues_the_worked_example(tmp_path):
    values = glued(run_chapter("littles_law", tmp_path))
    assert values["replicas"] == 3  # W11
    assert values["backlog"] == "960"  # W14
    assert values["safe_replicas"] == 4  # W16


def test_papermill_parameters_reach_every_number(tmp_path):
    values = glued(
        run_chapter(
            "littles_law",
            tmp_path,
            knee_concurrency=64.0,
            request_duration_s=9.5,
            target_concurrency=52.0,
            arrival_rate_rps=30.0,
            step_arrival_rate_rps=45.0,
            warmup_s=120.0,
        )
    )
    # 30 x 9.5 = 285 in flight -> ceil(285 / 52) = 6 replicas; mu = 64 / 9.5 per replica.
    assert values["in_flight"] == "285"
    assert values["replicas"] == 6
    # 6 x 64 / 9.5 = 40.4 req/s >= 45? no: (45 - 40.42) x 120 = 549 queued.
    assert values["backlog"] == "549"
    assert values["step_pct"] == "50%"


def test_one_knee_the_target_line_at_the_target_and_a_legend(tmp_path):
    notebook = run_chapter("littles_law", tmp_path)
    values = glued(notebook)
    # The TPOT objective binds at the knee: 6 + 0.25 x 48 = 18 ms.
    assert values["largest_batch"] == 48
    assert values["knee_verdict"].startswith("exactly the knee")
    html = "".join(
        str(output.get("data", {}).get("text/html", ""))
        for cell in notebook.cells
        for output in cell.get("outputs", [])
    )
    assert "...while TPOT rises too" in html
    assert '"target T = 40"' in html and '"knee K = 48"' in html and '"TPOT objective 18 ms"' in html
    assert '"target T = 32"' not in html


def test_the_backlog_waits_in_the_old_replicas_queues(tmp_path):
    values = glued(run_chapter("littles_law", tmp_path))
    assert values["backlog_per_replica"] == "312"  # 960 over 3 replicas, less the 8 slots each had free
    assert values["shared_clear_s"] == "240"  # 960 / (20 - 16)
    assert values["round_robin_clear_s"] == "392"  # about 320 / (4 - 16 / 5), less the knee's free slots
    assert values["least_loaded_clear_s"] == "219"


def test_the_hpa_tolerance_band_is_counted_in_the_headroom(tmp_path):
    values = glued(run_chapter("littles_law", tmp_path))
    assert values["headroom_pct"] == "20%" and values["guaranteed_headroom_pct"] == "9%"
    assert values["safe_target"] == "30.0" and values["safe_target_in_band"] == "27.3"
