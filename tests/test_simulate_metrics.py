"""Tests for planner.simulate.metrics: the simulated Prometheus and its query subset."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from planner.errors import PlannerInputError
from planner.simulate.metrics import COLUMNS, MetricStore, metric_column, parse_query


def _store():
    # Two pods scraped every 15 s: running 10 and 30, waiting 0 and 4; success counter +15/scrape on pod 0.
    store = MetricStore()
    for k in range(1, 9):
        rows = np.zeros((2, len(COLUMNS)))
        rows[:, COLUMNS.index("num_requests_running")] = [10, 30]
        rows[:, COLUMNS.index("num_requests_waiting")] = [0, 4]
        rows[:, COLUMNS.index("kv_cache_usage_perc")] = [0.25, 0.75]
        rows[:, COLUMNS.index("request_success_total")] = [15.0 * k, 0.0]
        store.record(15.0 * k, [0, 1], rows, [0, 1, 2])
    return store


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("sum(vllm:num_requests_waiting)", 4.0),
        ('sum(vllm:num_requests_running{model_name="chat"}) + sum(vllm:num_requests_waiting{model_name="chat"})', 44.0),
        ("avg(vllm:kv_cache_usage_perc)", 0.5),
        ("max(vllm_num_requests_running)", 30.0),
        ("sum(gpu_cache_usage_perc)", 1.0),
        ('sum(vllm:num_requests_running) / count(kube_pod_info{namespace="x"})', 40.0 / 3),
        ("sum(rate(vllm:request_success_total[1m]))", 1.0),
        ("sum(avg_over_time(vllm:num_requests_waiting[2m]))", 4.0),
        ('sum(vllm:kv_cache_usage_perc{pod=~".*decode.*"}) or vector(0)', 1.0),
        ("2 * sum by (model_name) (vllm:num_requests_waiting)", 8.0),
    ],
)
def test_queries_evaluate_as_prometheus_would(query, expected):
    value, error = parse_query(query).scalar(_store(), 120.0)
    assert error is None
    assert value == pytest.approx(expected)


def test_rate_extrapolates_to_the_window_edges_like_prometheus():
    # Samples at 60..120 s inside a 60 s window ending at 120 (left-open): 75, 90, 105, 120 -> 4 samples,
    # increase 45 over 45 s, extrapolated by the 15 s gap at the start: 60 over 60 s = 1/s.
    assert parse_query("rate(vllm:request_success_total[1m])").evaluate(_store(), 120.0)[(0,)] == pytest.approx(1.0)
    assert parse_query("increase(vllm:request_success_total[1m])").evaluate(_store(), 120.0)[(0,)] == pytest.approx(
        60.0
    )


def test_a_bare_selector_over_several_pods_is_keda_s_multiple_elements_error():
    value, error = parse_query("vllm:num_requests_waiting").scalar(_store(), 120.0)
    assert value is None and "multiple elements" in error


def test_per_pod_grouping_keeps_one_series_per_pod():
    result = parse_query("sum by (pod) (vllm:num_requests_running)").evaluate(_store(), 120.0)
    assert sorted(result.values()) == [10.0, 30.0]


def test_no_scrape_yet_is_an_empty_result():
    assert parse_query("sum(vllm:num_requests_waiting)").scalar(MetricStore(), 10.0) == (None, None)


@pytest.mark.parametrize(
    "query",
    [
        'max(llm_d_epp_flow_control_pool_saturation{inference_pool="p"})',
        "histogram_quantile(0.99, sum by (le) (rate(vllm:e2e_request_latency_seconds_bucket[5m])))",
        "sum(vllm:num_requests_waiting",
    ],
)
def test_an_uninterpretable_query_is_named_with_the_mapping_hint(query):
    with pytest.raises(PlannerInputError) as error:
        parse_query(query)
    assert " ".join(query.split()) in str(error.value) and "signals" in str(error.value)


def test_the_signals_mapping_replaces_a_query():
    query = parse_query(
        "max(inferflow_inflight_requests)", {"max(inferflow_inflight_requests)": "max(vllm:num_requests_running)"}
    )
    assert query.scalar(_store(), 120.0) == (30.0, None)


def test_metric_name_spellings():
    assert metric_column("prometheus.googleapis.com|vllm:num_requests_waiting|gauge") == "num_requests_waiting"
    assert metric_column("DCGM_FI_DEV_GPU_UTIL") == "gpu_util_pct"
    assert metric_column("vllm:request_success_total") == "request_success_total"
    assert metric_column("inferflow_inflight_requests") is None


def test_every_query_in_the_real_manifests_parses_or_is_refused_by_name(shared_dir):
    parsed = refused = 0
    for path in sorted((shared_dir / "real-world" / "manifests").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if not isinstance(document, dict) or document.get("kind") != "ScaledObject":
                continue
            for trigger in document["spec"].get("triggers", []):
                query = (trigger.get("metadata") or {}).get("query")
                if not query:
                    continue
                try:
                    parse_query(query)
                    parsed += 1
                except PlannerInputError as error:
                    assert " ".join(query.split())[:40] in str(error)
                    refused += 1
    assert parsed >= 14 and refused >= 4
