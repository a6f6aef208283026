"""The chapter "From a load test to thresholds" really uses its `loadtest_path` parameter."""

import pytest

from tests.notebooks import glued, run_chapter


@pytest.mark.parametrize(("path", "ttft_ms", "itl_ms", "knee"), [
    ("../data/loadtests/qwen2.5-7b_guidellm_benchmarks.json", 2000.0, 50.0, 32.0),
    ("../tests/data/loadtests/guidellm_v05_qwen3-0.6b_concurrency", 250.0, 50.0, 4.0),
])
def test_papermill_run_on_another_file_reports_its_knee(tmp_path, path, ttft_ms, itl_ms, knee):
    notebook = run_chapter(
        "loadtest_thresholds", tmp_path,
        loadtest_path=path, ttft_p99_slo_ms=ttft_ms, itl_p99_slo_ms=itl_ms,
    )
    assert float(glued(notebook)["knee_concurrency_value"]) == knee
