"""The compiled simulated Prometheus equals planner.simulate.metrics bit for bit, series order included."""

from __future__ import annotations

import math
import struct

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import njit

from planner.errors import PlannerInputError
from planner.simulate import metrics
from planner.simulate.fast import metrics as fast_metrics
from planner.simulate.fast.metrics import (
    MAX_DEPTH,
    OUT_OF_ROOM,
    NotCompilable,
    compile_query,
    evaluate,
    fresh_index,
    last_index,
    python_sum,
    scalar,
    store_arrays,
    workspace,
    workspace_arrays,
)
from planner.simulate.metrics import COLUMNS, STALENESS_S, MetricStore, metric_column, parse_query
from planner.vllm.forecast import Forecast, forecast_query
from tests.simulate.fast.test_simulate_fast import POD_METRICS, QUERIES

COUNTER_NAMES = (
    "vllm:request_success_total",
    "vllm:generation_tokens_total",
    "vllm_prompt_tokens_total",
    "vllm:num_preemptions_total",
    "request_success",
    "generation_tokens",
)
GAUGE_NAMES = (
    "vllm:num_requests_running",
    "num_requests_running",
    "vllm_num_requests_waiting",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
    "gpu_cache_usage_perc",
    "DCGM_FI_DEV_GPU_UTIL",
    "gpu_utilization_percent",
    "prometheus.googleapis.com|vllm:num_requests_waiting|gauge",
)
MATCHERS = ("", '{model_name="chat"}', '{namespace="x",pod=~".*decode.*"}')
WINDOWS = ("30s", "45s", "1m", "90s", "2m", "5m", "10m")
OFFSETS = ("15s", "1m", "90s", "5m", "6m", "1h")  # the stores span 1 to 12 minutes
NUMBERS = ("0", "1", "2", "0.5", "3", "10", "1e3")
GROUPINGS = (
    "",
    "by (pod)",
    "by (namespace)",
    "without (pod)",
    "without (namespace)",
    "by (instance)",
    "by (model_name, pod)",
)


# ---- stores -------------------------------------------------------------------------------------


def make_store(
    seed: int,
    *,
    grid_s: float = 15.0,
    tick_s: float = 1.0,
    slots: int = 40,
    gap_frac: float = 0.1,
    n_pods: int = 4,
    sparse_ids: bool = False,
    reset_frac: float = 0.05,
    scale: float = 1.0,
    first_slot: int = 1,
) -> MetricStore:
    """Scrapes on a ``grid_s`` grid (times as the engine computes them, ``ticks * tick_s``) with gaps.

    Pods appear and disappear (kube_pod_info before they are scraped, while they warm up), gauges
    repeat small values incl. zeros, counters grow with resets.
    """
    rng = np.random.default_rng(seed)
    every = max(round(grid_s / tick_s), 1)
    ids = np.sort(rng.choice(60, n_pods, replace=False)) if sparse_ids else np.arange(n_pods)
    birth = rng.integers(-5, max(slots, 1), n_pods)
    death = birth + rng.integers(1, max(slots, 2) + 5, n_pods)
    ready = birth + rng.integers(0, 4, n_pods)
    counters = np.zeros((n_pods, 4))
    store = MetricStore()
    for slot in range(first_slot, first_slot + slots):
        counters += rng.choice([0.0, 0.0, 1.0, 3.0, 0.5, 7.0], (n_pods, 4)) * scale
        resets = rng.random((n_pods, 4)) < reset_frac
        counters[resets] = rng.choice([0.0, 1.0, 2.0], int(resets.sum())) * scale
        if rng.random() < gap_frac:
            continue
        i = slot - first_slot
        existing = [int(p) for p, b, d in zip(ids, birth, death, strict=True) if b <= i < d]
        scraped = [j for j in range(n_pods) if ready[j] <= i < death[j] and rng.random() > 0.05]
        rows = np.zeros((len(scraped), len(COLUMNS)))
        for r, j in enumerate(scraped):
            rows[r, 0] = rng.choice([0, 1, 2, 3, 5, 8]) * scale
            rows[r, 1] = rng.choice([0, 0, 1, 4, 12]) * scale
            rows[r, 2] = rng.choice([0.0, 0.1, 0.25, 0.3, 1 / 3, 0.5, 1.0])
            rows[r, 3] = 100.0 * rng.choice([0.0, 0.1, 0.7, 1.0, 2 / 3])
            rows[r, 4:] = counters[j]
        store.record((slot * every) * tick_s, [int(ids[j]) for j in scraped], rows, existing)
    return store


@st.composite
def stores(draw):
    """A store from :func:`make_store`; its shape drawn uniformly (hypothesis' integers lean to the low end)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    grid_s = draw(st.sampled_from([15.0, 5.0]))
    slots = int(rng.integers(0, 4)) if rng.random() < 0.1 else int(rng.integers(10, 140 if grid_s == 5.0 else 50))
    return make_store(
        int(rng.integers(2**32)),
        grid_s=grid_s,
        tick_s=draw(st.sampled_from([1.0, 0.1, 0.5, 5.0])),
        slots=slots,
        gap_frac=float(rng.choice([0.0, 0.1, 0.4])),
        n_pods=int(rng.integers(1, 9)),
        sparse_ids=bool(rng.random() < 0.5),
        reset_frac=float(rng.choice([0.0, 0.05, 0.3])),
        scale=float(rng.choice([1.0, 1.0, 1e-3, 1e7])),
        first_slot=int(rng.integers(0, 6)),
    )


@st.composite
def times(draw, store: MetricStore):
    """Evaluation times: anywhere, on scrapes, within and just beyond 1e-9 s of them, at staleness."""
    if not store.times_s:
        return draw(st.floats(0.0, 1000.0))
    t = draw(st.sampled_from(store.times_s))
    return draw(
        st.one_of(
            st.floats(store.times_s[0], store.times_s[-1] + 30.0),
            st.floats(store.times_s[0], store.times_s[-1]),
            st.floats(store.times_s[0] - 100.0, store.times_s[-1] + 900.0),
            st.just(t),
            st.just(t - 5e-10),
            st.just(t - 2e-9),
            st.just(t + 7.5),
            st.just(t + STALENESS_S),
            st.just(t + STALENESS_S + 1e-6),
            st.just(store.times_s[0] - 1.0),
        )
    )


# ---- queries ------------------------------------------------------------------------------------


def _selector(names):
    return st.tuples(st.sampled_from(names), st.sampled_from(MATCHERS)).map("".join)


vector_leaves = st.one_of(
    _selector(GAUGE_NAMES + COUNTER_NAMES),
    st.tuples(
        st.sampled_from(["rate", "irate", "increase"]),
        _selector(COUNTER_NAMES + GAUGE_NAMES[:2]),
        st.sampled_from(WINDOWS),
    ).map(lambda t: f"{t[0]}({t[1]}[{t[2]}])"),
    st.tuples(
        st.sampled_from(["avg_over_time", "max_over_time", "min_over_time"]),
        _selector(GAUGE_NAMES + COUNTER_NAMES[:1]),
        st.sampled_from(WINDOWS),
    ).map(lambda t: f"{t[0]}({t[1]}[{t[2]}])"),
    st.sampled_from(["kube_pod_info", 'kube_pod_info{namespace="x"}']),
    st.sampled_from(NUMBERS).map(lambda n: f"vector({n})"),
    st.tuples(_selector(GAUGE_NAMES + COUNTER_NAMES + ("kube_pod_info",)), st.sampled_from(OFFSETS)).map(
        lambda t: f"{t[0]} offset {t[1]}"
    ),
    st.tuples(
        st.sampled_from(["rate", "irate", "increase", "avg_over_time", "max_over_time", "min_over_time"]),
        _selector(COUNTER_NAMES + GAUGE_NAMES[:2]),
        st.sampled_from(WINDOWS),
        st.sampled_from(OFFSETS),
    ).map(lambda t: f"{t[0]}({t[1]}[{t[2]}] offset {t[3]})"),
)
# A subquery of at most one series (what the kernel folds), under each function it folds, with an offset at times.
SUBQUERY_INNERS = (
    "sum(vllm:num_requests_running)",
    "sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)",
    "sum(rate(vllm:request_success_total[1m]))",
    "max(vllm:kv_cache_usage_perc) or vector(0)",
    "avg(vllm:num_requests_waiting offset 1m) * 2",
    "vector(3)",
)
SUBQUERY_FUNCTIONS = (
    "avg_over_time({})",
    "max_over_time({})",
    "min_over_time({})",
    "predict_linear({}, 300)",
    "predict_linear({}, -45.5)",
    "double_exponential_smoothing({}, 0.3, 0.3)",
    "holt_winters({}, 0.8, 0.1)",
)
subquery_leaves = st.tuples(
    st.sampled_from(SUBQUERY_FUNCTIONS),
    st.sampled_from(SUBQUERY_INNERS),
    st.sampled_from(["30s", "2m", "5m", "10m"]),
    st.sampled_from(["15s", "20s", "1m", "7s"]),
    st.sampled_from(["", "", " offset 1m", " offset 90s"]),
).map(lambda t: t[0].format(f"({t[1]})[{t[2]}:{t[3]}]{t[4]}"))
refused_leaves = st.sampled_from(["rate(kube_pod_info[1m])", "max_over_time(kube_pod_info[5m])", "2"])
# Mostly vectors: a number under an aggregation or beside ``or`` makes Python refuse the whole query.
leaves = st.one_of(*[vector_leaves] * 13, *[subquery_leaves] * 2, refused_leaves)
numbers = st.sampled_from(NUMBERS)


def _extend(inner):
    aggregation = st.tuples(
        st.sampled_from(["sum", "avg", "max", "min", "count"]), st.sampled_from(GROUPINGS), st.booleans(), inner
    )
    operand = st.one_of(
        inner,
        inner,
        numbers,
        st.tuples(numbers, st.sampled_from("+-*/"), numbers).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
    )
    return st.one_of(
        aggregation.map(lambda t: f"{t[0]}({t[3]}) {t[1]}" if t[2] else f"{t[0]} {t[1]} ({t[3]})"),
        st.tuples(operand, st.sampled_from("+-*/"), operand, st.booleans()).map(
            lambda t: f"({t[0]}) {t[1]} ({t[2]})" if t[3] else f"{t[0]} {t[1]} {t[2]}"
        ),
        st.tuples(inner, st.sampled_from(["or", "OR"]), inner).map(lambda t: f"({t[0]}) {t[1]} ({t[2]})"),
    )


queries = st.recursive(leaves, _extend, max_leaves=7)


# ---- comparing ----------------------------------------------------------------------------------


def bits(value: float) -> bytes:
    return struct.pack("<d", value)


def python_items(result):
    """Query.evaluate's result as (kind, [(key, value bits), ...]) in dict order; NaNs compare equal."""
    if isinstance(result, float):
        return 0, [(None, _canonical(result))]
    return 1, [(-1 if key == () else key[0], _canonical(value)) for key, value in result.items()]


def _canonical(value: float):
    return "nan" if math.isnan(value) else bits(value)


def kernel_items(compiled, arrays, now_s, max_series):
    work = workspace(compiled, max_series)
    out_keys = np.full(max_series + 1, -7, dtype=np.int64)
    out_vals = np.full(max_series + 1, 1e300)
    kind, n = evaluate(compiled.code, compiled.consts, *arrays.args(), now_s, work, out_keys, out_vals)
    if kind == 0:
        return 0, [(None, _canonical(out_vals[0]))]
    assert kind == 1, kind
    return 1, [(int(out_keys[j]), _canonical(out_vals[j])) for j in range(n)]


def kernel_scalar(compiled, arrays, now_s, max_series):
    work = workspace(compiled, max_series)
    value, status = scalar(
        compiled.code,
        compiled.consts,
        *arrays.args(),
        now_s,
        work,
        np.zeros(max_series + 1, dtype=np.int64),
        np.zeros(max_series + 1),
    )
    return value, status


def python_scalar(query, store, now_s):
    value, error = query.scalar(store, now_s)
    if error is not None:
        assert "multiple elements" in error
        return None, 2
    return value, 1 if value is None else 0


def distinct_pods(store: MetricStore) -> int:
    pods = set()
    for scraped, existing in zip(store.pods, store.existing, strict=True):
        pods.update(scraped.tolist())
        pods.update(existing.tolist())
    return max(len(pods), 1)


def assert_same(query, store: MetricStore, now_list, spare: int = 2) -> None:
    """Kernel and Python agree at every time in ``now_list`` (or both refuse the query)."""
    try:
        compiled = compile_query(query)
    except NotCompilable:
        compiled = None
    arrays = store_arrays(store, spare=spare)
    max_series = distinct_pods(store)
    for now_s in now_list:
        try:
            expected = python_items(query.evaluate(store, now_s))
        except PlannerInputError:
            assert compiled is None, query.text
            continue
        assert compiled is not None, query.text
        assert kernel_items(compiled, arrays, now_s, max_series) == expected, (query.text, now_s)
        value, status = kernel_scalar(compiled, arrays, now_s, max_series)
        py_value, py_status = python_scalar(query, store, now_s)
        assert status == py_status, (query.text, now_s)
        if status == 0:
            assert _canonical(value) == _canonical(py_value), (query.text, now_s)
        else:
            assert math.isnan(value)


def _has_range(node) -> bool:
    # A range function or an offset: the value moves between scrapes.
    return isinstance(node, tuple) and (
        node[0] in ("range", "instant", "frange") or any(_has_range(child) for child in node[1:])
    )


# ---- the differential tests ---------------------------------------------------------------------


@settings(max_examples=600, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data(), queries)
def test_kernel_equals_python_on_generated_stores_and_queries(data, text):
    query = parse_query(text)
    store = data.draw(stores())
    now_list = [data.draw(times(store)) for _ in range(6)]
    assert_same(query, store, now_list, spare=data.draw(st.integers(0, 3)))
    try:
        assert compile_query(query).has_range == _has_range(query.node)
    except NotCompilable:
        pass


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow])
@given(stores(), st.data())
def test_the_engine_s_queries_equal_python(store, data):
    texts = [*QUERIES, *(metric_column(name) for name in POD_METRICS)]
    now_list = [data.draw(times(store)) for _ in range(4)]
    for text in texts:
        assert_same(parse_query(text), store, now_list)


def _manifest_queries(shared_dir) -> list[str]:
    found = []
    for path in sorted((shared_dir / "real-world" / "manifests").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if not isinstance(document, dict):
                continue
            spec = document.get("spec") or {}
            if document.get("kind") == "ScaledObject":
                found += [(t.get("metadata") or {}).get("query") for t in spec.get("triggers", [])]
            if document.get("kind") == "HorizontalPodAutoscaler":
                for metric in spec.get("metrics", []):
                    name = ((metric.get(str(metric.get("type", "")).lower()) or {}).get("metric") or {}).get("name")
                    found.append(metric_column(name) if name else None)
    accepted = []
    for text in found:
        if not text:
            continue
        try:
            parse_query(text)
        except PlannerInputError:
            continue
        accepted.append(text)
    return accepted


def test_every_query_the_real_manifests_use_equals_python(shared_dir):
    texts = _manifest_queries(shared_dir)
    assert len(texts) >= 10, texts
    for seed in range(12):
        store = make_store(
            seed, grid_s=(15.0, 5.0)[seed % 2], slots=60, n_pods=1 + seed % 6, sparse_ids=seed % 3 == 0, reset_frac=0.1
        )
        rng = np.random.default_rng(seed)
        now_list = [*store.times_s[-3:], *rng.uniform(-20.0, (store.times_s or [0.0])[-1] + 400.0, 6)]
        for text in texts:
            assert_same(parse_query(text), store, now_list)


# ---- targeted cases -----------------------------------------------------------------------------


def _tiny_store() -> MetricStore:
    # Pods 0, 1, 2 early; pods 1 and 3 in the latest scrape; counters with a reset on pod 1.
    store = MetricStore()
    plan = [(15.0, [0, 1, 2]), (30.0, [0, 1, 2]), (45.0, [1, 2]), (60.0, [1, 3])]
    for k, (t, pods) in enumerate(plan):
        rows = np.zeros((len(pods), len(COLUMNS)))
        for r, p in enumerate(pods):
            rows[r, 0] = p + 1
            rows[r, 1] = 0.0
            rows[r, 4] = (10.0 * (k + 1) if not (p == 1 and k == 2) else 3.0) + p
        store.record(t, pods, rows, sorted({*pods, 4}))
    return store


def test_window_order_is_latest_scrape_first_then_pods_met_earlier():
    store = _tiny_store()
    query = parse_query("max_over_time(vllm:num_requests_running[1m])")
    assert list(query.evaluate(store, 60.0)) == [(1,), (3,), (2,), (0,)]  # 2 met at 45 s, 0 at 30 s
    assert_same(query, store, [60.0, 59.9999999995, 59.99, 75.0, 200.0])
    rate = parse_query("rate(vllm:request_success_total[1m]) or irate(vllm:request_success_total[2m])")
    assert_same(rate, store, [45.0, 60.0, 70.0, 120.0])


def test_or_puts_the_right_side_s_keys_first():
    store = _tiny_store()
    query = parse_query("sum by (pod) (vllm:num_requests_running) or kube_pod_info")
    assert list(query.evaluate(store, 60.0)) == [(1,), (3,), (4,)]
    assert query.evaluate(store, 60.0)[(1,)] == 2.0
    assert_same(query, store, [60.0])
    assert_same(parse_query("vector(1) or sum by (pod) (vllm:num_requests_running)"), store, [60.0])


def test_vector_matching_keeps_the_left_order_and_drops_unmatched_keys():
    store = _tiny_store()
    query = parse_query("kube_pod_info * vllm:num_requests_running")
    assert list(query.evaluate(store, 60.0)) == [(1,), (3,)]
    assert_same(query, store, [60.0, 45.0])
    assert_same(parse_query("sum(kube_pod_info) - vllm:num_requests_running"), store, [60.0])


def test_staleness_and_the_1e9_tolerance():
    store = _tiny_store()
    query = parse_query("sum(vllm:num_requests_running)")
    assert_same(query, store, [14.0, 15.0 - 5e-10, 15.0 - 2e-9, 360.0, 360.0 + 1e-6, 1e6])
    arrays = store_arrays(store)
    for now_s in (0.0, 15.0 - 5e-10, 15.0 - 2e-9, 47.0, 60.0, 360.0, 360.1):
        assert last_index(arrays.scr_t, arrays.n_scr, now_s) == store._last_index(now_s)
        k = store._last_index(now_s)
        fresh = k if k >= 0 and now_s - store.times_s[k] <= STALENESS_S else -1
        assert fresh_index(arrays.scr_t, arrays.n_scr, now_s) == fresh


@settings(max_examples=300)
@given(st.lists(st.floats(-1e3, 1e6), max_size=60).map(sorted), st.floats(-100.0, 1e6))
def test_last_index_equals_the_store_s(times_s, now_s):
    store = MetricStore()
    store.times_s = times_s
    assert last_index(np.array([*times_s, -1.0]), len(times_s), now_s) == store._last_index(now_s)


floats_incl_specials = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.0, -0.0, math.nan, math.inf, -math.inf, 1e16, 1.0, -1e16]),
)


@settings(max_examples=500)
@given(st.sampled_from(["sum", "avg", "max", "min", "count"]), st.lists(floats_incl_specials, min_size=1, max_size=12))
def test_aggregation_of_any_floats_equals_python_s_incl_nan_and_signed_zero(op, values):
    expected = metrics._aggregate(op, values)
    got = fast_metrics._aggregate(fast_metrics._AGGREGATIONS[op], np.array([values]), 0, 0, len(values))
    assert _canonical(got) == _canonical(expected)


def test_max_keeps_the_first_of_equal_values_and_ignores_a_later_nan():
    for values in ([0.0, -0.0], [-0.0, 0.0], [math.nan, 1.0], [1.0, math.nan, 2.0]):
        for op in ("max", "min"):
            got = fast_metrics._aggregate(fast_metrics._AGGREGATIONS[op], np.array([values]), 0, 0, len(values))
            assert _canonical(got) == _canonical(metrics._aggregate(op, values)), (op, values)


@settings(max_examples=500)
@given(st.sampled_from("+-*/"), floats_incl_specials, floats_incl_specials)
def test_binary_arithmetic_equals_python_s_incl_division_by_zero(op, a, b):
    expected = metrics._apply(op, a, b)
    assert _canonical(fast_metrics._apply(fast_metrics._OPERATORS[op], a, b)) == _canonical(expected)


@settings(max_examples=300)
@given(st.lists(floats_incl_specials, max_size=20), st.integers(0, 3))
def test_python_sum_is_the_builtin_sum(values, offset):
    array = np.array([7.0] * offset + values)
    assert _canonical(python_sum(array, offset, len(values))) == _canonical(float(sum(values)))


@pytest.mark.parametrize(
    "text",
    [
        "sum(2)",
        "sum(2 * 3)",
        "1 or vector(1)",
        "vector(1) or 2",
        "rate(kube_pod_info[1m])",
        "sum(max_over_time(kube_pod_info[5m])) + 1",
        "count(vllm:num_requests_running) + sum(1 - 1)",
    ],
)
def test_queries_python_refuses_are_not_compiled(text):
    query = parse_query(text)
    with pytest.raises(PlannerInputError):
        query.evaluate(_tiny_store(), 60.0)
    with pytest.raises(NotCompilable):
        compile_query(query)


@pytest.mark.parametrize("method", ["predict_linear", "max_over_time", "double_exponential_smoothing", "holt_winters"])
@pytest.mark.parametrize("signal", ["in_flight", "request_rate"])
def test_the_forecasts_the_planner_writes_are_compiled_and_equal_python(method, signal):
    # Each forecast query as forecast_query writes it, over a store of an hour, every 7 s from before the first
    # scrape to past the last: subquery steps fall before, on and between scrapes.
    name = "double_exponential_smoothing" if method == "holt_winters" else method
    forecast = Forecast(name, window_s=600.0, step_s=30.0, ahead_s=300.0)
    text = forecast_query(forecast, signal, prometheus_major=2 if method == "holt_winters" else 3)
    query = parse_query(text)
    assert compile_query(query).has_range
    store = make_store(11, grid_s=15.0, slots=240, n_pods=5, reset_frac=0.05)
    assert_same(query, store, list(np.arange(-30.0, store.times_s[-1] + 700.0, 7.0)))


def test_a_subquery_with_one_point_has_no_line_and_one_level():
    # predict_linear and Holt need two points, max_over_time one: a 30 s range at a 1 m step holds one step.
    store = _tiny_store()
    for text, expected in [
        ("predict_linear(sum(vllm:num_requests_running)[30s:1m], 60)", {}),
        ("double_exponential_smoothing(sum(vllm:num_requests_running)[30s:1m], 0.5, 0.5)", {}),
        ("max_over_time(sum(vllm:num_requests_running)[30s:1m])", {(): 6.0}),
    ]:
        query = parse_query(text)
        assert query.evaluate(store, 60.0) == expected, text
        assert_same(query, store, [60.0, 61.0, 89.0, 120.0])


@pytest.mark.parametrize(
    "text",
    [
        "predict_linear(vllm:num_requests_running[5m], 60)",
        "max_over_time(vllm:num_requests_running[2m:15s])",
        "max_over_time(sum by (pod) (vllm:num_requests_running)[2m:15s])",
        "rate(sum(vllm:request_success_total)[5m:15s])",
        "max_over_time(max_over_time(sum(vllm:num_requests_running)[1m:15s])[5m:1m])",
    ],
)
def test_subqueries_the_kernel_does_not_fold_are_refused(text):
    # Per-pod series, rate-like functions, nested subqueries and forecasts over a plain range: Python evaluates
    # them (the lockstep engine runs them); the kernel refuses them rather than guess.
    query = parse_query(text)
    query.evaluate(_tiny_store(), 60.0)
    with pytest.raises(NotCompilable, match="not in the compiled kernels"):
        compile_query(query)


def test_an_offset_reads_the_scrapes_of_that_earlier_instant():
    # Scrapes every 15 s: at 300 s, "offset 1m" reads the 240 s scrape, and its 5-minute lookback from there;
    # a rate over [1m] offset 1m covers (180 s, 240 s].
    store = make_store(3, slots=30, gap_frac=0.0, n_pods=3, reset_frac=0.0)
    query = parse_query("sum(vllm:num_requests_running offset 1m)")
    assert query.evaluate(store, 300.0) == parse_query("sum(vllm:num_requests_running)").evaluate(store, 240.0)
    assert_same(query, store, [300.0, 300.0 + 1e-10, 254.9, 70.0, 59.0, 2000.0])
    rate = parse_query("sum(rate(vllm:request_success_total[1m] offset 1m))")
    assert rate.evaluate(store, 300.0) == parse_query("sum(rate(vllm:request_success_total[1m]))").evaluate(
        store, 240.0
    )
    assert_same(rate, store, [300.0, 301.0, 75.0, 100.0])
    assert compile_query(query).has_range and compile_query(rate).has_range


def test_a_number_only_query_is_folded_by_python_itself():
    compiled = compile_query(parse_query("(1 - 3) / 0 + 2 * 0.5"))
    assert compiled.code.tolist() == [[fast_metrics.OP_CONST, 0, 0]] and not compiled.has_range
    assert_same(parse_query("(1 - 3) / 0 + 2 * 0.5"), _tiny_store(), [0.0, 60.0])
    assert_same(parse_query("0 / 0 * vllm:num_requests_running"), _tiny_store(), [60.0])


def test_a_query_deeper_than_the_stack_is_refused_and_python_still_evaluates_it():
    text = "vllm:num_requests_running"
    for _ in range(MAX_DEPTH):
        text = f"vllm:num_requests_waiting + ({text})"
    query = parse_query(text)
    assert query.evaluate(_tiny_store(), 60.0)
    with pytest.raises(NotCompilable):
        compile_query(query)
    text = "vllm:num_requests_running"
    for _ in range(MAX_DEPTH - 1):
        text = f"vllm:num_requests_waiting + ({text})"
    assert compile_query(parse_query(text)).depth == MAX_DEPTH
    assert_same(parse_query(text), _tiny_store(), [60.0])


def test_too_small_a_workspace_or_output_is_reported_not_overrun():
    store = _tiny_store()
    arrays = store_arrays(store)
    compiled = compile_query(parse_query("sum by (pod) (max_over_time(vllm:num_requests_running[1m]))"))
    small = workspace(compiled, 2)  # four pods in the window
    out_keys, out_vals = np.zeros(8, dtype=np.int64), np.zeros(8)
    assert evaluate(compiled.code, compiled.consts, *arrays.args(), 60.0, small, out_keys, out_vals) == (OUT_OF_ROOM, 0)
    big = workspace(compiled, 5)
    assert evaluate(compiled.code, compiled.consts, *arrays.args(), 60.0, big, out_keys[:3], out_vals[:3]) == (
        OUT_OF_ROOM,
        0,
    )
    assert evaluate(compiled.code, compiled.consts, *arrays.args(), 60.0, big, out_keys, out_vals) == (1, 4)
    shallow = workspace_arrays(5, 1)
    two = compile_query(parse_query("vllm:num_requests_running or kube_pod_info"))
    assert evaluate(two.code, two.consts, *arrays.args(), 60.0, shallow, out_keys, out_vals) == (OUT_OF_ROOM, 0)
    assert scalar(two.code, two.consts, *arrays.args(), 60.0, shallow, out_keys, out_vals)[1] == 3


@njit(cache=True)
def _evaluate_in_a_kernel(code, consts, scr_t, n_scr, scr_off, smp_pod, smp_val, ex_off, ex_pod, now_s, max_series):
    work = workspace_arrays(max_series)
    out_keys = np.zeros(max_series + 1, dtype=np.int64)
    out_vals = np.zeros(max_series + 1)
    kind, n = evaluate(
        code, consts, scr_t, n_scr, scr_off, smp_pod, smp_val, ex_off, ex_pod, now_s, work, out_keys, out_vals
    )
    return kind, out_keys[:n].copy(), out_vals[:n].copy()


def test_the_kernel_runs_inside_another_kernel_with_a_workspace_made_there():
    store = make_store(3, slots=30, n_pods=5)
    arrays = store_arrays(store, spare=4)
    query = parse_query("sum by (pod) (rate(vllm:request_success_total[2m])) or vector(0)")
    compiled = compile_query(query)
    for now_s in (100.0, 300.0, 450.0):
        kind, keys, vals = _evaluate_in_a_kernel(
            compiled.code, compiled.consts, *arrays.args(), now_s, distinct_pods(store)
        )
        assert kind == 1
        assert fast_metrics.as_python(kind, len(keys), keys, vals) == query.evaluate(store, now_s)
        assert list(fast_metrics.as_python(kind, len(keys), keys, vals)) == list(query.evaluate(store, now_s))


def _two_pods(running, waiting) -> MetricStore:
    store = MetricStore()
    rows = np.zeros((2, len(COLUMNS)))
    rows[:, 0] = running
    rows[:, 1] = waiting
    store.record(15.0, [0, 1], rows, [0, 1])
    return store


@pytest.mark.parametrize(
    ("running", "waiting", "query", "expected"),
    [
        ([0, 2], [0, 0], "max(vllm:num_requests_waiting / (vllm:num_requests_running - 1))", "-0.0"),
        ([2, 0], [0, 0], "max(vllm:num_requests_waiting / (vllm:num_requests_running - 1))", "0.0"),
        ([0, 2], [0, 0], "min(vllm:num_requests_waiting / (vllm:num_requests_running - 1))", "-0.0"),
        ([0, 2], [0, 0], "sum(vllm:num_requests_waiting / (vllm:num_requests_running - 1))", "0.0"),
        ([0, 0], [0, 4], "max(vllm:num_requests_waiting / vllm:num_requests_waiting)", "nan"),
        ([0, 0], [4, 0], "max(vllm:num_requests_waiting / vllm:num_requests_waiting)", "1.0"),
        ([0, 0], [4, 0], "min(vllm:num_requests_waiting / vllm:num_requests_waiting)", "1.0"),
    ],
)
def test_max_and_min_over_series_treat_signed_zeros_and_nan_as_python_does(running, waiting, query, expected):
    store = _two_pods(running, waiting)
    assert repr(parse_query(query).evaluate(store, 15.0)[()]) == expected
    assert_same(parse_query(query), store, [15.0])


def test_rate_extrapolation_at_exactly_the_threshold_uses_half_a_gap():
    # Samples 15, 30, 45 s in (-1.5, 58.5]: 16.5 s to the window start, and 1.1 x the 15 s gap is 16.5
    # too, so Prometheus extrapolates only half a gap there: 20 * (30 + 7.5 + 13.5) / 30.
    store = MetricStore()
    for k, t in enumerate((15.0, 30.0, 45.0, 60.0)):
        rows = np.zeros((1, len(COLUMNS)))
        rows[0, 4] = 100.0 + 10.0 * k
        store.record(t, [0], rows, [0])
    assert parse_query("increase(vllm:request_success_total[1m])").evaluate(store, 58.5) == {(0,): 34.0}
    assert_same(parse_query("increase(vllm:request_success_total[1m])"), store, [58.5])
    assert_same(parse_query("rate(vllm:request_success_total[1m])"), store, [58.5])
