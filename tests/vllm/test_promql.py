"""Tests for planner.vllm.promql: query strings match the metric names given."""

import pytest

from planner.vllm.promql import SIGNALS, queries_for, selector


def test_current_names_and_selector():
    names = {s.key: s.current for s in SIGNALS}
    queries = queries_for(names, {"model_name": "llama"}, window="2m")
    assert queries["kv_usage_fleet_sum"] == 'sum(vllm:kv_cache_usage_perc{model_name="llama"})'
    assert queries["in_flight_sum"] == (
        'sum(vllm:num_requests_running{model_name="llama"}) + sum(vllm:num_requests_waiting{model_name="llama"})'
    )
    assert queries["preemptions_per_s"] == 'sum(rate(vllm:num_preemptions_total{model_name="llama"}[2m]))'
    assert queries["queue_time_p99_s"] == (
        'histogram_quantile(0.99, sum by (le) (rate(vllm:request_queue_time_seconds_bucket{model_name="llama"}[2m])))'
    )


def test_deprecated_name_is_used_when_given_and_missing_signals_get_no_query():
    queries = queries_for({"kv_usage": "vllm:gpu_cache_usage_perc"})
    assert queries == {
        "kv_usage_fleet_sum": "sum(vllm:gpu_cache_usage_perc)",
        "kv_usage_per_pod_avg": "avg(vllm:gpu_cache_usage_perc)",
    }


def test_selector_refuses_quotes():
    assert selector(None) == ""
    with pytest.raises(ValueError, match="cannot be written"):
        selector({"model_name": 'a"b'})


def test_prefix_cache_hit_fraction_needs_both_counters():
    names = {s.key: s.current for s in SIGNALS}
    queries = queries_for(names, window="1m")
    assert queries["prefix_cache_hit_frac"] == (
        "sum(rate(vllm:prefix_cache_hits_total[1m])) / sum(rate(vllm:prefix_cache_queries_total[1m]))"
    )
    assert "prefix_cache_hit_frac" not in queries_for({"prefix_hits": "vllm:prefix_cache_hits"})
