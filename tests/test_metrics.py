"""Tests for planner.readers.metrics on real vLLM scrapes and the sample."""

from pathlib import Path

import pytest

from planner.errors import PlannerInputError
from planner.readers.metrics import read_metrics_scrape, report_from_text

SAMPLE = Path(__file__).resolve().parent.parent / "data" / "metrics" / "vllm-v0-style-loaded.txt"


def _status(report):
    return {s.key: s.status for s in report.signals}


def test_real_vllm_0_25_loaded_scrape(shared_dir):
    report = read_metrics_scrape(shared_dir / "real-world/metrics/vllm-0.25.1-opt125m-tp2-loaded.txt")
    assert report.engine.startswith("V1") and report.model_names == ("opt-125m-tp2",)
    assert set(_status(report).values()) == {"current"}
    values = {s.key: s.value for s in report.signals}
    assert values["running"] == 64 and values["waiting"] == 64
    assert values["kv_usage"] == pytest.approx(0.112, abs=5e-4)
    assert report.missing_required == () and report.deprecated_present == ()
    assert report.queries["kv_usage_fleet_sum"] == 'sum(vllm:kv_cache_usage_perc{model_name="opt-125m-tp2"})'


def test_real_v1_scrape_still_exporting_old_tpot_name(shared_dir):
    report = read_metrics_scrape(shared_dir / "real-world/metrics/vllm-v1-qwen1.5-0.5b-chat-idle.txt")
    assert _status(report)["itl"] == "both"
    assert report.deprecated_present == ("vllm:time_per_output_token_seconds",)
    assert "vllm:inter_token_latency_seconds_bucket" in report.queries["itl_p99_s"]


def test_sample_v0_scrape_flags_deprecated_and_missing():
    report = read_metrics_scrape(SAMPLE)
    assert report.engine.startswith("V0")
    assert _status(report)["kv_usage"] == "deprecated"
    assert report.missing_required == ("queue_time",)
    assert report.deprecated_in_use == ("vllm:gpu_cache_usage_perc", "vllm:time_per_output_token_seconds")
    assert report.legacy_metrics == ("vllm:num_requests_swapped", "vllm:cpu_cache_usage_perc")
    assert "queue_time_p99_s" not in report.queries
    assert report.queries["kv_usage_per_pod_avg"].startswith("avg(vllm:gpu_cache_usage_perc{")


def test_errors():
    with pytest.raises(PlannerInputError, match="no vllm: metrics found"):
        report_from_text("# TYPE up gauge\nup 1\n", source="scrape.txt")
    with pytest.raises(PlannerInputError, match=r"scrape\.txt: not Prometheus text exposition format"):
        report_from_text("vllm:num_requests_running{model_name=\"x\"} not-a-number\n", source="scrape.txt")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"num_requests_waiting": 3}', "this is JSON, not a /metrics scrape"),
        ("<html><body>metrics</body></html>", "this is HTML or XML"),
        ("", "the file is empty"),
        ("vllm:num_requests_waiting 1\nfoo bar baz\n", "at line 2 ('foo bar baz')"),
    ],
)
def test_a_file_that_is_not_a_scrape_is_explained(tmp_path, text, message):
    scrape = tmp_path / "scrape.txt"
    scrape.write_text(text)
    with pytest.raises(PlannerInputError) as error:
        read_metrics_scrape(scrape)
    assert message in str(error.value)
    assert "curl http://POD:8000/metrics" in str(error.value)  # says what to save instead
