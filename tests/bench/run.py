"""Benchmarks for the planner's hot paths: medians over repeats, and ratios.

Run with `make bench`. Wall-clock figures on shared machines are noisy, so
each case is repeated and the median reported, and comparisons are given as
ratios measured in the same run. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import subprocess
import sys
import tempfile
import timeit
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from planner.autoscaler.behavior import HorizontalPodAutoscalerBehavior
from planner.autoscaler.cron_scaler import CronMetadata, build_cron_scaler, overlap_in_a_year_s
from planner.autoscaler.horizontal import ExternalReading, HorizontalController, PodMetricsReading
from planner.autoscaler.hpa_spec import HorizontalPodAutoscalerSpec, MetricSpec, MetricTarget
from planner.autoscaler.keda import KedaController, ScaledObjectSpec, Trigger, hpa_for_scaled_object
from planner.autoscaler.replica_calculator import PodMetric, ready_pods
from planner.autoscaler.spec import Autoscaler
from planner.capacity.headroom import backlog_trajectory_requests
from planner.capacity.knee import find_knee
from planner.capacity.kv_cache import ServingSpec, kv_capacity
from planner.capacity.littles_law import in_flight_requests, replicas_for_target
from planner.capacity.step_time import fit_step_time, output_throughput_tps
from planner.charts.drain import cut_grid
from planner.dynamics.drain import cut_frac, output_lengths
from planner.dynamics.kv_ramp import ramp_replicas
from planner.manifests.generate import ScalingPlan, generate_manifests
from planner.manifests.schema import validate_manifest
from planner.manifests.writer import dump_manifest, patch_workload_text
from planner.readers.fleet import read_fleet
from planner.readers.loadtest import read_loadtest
from planner.readers.model_config import read_model_config
from planner.readers.trace import read_trace
from planner.simulate.fleet import FleetSpec
from planner.simulate.metrics import COLUMNS, MetricStore, parse_query
from planner.simulate.oracle import oracle_bound, oracle_curve
from planner.simulate.reference import simulate
from planner.simulate.scenario import Scenario, scenario_trace
from planner.simulate.traffic import RequestTrace, stretch_days, stretch_trace
from planner.vllm.forecast import Forecast, forecast_query
from planner.workflows.forecast_comparison import default_forecasts
from tests.conftest import DATA_DIR, SHARED_DIR, TEST_DATA_DIR

RATES_RPS = np.linspace(0.0, 200.0, 100_000)

# The fleet simulator's reference engine on ten minutes of Poisson traffic into a KEDA in-flight trigger.
_SIM_RNG = np.random.default_rng(0)
_SIM_ARRIVALS = np.sort(_SIM_RNG.uniform(0.0, 600.0, 6000))
SIM_TRACE = RequestTrace(_SIM_ARRIVALS, np.full(6000, 200), np.full(6000, 240), "bench")
SIM_SO = ScaledObjectSpec(
    "bench",
    (Trigger(0, "prometheus", 40.0, query="sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)"),),
    min_replica_count=1,
    max_replica_count=16,
    polling_interval_s=15.0,
)
SIM_AUTOSCALER = Autoscaler("ScaledObject", "bench", "bench", hpa_for_scaled_object(SIM_SO), SIM_SO)
SIM_FLEET = FleetSpec()


def _replicas_vectorised() -> None:
    replicas_for_target(in_flight_requests(RATES_RPS, 12.0), 40.0)


def _replicas_scalar_loop() -> None:
    for rate in RATES_RPS[:1000]:
        replicas_for_target(in_flight_requests(float(rate), 12.0), 40.0)


def _throughput_grid() -> None:
    output_throughput_tps(np.arange(1, 1025), 6.0, 0.25)


def _fit() -> None:
    batch = np.arange(1, 257, dtype=float)
    fit_step_time(batch, 6.0 + 0.25 * batch)


def _backlog_hour() -> None:
    time_s = np.arange(0.0, 3600.0, 1.0)
    backlog_trajectory_requests(time_s, 16.0, 12.0)


def _kv_ramp() -> None:
    ramp_replicas(4, 0.8, 20)


def _hpa_hour() -> None:
    # one HPA reconciled every 15 s for an hour on an External AverageValue trigger, behavior defaults
    spec = HorizontalPodAutoscalerSpec(
        "q",
        100,
        (MetricSpec("External", "q", MetricTarget("AverageValue", average_value_milli=2000)),),
        behavior=HorizontalPodAutoscalerBehavior(),
    )
    controller, replicas = HorizontalController(spec), 4
    for tick in range(240):
        load = 20_000 if (tick // 40) % 2 else 6_000
        replicas = controller.reconcile_autoscaler(15.0 * tick, replicas, [ExternalReading((load,))]).desired_replicas


_PODS_50 = ready_pods(50)
_READING_50 = PodMetricsReading({pod.name: PodMetric(12_000) for pod in _PODS_50})
_PODS_SPEC = HorizontalPodAutoscalerSpec(
    "p", 100, (MetricSpec("Pods", "q", MetricTarget("AverageValue", average_value_milli=10_000)),)
)


def _pods_metric_50() -> None:
    HorizontalController(_PODS_SPEC).reconcile_autoscaler(0.0, 50, [_READING_50], pods=_PODS_50)


def _keda_hour() -> None:
    keda = KedaController(ScaledObjectSpec("q", (Trigger(0, "prometheus", 5.0),), max_replica_count=20))
    replicas = 0
    for tick in range(240):
        replicas = keda.step(15.0 * tick, replicas, {0: 40.0 if (tick // 40) % 2 else 0.0})


_CRON = CronMetadata("0 8 * * MON-FRI", "0 18 * * MON-FRI", "Europe/Dublin", "4")
_CRON_SO = ScaledObjectSpec(
    "q", (Trigger(0, "prometheus", 5.0), Trigger(1, "cron", 1.0, cron=_CRON)), max_replica_count=20
)
_LUNCH = build_cron_scaler(CronMetadata("0 12 * * SAT,SUN", "0 14 * * SAT,SUN", "UTC", "6"))


def _keda_cron_day() -> None:
    # A day of 15 s polls and syncs beside a cron window: each asks the cron scaler afresh.
    keda = KedaController(_CRON_SO, start_epoch_s=1704067200.0)
    replicas = 1
    for tick in range(5760):
        replicas = keda.step(15.0 * tick, replicas, {0: 0.0})


def _cron_overlap_year() -> None:
    # cron-overlap's search over a year for two daily-ish windows that never meet.
    overlap_in_a_year_s(build_cron_scaler(_CRON), _LUNCH)


GPT_OSS = read_model_config(DATA_DIR / "models" / "gpt-oss-120b.json")
LLAMA = read_model_config(DATA_DIR / "models" / "llama-3.1-8b-instruct.json")
SERVING = ServingSpec(max_model_len=16384)
SWEEP = read_loadtest(DATA_DIR / "loadtests" / "llama-3.1-8b_canonical.csv")


def _kv_capacity_dense() -> None:
    kv_capacity(LLAMA, SERVING, 40 * 2**30)


def _kv_capacity_hybrid() -> None:
    kv_capacity(GPT_OSS, SERVING, 40 * 2**30)


def _replica_kv_mismatch() -> None:
    # The wrong model for the log: every single-field explanation is tried.
    from planner.capacity.replica_kv import replica_kv
    from planner.readers.vllm_log import read_vllm_log
    from tests.conftest import TEST_DATA_DIR

    log = read_vllm_log(TEST_DATA_DIR / "vllm_logs" / "lmcache-1739-qwen3-14b.log")
    replica_kv(LLAMA, log=log)


def _read_loadtest_guidellm() -> None:
    read_loadtest(DATA_DIR / "loadtests" / "llama-3.1-8b_guidellm_benchmarks.json")


def _find_knee() -> None:
    find_knee(
        SWEEP["concurrency"], SWEEP["ttft_p99_ms"], SWEEP["itl_p99_ms"], ttft_p99_slo_ms=2000.0, itl_p99_slo_ms=50.0
    )


AZURE_CONV = SHARED_DIR / "traces" / "AzureLLMInferenceTrace_conv.csv"
MOONCAKE = SHARED_DIR / "traces" / "mooncake_conversation_trace.jsonl"
PROMETHEUS_EXPORT = TEST_DATA_DIR / "traces" / "prometheus-request-rate.json"


def _diurnal_day() -> None:
    scenario_trace(Scenario("diurnal", 86_400.0, 6.0, token_distribution="geometric"), 0)


def _read_azure_hour() -> None:
    read_trace(AZURE_CONV)


def _stretch_azure_day() -> None:
    stretch_trace(read_trace(AZURE_CONV), 0)


def _stretch_azure_week() -> None:
    stretch_days(read_trace(AZURE_CONV), 0, 7)


@functools.cache
def _azure_day() -> RequestTrace:
    # Built once, outside the timing: the oracle's cases time the bound alone.
    return stretch_trace(read_trace(AZURE_CONV), 0)


def _oracle_azure_day() -> None:
    oracle_bound(_azure_day(), read_fleet(DATA_DIR / "fleets" / "lab-8b.yaml"), 0.99)


def _oracle_curve_azure_day() -> None:
    oracle_curve(_azure_day(), read_fleet(DATA_DIR / "fleets" / "lab-8b.yaml"))


def _read_mooncake_hour() -> None:
    read_trace(MOONCAKE)


def _read_prometheus_export() -> None:
    read_trace(PROMETHEUS_EXPORT, series=0)


_TRACE_DIR = tempfile.TemporaryDirectory()
DAY_CSV = Path(_TRACE_DIR.name) / "day.csv"
_DAY = scenario_trace(Scenario("diurnal", 86_400.0, 6.0, token_distribution="geometric"), 0)
pd.DataFrame(
    {"arrival_s": _DAY.arrival_s, "input_tokens": _DAY.input_tokens, "output_tokens": _DAY.output_tokens}
).to_csv(DAY_CSV, index=False)


def _read_day() -> None:
    read_trace(DAY_CSV)


_PLAN = ScalingPlan(
    target_name="llama",
    concurrency_target=40,
    warmup_s=240,
    max_output_tokens=4096,
    itl_ms=50,
    max_replicas=12,
    kv_usage_target_frac=0.8,
    queue_threshold_requests=129,
)
_MANIFESTS = generate_manifests(_PLAN)
_WORKLOAD = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llama
spec:
  selector:
    matchLabels: {app: llama}
  template:
    metadata:
      labels: {app: llama}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.11.0
        args:
        - --model=meta-llama/Llama-3.1-8B-Instruct
        - --max-num-seqs=64
"""


def _generate_and_dump() -> None:
    for manifest in generate_manifests(_PLAN).all:
        dump_manifest(manifest)


def _validate_scaled_object() -> None:
    validate_manifest(_MANIFESTS.scaled_object.document)


def _patch_workload() -> None:
    patch_workload_text(_WORKLOAD, _MANIFESTS.grace, source="bench.yaml")


_LONG_ANSWERS = output_lengths(131_072, "geometric", 2048)
_CHAPTER_ANSWERS = output_lengths(4096, "geometric", 512)


def _cut_frac_long() -> None:
    cut_frac(np.linspace(0.0, 7000.0, 1000), _LONG_ANSWERS, 50.0)


def _cut_grid_chapter() -> None:
    cut_grid(np.arange(10.0, 151.0, 10.0), _CHAPTER_ANSWERS, pre_stop_s=10.0)


def _lint_review_folder() -> None:
    from planner.manifests.lint import lint
    from planner.readers.workload import read_manifest_set

    lint(read_manifest_set([DATA_DIR / "manifests" / "review"]))


def _simulate_reference_10min() -> None:
    simulate(SIM_TRACE, SIM_AUTOSCALER, SIM_FLEET, duration_s=600.0)


# The same ten minutes with a predict_linear trigger beside the in-flight one (a subquery every poll).
_FORECAST_SO = ScaledObjectSpec(
    "bench",
    (
        SIM_SO.triggers[0],
        Trigger(1, "prometheus", 40.0, query=forecast_query(Forecast("predict_linear", window_s=600, ahead_s=60))),
    ),
    min_replica_count=1,
    max_replica_count=16,
    polling_interval_s=15.0,
)
FORECAST_AUTOSCALER = Autoscaler("ScaledObject", "bench", "bench", hpa_for_scaled_object(_FORECAST_SO), _FORECAST_SO)


def _simulate_reference_10min_forecast() -> None:
    simulate(SIM_TRACE, FORECAST_AUTOSCALER, SIM_FLEET, duration_s=600.0)


def _day_of_scrapes(pods: int = 8) -> MetricStore:
    # A day and an hour of 15 s scrapes of eight pods, in-flight gauges and a completion counter.
    store = MetricStore()
    rng = np.random.default_rng(0)
    counters = np.zeros(pods)
    for k in range((86_400 + 3600) // 15 + 1):
        rows = np.zeros((pods, len(COLUMNS)))
        rows[:, COLUMNS.index("num_requests_running")] = rng.integers(0, 40, pods)
        rows[:, COLUMNS.index("num_requests_waiting")] = rng.integers(0, 5, pods)
        counters += rng.integers(0, 20, pods)
        rows[:, COLUMNS.index("request_success_total")] = counters
        store.record(15.0 * k, list(range(pods)), rows, list(range(pods)))
    return store


_DAY_STORE = _day_of_scrapes()
_FORECAST_QUERIES = {
    f"{name}, {signal}": parse_query(forecast_query(forecast, signal))
    for name, forecast in default_forecasts(300.0).items()
    for signal in ("in_flight", "request_rate")
    if signal == "in_flight" or name == "predict_linear"
}


def _forecast_polls(name: str) -> Callable[[], None]:
    query = _FORECAST_QUERIES[name]

    def polls() -> None:
        _DAY_STORE.subquery_points.clear()  # each repeat starts cold, then reuses its own steps
        for k in range(240):
            query.scalar(_DAY_STORE, 86_400.0 + 15.0 * k)

    return polls


CASES: dict[str, tuple[Callable[[], None], int]] = {
    "HorizontalController, 240 reconciles (1 h)": (_hpa_hour, 20),
    "reconcile, Pods metric over 50 pods": (_pods_metric_50, 200),
    "KedaController.step, 240 steps (1 h)": (_keda_hour, 10),
    "KedaController.step with a cron trigger, 5,760 steps (a day)": (_keda_cron_day, 1),
    "overlap_in_a_year_s, two cron windows that never meet": (_cron_overlap_year, 1),
    "replicas_for_target, 100k rates vectorised": (_replicas_vectorised, 20),
    "replicas_for_target, 1k scalar calls": (_replicas_scalar_loop, 5),
    "output_throughput_tps, 1024 batch sizes": (_throughput_grid, 500),
    "fit_step_time, 256 points": (_fit, 200),
    "backlog_trajectory_requests, 1 h at 1 s": (_backlog_hour, 10),
    "ramp_replicas, 20 warmups": (_kv_ramp, 2000),
    "kv_capacity, dense GQA (Llama 3.1 8B)": (_kv_capacity_dense, 500),
    "kv_capacity, sliding-window hybrid (gpt-oss-120b)": (_kv_capacity_hybrid, 500),
    "replica_kv, log that disagrees (explanation search)": (_replica_kv_mismatch, 5),
    "read_loadtest, GuideLLM benchmarks.json": (_read_loadtest_guidellm, 20),
    "find_knee, 12-step sweep": (_find_knee, 500),
    "scenario_trace, diurnal day at 6 req/s (~518k requests)": (_diurnal_day, 2),
    "read_trace, canonical CSV of that day (~518k rows)": (_read_day, 2),
    "generate_manifests + dump_manifest, 4 files": (_generate_and_dump, 20),
    "validate_manifest, generated ScaledObject": (_validate_scaled_object, 50),
    "patch_workload_text, small Deployment": (_patch_workload, 20),
    "cut_frac, 131,072-token lengths, 1,000 windows": (_cut_frac_long, 50),
    "cut_grid, the drain chapter's 15 ITLs": (_cut_grid_chapter, 20),
    "read_manifest_set + lint, 3 files (4 documents)": (_lint_review_folder, 20),
    "simulate (reference engine), 10 min at 1 s ticks, 10 req/s": (_simulate_reference_10min, 1),
    "  the same with a predict_linear subquery trigger beside": (_simulate_reference_10min_forecast, 1),
    **{
        f"forecast query, 240 polls over a day of 8 pods' scrapes: {name}": (_forecast_polls(name), 1)
        for name in _FORECAST_QUERIES
    },
    "read_trace, Prometheus export (2 series x 120 steps, ~32k requests)": (_read_prometheus_export, 10),
}
if AZURE_CONV.is_file():  # the shared corpus sits beside the checkout
    CASES["read_trace, Azure conv hour (19,366 rows)"] = (_read_azure_hour, 10)
    CASES["stretch_trace, Azure conv hour to a day (~478k requests)"] = (_stretch_azure_day, 2)
    CASES["stretch_days, Azure conv hour to a week (~3M requests)"] = (_stretch_azure_week, 1)
    CASES["oracle_bound, Azure conv day (~478k requests) at 0.99, lab fleet"] = (_oracle_azure_day, 1)
    CASES["oracle_curve, Azure conv day, 1,001 attainments, lab fleet"] = (_oracle_curve_azure_day, 1)
if MOONCAKE.is_file():
    CASES["read_trace, Mooncake conversation hour (12,031 lines)"] = (_read_mooncake_hour, 5)


def measure(func: Callable[[], None], number: int, repeat: int) -> float:
    """Median seconds per call over ``repeat`` runs of ``number`` calls."""
    runs = timeit.repeat(func, number=number, repeat=repeat)
    return statistics.median(runs) / number


# Process start-up: a bare interpreter, numpy (which the maths needs), and whole CLI commands.
STARTUP = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "python -c 'import numpy'": [sys.executable, "-c", "import numpy"],
    "planner replicas": [
        sys.executable,
        "-m",
        "planner.cli",
        "replicas",
        "--arrival-rate-rps",
        "10",
        "--duration-s",
        "12",
        "--knee",
        "48",
    ],
    "planner grace": [
        sys.executable,
        "-m",
        "planner.cli",
        "grace",
        "--max-tokens",
        "4096",
        "--itl-ms",
        "50",
        "--grace-period-s",
        "300",
        "--shutdown-timeout-s",
        "240",
    ],
    "planner knee (reads a table)": [
        sys.executable,
        "-m",
        "planner.cli",
        "knee",
        str(DATA_DIR / "loadtests" / "llama-3.1-8b_canonical.csv"),
        "--ttft-p99-ms",
        "2000",
        "--itl-p99-ms",
        "50",
    ],
}


def measure_startup(argv: list[str], repeat: int) -> float:
    """Median wall seconds for one run of the command."""

    def once() -> None:
        subprocess.run(argv, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    once()  # warm the file cache
    return statistics.median(timeit.repeat(once, number=1, repeat=repeat))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7, help="runs per case (median reported)")
    args = parser.parse_args()
    results = {}
    width = max(map(len, CASES))
    print(f"{'case':<{width}}  median per call")
    for name, (func, number) in CASES.items():
        results[name] = measure(func, number, args.repeat)
        print(f"{name:<{width}}  {results[name] * 1e6:12.1f} us")
    per_rate_vector = results["replicas_for_target, 100k rates vectorised"] / 100_000
    per_rate_scalar = results["replicas_for_target, 1k scalar calls"] / 1000
    print(f"\nratio: scalar call / vectorised element = {per_rate_scalar / per_rate_vector:,.0f}x")
    print(f"\n{'command start-up':<{width}}  median wall time")
    startup = {name: measure_startup(argv, args.repeat) for name, argv in STARTUP.items()}
    for name, seconds in startup.items():
        print(f"{name:<{width}}  {seconds * 1e3:12.1f} ms")
    numpy_s = startup["python -c 'import numpy'"]
    print(f"ratio: planner replicas / importing numpy alone = {startup['planner replicas'] / numpy_s:.2f}x")
    from tests.bench import engines

    engines.main()


if __name__ == "__main__":
    main()
