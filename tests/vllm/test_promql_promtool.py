"""The simulated Prometheus held to a real one: every query form the planner reads or writes, through promtool.

Each case's expected values are the planner's own (``Query.evaluate(...,
prometheus_major=2)``, Prometheus 2.42's semantics) on the same samples
``promtool test rules`` loads; promtool compares floats exactly, so the test
passes only when every value is Prometheus' to the last bit.

Prometheus adds the series of a ``sum`` in the order it created them, which in
2.42's promtool is a Go map's (it changes from run to run): a sum of three or
more inexact values could differ in the last bit between two promtool runs. The
fixtures therefore never have more than two pods at once (two addends commute)
and keep averaged gauges in 64ths, so every value is order-free.

Where 2.x and 3.x differ (``rate``, ``max_over_time`` and subqueries select
``[t - w, t]`` in 2.x, ``(t - w, t]`` in 3.x), promtool 2.42 is 2.x: the eval
times sit on scrapes, so the boundary sample is in play, and
``tests/simulate/test_simulate_metrics.py::test_prometheus_2_keeps_the_sample_exactly_a_range_old_and_3_drops_it``
states the difference.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import subprocess

import numpy as np
import pytest
import yaml

from planner.manifests.generate import ScalingPlan, generate_manifests
from planner.simulate.metrics import COLUMNS, MetricStore, parse_query
from planner.vllm.forecast import FORECAST_METHODS, Forecast, forecast_query, signal_query
from planner.vllm.promql import queries_for

SCRAPE_S = 15
NAMESPACE, MODEL = "llm", "chat"
MATCH = f'{{namespace="{NAMESPACE}",model_name="{MODEL}"}}'
POD_LABELS = 'model_name="{model}", namespace="{namespace}", pod="pod-{pod}"'
# The Prometheus names of the simulated columns the fixtures write.
SERIES = {
    "num_requests_running": "vllm:num_requests_running",
    "num_requests_waiting": "vllm:num_requests_waiting",
    "kv_cache_usage_perc": "vllm:kv_cache_usage_perc",
    "request_success_total": "vllm:request_success_total",
    "generation_tokens_total": "vllm:generation_tokens_total",
    "num_preemptions_total": "vllm:num_preemptions_total",
}
TTFT = "vllm:time_to_first_token_seconds_bucket"
LE = (0.1, 0.25, 0.5, 1.0, 2.5, math.inf)


def promtool() -> str:
    """The promtool binary; skip (or, under CI=true, fail) when it is absent or not Prometheus 2."""
    found = shutil.which("promtool")
    problem = None
    if found is None:
        problem = "promtool not found (Debian's prometheus package ships it: apt-get install prometheus)"
    else:
        version = subprocess.run([found, "--version"], capture_output=True, text=True, check=False)
        match = re.search(r"version (\d+)\.(\d+)", version.stdout + version.stderr)
        if match is None or match.group(1) != "2":
            problem = f"{found} is not Prometheus 2 ({(version.stdout or version.stderr).splitlines()[:1]})"
    if problem is not None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{problem}; CI installs it (.ci/run) so the evaluator is held to a real Prometheus")
        pytest.skip(f"{problem}: the simulated Prometheus is not held to a real one here")
    assert found is not None
    return found


# ---- fixtures: one set of samples, loaded into a MetricStore and written as promtool input ------------


class Fixture:
    """Samples every 15 s from t = 0: per pod, its columns while it is present, and its TTFT histogram."""

    def __init__(self, n_scrapes: int, presence: dict[int, tuple[int, int]], seed: int) -> None:
        self.n = n_scrapes
        self.presence = presence  # pod -> (first scrape, first scrape absent)
        rng = np.random.default_rng(seed)
        self.values = {pod: np.zeros((n_scrapes, len(COLUMNS))) for pod in presence}
        self.buckets = {pod: np.zeros((n_scrapes, len(LE))) for pod in presence}
        for pod, (start, stop) in presence.items():
            k = np.arange(n_scrapes)
            rows = self.values[pod]
            # Gauges that move (a day's shape on long fixtures), counters with uneven increments.
            level = 20 + 15 * np.sin(2 * np.pi * k / 5760 + pod) + rng.integers(0, 8, n_scrapes)
            rows[:, COLUMNS.index("num_requests_running")] = np.round(level)
            rows[:, COLUMNS.index("num_requests_waiting")] = rng.integers(0, 6, n_scrapes)
            rows[:, COLUMNS.index("kv_cache_usage_perc")] = rng.integers(0, 65, n_scrapes) / 64
            rows[:, COLUMNS.index("request_success_total")] = np.cumsum(rng.integers(0, 40, n_scrapes) / 4)
            tokens = np.cumsum(rng.integers(0, 900, n_scrapes)).astype(float)
            if pod == 0 and n_scrapes > 60:
                tokens[60:] -= tokens[59]  # a restart: the counter resets
                tokens[60:] += 3
            rows[:, COLUMNS.index("generation_tokens_total")] = tokens
            rows[:, COLUMNS.index("num_preemptions_total")] = np.cumsum(rng.integers(0, 2, n_scrapes))
            per_bucket = rng.integers(0, 5, (n_scrapes, len(LE)))
            self.buckets[pod] = np.cumsum(np.cumsum(per_bucket, axis=1), axis=0).astype(float)
            rows[:start] = np.nan
            rows[stop:] = np.nan

    def present(self, k: int) -> list[int]:
        return [pod for pod, (start, stop) in sorted(self.presence.items()) if start <= k < stop]

    def store(self) -> MetricStore:
        store = MetricStore()
        for k in range(self.n):
            pods = self.present(k)
            rows = np.array([self.values[p][k] for p in pods]).reshape(len(pods), len(COLUMNS))
            store.record(SCRAPE_S * k, pods, rows, pods)
            store.record_histogram(TTFT, SCRAPE_S * k, pods, LE, np.array([self.buckets[p][k] for p in pods]))
        return store

    def input_series(self) -> list[dict]:
        series = []
        for pod, (start, stop) in sorted(self.presence.items()):
            labels = POD_LABELS.format(model=MODEL, namespace=NAMESPACE, pod=pod)

            def values(column: np.ndarray, start=start, stop=stop) -> str:
                out = ["_"] * start + [repr(float(v)) for v in column[start:stop]]
                return " ".join(out + (["stale"] if stop < self.n else []))

            for column, name in SERIES.items():
                series.append(
                    {"series": f"{name}{{{labels}}}", "values": values(self.values[pod][:, COLUMNS.index(column)])}
                )
            for j, le in enumerate(LE):
                le_text = "+Inf" if math.isinf(le) else repr(le)
                series.append(
                    {"series": f'{TTFT}{{{labels}, le="{le_text}"}}', "values": values(self.buckets[pod][:, j])}
                )
            series.append(
                {
                    "series": f'kube_pod_info{{namespace="{NAMESPACE}", pod="pod-{pod}"}}',
                    "values": values(np.ones(self.n)),
                }
            )
        return series


# ---- the query forms ----------------------------------------------------------------------------------

FLEET, PER_POD, POD_ONLY, MODEL_ONLY = "fleet", "per_pod", "pod_only", "model_only"
PER_POD_NO_POD = "per_pod_no_pod"  # what `without (pod)` keeps: the shared labels


def planner_forms() -> list[tuple[str, str]]:
    """(query, label kind) of what the planner writes: its signals' queries, the generator's, every forecast."""
    names = {
        "kv_usage": "vllm:kv_cache_usage_perc",
        "running": "vllm:num_requests_running",
        "waiting": "vllm:num_requests_waiting",
        "preemptions": "vllm:num_preemptions",
        "ttft": "vllm:time_to_first_token_seconds",
    }
    forms = [(query, FLEET) for query in queries_for(names, {"namespace": NAMESPACE, "model_name": MODEL}).values()]
    for method in FORECAST_METHODS:
        forecast = Forecast(method, lead_s=300, ahead_s=300, window_s=1800, step_s=60)
        plan = ScalingPlan(
            target_name=MODEL,
            concurrency_target=40,
            warmup_s=300,
            max_output_tokens=4096,
            itl_ms=50,
            max_replicas=12,
            kv_usage_target_frac=0.8,
            label_matchers=(f'namespace="{NAMESPACE}"', f'model_name="{MODEL}"'),
            forecast=forecast,
            prometheus_major=2,
        )
        for trigger in generate_manifests(plan).scaled_object.document["spec"]["triggers"]:
            forms.append((trigger["metadata"]["query"], FLEET))
        for signal in ("in_flight", "request_rate"):
            forms.append((forecast_query(forecast, signal, MATCH, prometheus_major=2), FLEET))
    return list(dict.fromkeys(forms))


def subset_forms() -> list[tuple[str, str]]:
    """(query, label kind) of the rest of the subset a team's manifests may use (the simulator reads them)."""
    return [
        (f"rate(vllm:generation_tokens_total{MATCH}[5m])", PER_POD),
        (f"increase(vllm:generation_tokens_total{MATCH}[2m])", PER_POD),
        (f"irate(vllm:generation_tokens_total{MATCH}[1m])", PER_POD),
        (f"rate(vllm:request_success_total{MATCH}[5m] offset 7m)", PER_POD),
        (f"avg_over_time(vllm:num_requests_running{MATCH}[4m])", PER_POD),
        (f"max_over_time(vllm:num_requests_waiting{MATCH}[5m])", PER_POD),
        (f"min_over_time(vllm:kv_cache_usage_perc{MATCH}[3m])", PER_POD),
        (f"predict_linear(vllm:num_requests_running{MATCH}[10m], 600)", PER_POD),
        (f"predict_linear(vllm:num_requests_running{MATCH}[10m] offset 5m, 120)", PER_POD),
        (f"holt_winters(vllm:num_requests_running{MATCH}[10m], 0.5, 0.1)", PER_POD),
        (f"histogram_quantile(0.9, rate({TTFT}{MATCH}[5m]))", PER_POD),
        (f"histogram_quantile(0.5, sum by (le) (rate({TTFT}{MATCH}[3m] offset 2m)))", FLEET),
        (f"max by (pod) (vllm:num_requests_running{MATCH})", POD_ONLY),
        (f"sum by (pod) (rate(vllm:generation_tokens_total{MATCH}[3m]))", POD_ONLY),
        (f"sum by (model_name) (rate(vllm:request_success_total{MATCH}[5m]))", MODEL_ONLY),
        (f"avg without (pod) (vllm:num_requests_running{MATCH} offset 2m)", PER_POD_NO_POD),
        (f"sum(vllm:num_requests_waiting{MATCH} offset 10m)", FLEET),
        (f"avg(vllm:kv_cache_usage_perc{MATCH})", FLEET),
        (f"max(vllm:num_requests_running{MATCH}) + max(vllm:num_requests_waiting{MATCH})", FLEET),
        (f'sum(vllm:num_requests_running{MATCH}) / count(kube_pod_info{{namespace="{NAMESPACE}"}})', FLEET),
        (f"sum(rate(vllm:request_success_total{MATCH}[1m])) * 60", FLEET),
        (f"sum(vllm:kv_cache_usage_perc{MATCH}) or vector(0)", FLEET),
        (f"max_over_time((sum(vllm:num_requests_running{MATCH}))[10m:30s] offset 3m)", FLEET),
        (f"predict_linear(({signal_query('request_rate', MATCH)})[20m:1m], 900)", FLEET),
    ]


def _labels(kind: str, key: tuple) -> str:
    if kind == MODEL_ONLY:
        return f'{{model_name="{MODEL}"}}'
    if kind == PER_POD_NO_POD:
        return f'{{model_name="{MODEL}", namespace="{NAMESPACE}"}}'
    if kind == FLEET or not key or key[0] is None:
        return "{}"
    if kind == POD_ONLY:
        return f'{{pod="pod-{key[0]}"}}'
    return "{" + POD_LABELS.format(model=MODEL, namespace=NAMESPACE, pod=key[0]) + "}"


def _cases(store: MetricStore, forms, eval_times_s) -> list[dict]:
    cases = []
    for text, kind in forms:
        query = parse_query(text, histograms=True)
        for t_s in eval_times_s:
            result = query.evaluate(store, t_s, prometheus_major=2)
            assert isinstance(result, dict), text
            cases.append(
                {
                    "expr": text,
                    "eval_time": f"{t_s}s",
                    "exp_samples": [
                        {"labels": _labels(kind, key), "value": float(value)} for key, value in sorted(result.items())
                    ],
                }
            )
    return cases


def _run(tmp_path, tests: list[dict]) -> subprocess.CompletedProcess:
    path = tmp_path / "promql-cases.yaml"
    path.write_text(yaml.safe_dump({"rule_files": [], "evaluation_interval": "1m", "tests": tests}))
    return subprocess.run([promtool(), "test", "rules", str(path)], capture_output=True, text=True, check=False)


def test_every_query_form_gives_prometheus_values(tmp_path):
    # 40 minutes; never more than two pods at once (pod 1 goes at 20 min, pod 2 comes at 27).
    fixture = Fixture(161, {0: (0, 161), 1: (0, 80), 2: (108, 161)}, seed=7)
    store = fixture.store()
    times = [120, 300, 600, 900, 1200, 1320, 1620, 1800, 2100, 2400]
    cases = _cases(store, planner_forms() + subset_forms(), times)
    empty = sum(not case["exp_samples"] for case in cases)
    assert len(cases) >= 300 and empty < len(cases) / 4  # the cases mostly have values to compare
    run = _run(
        tmp_path, [{"interval": f"{SCRAPE_S}s", "input_series": fixture.input_series(), "promql_expr_test": cases}]
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]


def test_forecasts_a_day_back_give_prometheus_values(tmp_path):
    # A day and 45 minutes of two pods: seasonal forecasts read the day before, lead seconds ahead.
    n = (86_400 + 2700) // SCRAPE_S + 1
    fixture = Fixture(n, {0: (0, n), 1: (0, n)}, seed=11)
    store = fixture.store()
    forms = []
    for lead_s in (0, 300, 615):
        forecast = Forecast("seasonal_naive", period_s=86_400, lead_s=lead_s)
        forms += [
            (forecast_query(forecast, signal, MATCH, prometheus_major=2), FLEET)
            for signal in ("in_flight", "request_rate")
        ]
    for method in FORECAST_METHODS[1:]:
        forecast = Forecast(method, window_s=2700, step_s=90, ahead_s=600, smoothing_frac=0.2, trend_frac=0.6)
        forms += [
            (forecast_query(forecast, signal, MATCH, prometheus_major=2), FLEET)
            for signal in ("in_flight", "request_rate")
        ]
    times = [86_400 + 15 * k for k in (0, 1, 20, 61, 120, 180)]
    cases = _cases(store, forms, times)
    # Every one forecasts, but the day-old request rate with no lead at 24:00 (its window before t = 0 is empty).
    zero = [(case["expr"], case["eval_time"]) for case in cases if case["exp_samples"][0]["value"] == 0.0]
    assert zero == [(forms[1][0], "86400s")]
    run = _run(
        tmp_path, [{"interval": f"{SCRAPE_S}s", "input_series": fixture.input_series(), "promql_expr_test": cases}]
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]


def test_a_wrong_value_fails(tmp_path):
    # The comparison is promtool's own and exact: one ulp off is a failure, so the tests above can fail.
    fixture = Fixture(41, {0: (0, 41)}, seed=3)
    case = _cases(fixture.store(), [(f"rate(vllm:request_success_total{MATCH}[5m])", PER_POD)], [600])[0]
    case["exp_samples"][0]["value"] = math.nextafter(case["exp_samples"][0]["value"], math.inf)
    run = _run(
        tmp_path, [{"interval": f"{SCRAPE_S}s", "input_series": fixture.input_series(), "promql_expr_test": [case]}]
    )
    assert run.returncode != 0 and "rate(vllm:request_success_total" in run.stdout + run.stderr


def test_a_missing_promtool_skips_with_a_message_and_fails_under_ci(monkeypatch):
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="promtool not found"):
        promtool()
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI installs it"):
        promtool()
