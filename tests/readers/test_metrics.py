"""Tests for planner.readers.metrics on real vLLM scrapes and the sample."""

import pytest

from planner.errors import PlannerInputError
from planner.readers.metrics import prefix_cache_hit_frac, read_metrics_scrape, report_from_text
from tests.conftest import DATA_DIR

SAMPLE = DATA_DIR / "metrics" / "vllm-v0-style-loaded.txt"


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
        report_from_text('vllm:num_requests_running{model_name="x"} not-a-number\n', source="scrape.txt")


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


def test_prefix_cache_hit_fraction_of_a_real_loaded_scrape(shared_dir):
    # vLLM 0.25.1 under a benchmark of random prompts: 2,480 of 339,968 prompt tokens found cached.
    loaded = read_metrics_scrape(shared_dir / "real-world/metrics/vllm-0.25.1-opt125m-tp2-loaded.txt")
    assert _status(loaded)["prefix_queries"] == _status(loaded)["prefix_hits"] == "current"
    assert loaded.value("prefix_queries") == 339_968 and loaded.value("prefix_hits") == 2_480
    assert loaded.prefix_cache_hit_frac == pytest.approx(2_480 / 339_968)
    assert loaded.queries["prefix_cache_hit_frac"] == (
        'sum(rate(vllm:prefix_cache_hits_total{model_name="opt-125m-tp2"}[5m])) / '
        'sum(rate(vllm:prefix_cache_queries_total{model_name="opt-125m-tp2"}[5m]))'
    )
    # The idle scrape of the same server run has looked nothing up yet; the interval is the loaded run.
    idle = read_metrics_scrape(shared_dir / "real-world/metrics/vllm-0.25.1-opt125m-tp2-idle.txt")
    assert idle.prefix_cache_hit_frac is None
    assert prefix_cache_hit_frac(loaded, idle) == pytest.approx(2_480 / 339_968)
    with pytest.raises(PlannerInputError, match="restarted between the scrapes"):
        prefix_cache_hit_frac(idle, loaded)


def test_prefix_cache_hit_fraction_over_an_interval_and_under_old_names():
    def scrape(queries, hits, prefix="vllm:"):
        return report_from_text(
            "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting 0\n"
            f"# TYPE {prefix}prefix_cache_queries_total counter\n{prefix}prefix_cache_queries_total {queries}\n"
            f"# TYPE {prefix}prefix_cache_hits_total counter\n{prefix}prefix_cache_hits_total {hits}\n"
        )

    assert prefix_cache_hit_frac(scrape(3000, 2000), scrape(1000, 500)) == pytest.approx(0.75)
    old = scrape(1000, 250, prefix="vllm:gpu_")
    assert _status(old)["prefix_hits"] == "deprecated" and old.prefix_cache_hit_frac == 0.25
    assert "vllm:gpu_prefix_cache_hits_total" in old.queries["prefix_cache_hit_frac"]


def test_a_scrape_without_prefix_counters_has_no_hit_fraction():
    assert read_metrics_scrape(SAMPLE).prefix_cache_hit_frac is None


def test_cache_config_info_and_the_planner_reproduce_each_other(shared_dir):
    # vLLM 0.25.1, opt-125m (12 layers, 12 KV heads of 64, fp16) on TP 2, max_model_len 2,048:
    # the scrape's cache_config_info carries the capacity the start-up log prints.
    from planner.capacity.kv_cache import ModelSpec, ServingSpec, kv_capacity, page_size_bytes

    report = read_metrics_scrape(shared_dir / "real-world/metrics/vllm-0.25.1-opt125m-tp2-idle.txt")
    config = report.cache_config
    assert config["enable_prefix_caching"] == "True" and config["block_size"] == "16"
    opt = ModelSpec("opt-125m", 12, 12, 12, 64, "float16", max_position_embeddings=2048)
    serving = ServingSpec(tensor_parallel_size=2, vllm_version="0.25.1")
    blocks = int(config["num_gpu_blocks"])
    capacity = kv_capacity(opt, serving, blocks * page_size_bytes(opt, serving) * 12)
    assert capacity.num_blocks == blocks == 25_028
    assert capacity.kv_tokens == int(config["kv_cache_size_tokens"]) == 400_448
    assert capacity.max_concurrency == float(config["kv_cache_max_concurrency"]) == 195.53125
    # A scrape near 0.11 has the block count but not yet the token figure.
    older = read_metrics_scrape(shared_dir / "real-world/metrics/vllm-v1-qwen1.5-0.5b-chat-idle.txt")
    assert older.cache_config["num_gpu_blocks"] == "2452" and "kv_cache_size_tokens" not in older.cache_config
    assert read_metrics_scrape(SAMPLE).cache_config == {}
