"""Tests for planner.simulate.metrics: the simulated Prometheus and its query subset."""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from planner.errors import PlannerInputError
from planner.simulate.metrics import (
    BASE_NODE_KINDS,
    COLUMNS,
    MetricStore,
    depends_on_time,
    metric_column,
    node_kinds,
    parse_query,
)


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


# ---- offsets, subqueries, forecasts, histograms, the two majors, and what the store keeps ------------


def _ramp_store(n: int = 481, pods=(0, 1)) -> MetricStore:
    # Running = scrape index on every pod, one scrape every 15 s from t = 0; success counter +3 per scrape.
    store = MetricStore()
    for k in range(n):
        rows = np.zeros((len(pods), len(COLUMNS)))
        rows[:, COLUMNS.index("num_requests_running")] = k
        rows[:, COLUMNS.index("request_success_total")] = 3.0 * k
        store.record(15.0 * k, list(pods), rows, list(pods))
    return store


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("sum(vllm:num_requests_running offset 5m)", 2 * (3600 - 300) / 15),
        ("sum(vllm:num_requests_running offset 1h)", 0.0),
        ("sum(rate(vllm:request_success_total[5m] offset 30m))", 0.4),
        ("max_over_time((sum(vllm:num_requests_running))[10m:1m] offset 20m)", 2 * (3600 - 1200) / 15),
        ("predict_linear((sum(vllm:num_requests_running))[10m:1m], 600)", 2 * (3600 + 600) / 15),
        ("predict_linear(vllm:num_requests_running[1h30m], 60) / 2", (3600 + 60) / 15 / 2 * 2 / 2),
        ("sum(vllm:num_requests_running offset 1d) or vector(7)", 7.0),
    ],
)
def test_forecast_forms_on_a_known_ramp(query, expected):
    value, error = parse_query(query).scalar(_ramp_store(), 3600.0)
    if query.startswith("predict_linear(vllm"):  # per pod, two series: KEDA's multiple-elements error
        assert value is None and "multiple elements" in error
        return
    assert error is None and value == pytest.approx(expected, abs=1e-9)


def test_prometheus_2_keeps_the_sample_exactly_a_range_old_and_3_drops_it():
    store = _ramp_store()
    # At 60 s a [1m] window holds t = 0, 15, 30, 45, 60 in 2.x and 15..60 in 3.x.
    query = parse_query("min_over_time(vllm:num_requests_running[1m])")
    assert query.evaluate(store, 60.0, prometheus_major=2)[(0,)] == 0.0
    assert query.evaluate(store, 60.0, prometheus_major=3)[(0,)] == 1.0
    with pytest.raises(PlannerInputError, match="prometheus_major"):
        query.evaluate(store, 60.0, prometheus_major=4)


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("sum(vllm:num_requests_running offset -5m)", "negative offset"),
        ("sum(vllm:num_requests_running offset 5)", "offset needs a duration"),
        ("sum(vllm:num_requests_running offset 30m1h)", "largest to the smallest"),
        ("max_over_time((sum(vllm:num_requests_running))[30m:])", "step written"),
        ("holt_winters((sum(vllm:num_requests_running))[30m:1m], 1.5, 0.3)", "smoothing factor"),
        ("double_exponential_smoothing((sum(vllm:num_requests_running))[30m:1m], 0.3, 0)", "trend factor"),
        ("vllm:num_requests_running[5m]", "range vector"),
        ("sum(vllm:num_requests_running)[5m:1m]", "range vector"),
        ("predict_linear(sum(vllm:num_requests_running), 60)", "needs a range"),
        ("predict_linear(vllm:num_requests_running[5m])", "expected ','"),
    ],
)
def test_forecast_forms_the_simulator_refuses_are_named(query, message):
    with pytest.raises(PlannerInputError, match=message):
        parse_query(query)


def test_history_reaches_back_over_offsets_ranges_and_subqueries():
    assert parse_query("sum(vllm:num_requests_running)").history_s == 300.0
    assert parse_query("sum(rate(vllm:request_success_total[10m]))").history_s == 600.0
    assert parse_query("sum(vllm:num_requests_running offset 1d)").history_s == 86_400.0 + 300.0
    text = "predict_linear((sum(rate(vllm:request_success_total[5m] offset 1h)))[30m:1m] offset 2h, 60)"
    assert parse_query(text).history_s == 7200 + 1800 + 60 + 3600 + 300


def test_the_compiled_subset_and_what_depends_on_time():
    plain = parse_query("sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)")
    assert node_kinds(plain.node) <= BASE_NODE_KINDS and not depends_on_time(plain.node)
    assert depends_on_time(parse_query("sum(rate(vllm:request_success_total[1m]))").node)
    for text in ("sum(vllm:num_requests_running offset 1d)", "max_over_time((sum(vllm:num_requests_running))[5m:1m])"):
        node = parse_query(text).node
        assert node_kinds(node) - BASE_NODE_KINDS and depends_on_time(node)


def test_subquery_points_cached_in_the_store_change_nothing():
    text = "predict_linear((sum(rate(vllm:request_success_total[2m]))+ sum(vllm:num_requests_running))[20m:1m], 300)"
    query = parse_query(text)
    store = _ramp_store()
    cached = [query.scalar(store, t)[0] for t in range(1200, 7200, 45)]
    assert store.subquery_points  # steps were kept for reuse
    fresh = []
    for t in range(1200, 7200, 45):
        blank = _ramp_store()
        blank.subquery_points = {}
        fresh.append(query.scalar(blank, t)[0])
    assert cached == fresh
    # A step after the store's last scrape is not kept (a later scrape could still change it).
    query.scalar(store, 7300.0)
    assert max(next(iter(store.subquery_points.values()))) <= 7200 * 1000


def test_the_store_drops_scrapes_beyond_its_retention_and_keeps_what_queries_reach():
    store = MetricStore()
    store.retention_s = 900.0
    query = parse_query("max_over_time((sum(vllm:num_requests_running))[10m:1m])")
    reference = _ramp_store(n=6001, pods=(0,))
    for k in range(6001):
        rows = np.zeros((1, len(COLUMNS)))
        rows[0, COLUMNS.index("num_requests_running")] = k
        rows[0, COLUMNS.index("request_success_total")] = 3.0 * k
        store.record(15.0 * k, [0], rows, [0])
        if k % 500 == 0:
            assert query.scalar(store, 15.0 * k) == query.scalar(reference, 15.0 * k)
    assert len(store.times_s) < 2048 + 900 / 15 + 1 and store.times_s[-1] == 90_000.0


def test_a_run_keeps_the_history_its_triggers_reach(tmp_path):
    from planner.simulate.control import Control
    from planner.simulate.fleet import Fleet, FleetSpec
    from planner.simulate.metrics import HISTORY_MARGIN_S
    from planner.simulate.reference import RunState
    from planner.simulate.replica import RequestState
    from tests.simulate_helpers import scaled_object, write_manifest

    autoscaler = write_manifest(tmp_path, scaled_object("chat", "sum(vllm:num_requests_waiting offset 1d)", 4))
    control = Control(autoscaler)
    assert control.history_s == 86_400.0 + 300.0
    empty = np.zeros(0)
    state = RunState(FleetSpec(), control, RequestState(empty, empty, empty), Fleet(FleetSpec()))
    assert state.store.retention_s == 86_400.0 + 300.0 + HISTORY_MARGIN_S


def test_histogram_quantile_over_vllm_buckets():
    store = MetricStore()
    bounds = (0.1, 0.5, float("inf"))
    for k in range(21):
        # Pod 0 observes 2, 4, 2 per bucket per scrape (cumulative 2, 6, 8); pod 1 twice as many.
        store.record(15.0 * k, [0, 1], np.zeros((2, len(COLUMNS))), [0, 1])
        counts = np.array([[2.0, 6.0, 8.0], [4.0, 12.0, 16.0]]) * k
        store.record_histogram("vllm:time_to_first_token_seconds_bucket", 15.0 * k, [0, 1], bounds, counts)
    text = "histogram_quantile(0.5, sum by (le) (rate(vllm:time_to_first_token_seconds_bucket[5m])))"
    with pytest.raises(PlannerInputError, match="not one the simulated vLLM pods export"):
        parse_query(text)
    query = parse_query(text, histograms=True)
    # Rates 0.4, 1.2, 1.6 per s over the fleet: rank 0.8 in (0.1, 0.5]: 0.1 + 0.4 * (0.8 - 0.4) / 0.8 = 0.3.
    for major in (2, 3):
        assert query.scalar(store, 300.0, prometheus_major=major) == (pytest.approx(0.3), None)
    per_pod = parse_query("histogram_quantile(0.5, vllm:time_to_first_token_seconds_bucket)", histograms=True)
    assert per_pod.evaluate(store, 300.0) == {(0,): pytest.approx(0.3), (1,): pytest.approx(0.3)}
    with pytest.raises(PlannerInputError, match="end with \\+Inf"):
        store.record_histogram("vllm:time_to_first_token_seconds_bucket", 315.0, [0], (0.1, 0.5, 1.0), counts[:1])
