"""Benchmarks of the fleet simulator's engines and of a sweep, on this machine, medians and ratios.

Targets (issue 9): 24 h of traffic at 1 s ticks through the exact controller
with the fast engine in under 0.2 s; 1,000 configurations x 24 h in under
10 s and at least 25x the reference engine per configuration-day; peak
memory of that sweep under 2 GiB. Everything is measured, nothing
extrapolated, and nothing is asserted. Two traffic days are used:

* ``synthetic``: Poisson arrivals at 1 req/s on average under a daily sine
  (0.2x to 1.8x), 200 prompt and 240 output tokens (about 86,000 requests);
* ``azure``: the public Azure LLM conversation trace (one real hour) stretched
  to a day under the diurnal envelope of :func:`planner.simulate.traffic.stretch_trace`
  (about 478,000 requests, real token counts), when ``../shared`` is there.

The sweep is ``planner sweep``'s own ``run_sweep``. The fast engine simulates
the fleet once for configurations whose decisions agree, so the benchmark
also prints how many fleet-days it simulated for the 1,000 configurations,
and times 100 configurations that share nothing (each its own seed), which
is the engine's speed per configuration-day without that saving.

The same 1,000-configuration sweep is then run on a fleet with a node pool
(:data:`NODE_POOL`: pods wait for GPUs, cluster-autoscaler buys nodes, a
placeholder, capacity failures), in the compiled kernels too, and the ratio of
its median time to the sweep's without nodes is printed (target: at most 1.5x).

A ScaledObject with KEDA ``cron`` triggers (:func:`cron_autoscaler`: the
in-flight trigger beside a weekday business-hours floor in Dublin and a
lunchtime floor in UTC) is timed over the Azure day (the synthetic one
without ``../shared``) in the compiled kernels and in the lockstep engine,
which ran every cron configuration before the kernels covered cron triggers.

Chunked prefill (:func:`prefill_pair`): one configuration through the fast
engine with prefill off (a cost of 0, the replica model before chunked
prefill) and on (the default fleet: 0.0576 ms per prompt token within a
2,048-token budget), on the synthetic day and on a day of Mooncake's
conversation trace (prompts of 12,035 tokens on average, one real hour
stretched to a day), when ``../shared`` is there; medians and their ratio.

A week (issue 24): 1,000 configurations (:data:`WEEK_GRID`) over seven days of
the Azure conversation trace (:func:`planner.simulate.traffic.stretch_days`,
seed 0) on :data:`SLOW_FLEET` (a replica draining about 3.4 requests/s), with
``run_sweep`` on two threads in fresh processes (median wall time, CPU time,
peak RSS) and once on a Dask ``LocalCluster`` of two single-threaded worker
processes (wall time, the cluster's start excluded). Targets: under 60 s and
under 2 GiB. Run it alone with ``python -m tests.bench.engines --only week``.

The forecasts: the ScaledObject the generator writes with each forecast beside
the in-flight trigger (a subquery trigger, in a ``scalingModifiers`` formula)
over that day, in the compiled kernels and in the lockstep engine
(``--only forecast``).

The first call of a compiled kernel compiles it (or loads it from numba's
cache); it is made once before any timing and reported on its own.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

from planner.autoscaler.cron_scaler import CronMetadata
from planner.autoscaler.keda import ScaledObjectSpec, Trigger, hpa_for_scaled_object
from planner.autoscaler.spec import Autoscaler
from planner.simulate import fast, reference
from planner.simulate.fleet import FleetSpec
from planner.simulate.replica import ReplicaSpec
from planner.simulate.supply import NodePoolSpec
from planner.simulate.traffic import RequestTrace

DAY_S = 86_400.0
IN_FLIGHT = "sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)"
SWEEP_CONFIGURATIONS = 1000
# Runs of the 1,000-configuration sweep per traffic day (the real-trace day takes about a minute per run).
SWEEP_RUNS = {"synthetic": 3, "azure": 1}
# Configurations run with a fleet each, to show the engine's speed when nothing is shared.
DISTINCT_FLEETS = 100
# Runs of each sweep of the with/without node pool pair (medians compared).
NODE_PAIR_RUNS = {"synthetic": 3, "azure": 3}
# The node pool of the "with nodes:" sweep: one-GPU nodes (each new replica needs a node of its own, as
# on L4 or A10G instances), bought by cluster-autoscaler (its default scan, GPU buffer and scale-down
# delays) in about two minutes, an image pulled on each new node, one warm placeholder, and one node
# request in twenty failing for lack of capacity. Over the Azure day a configuration buys 10 to 80 nodes.
NODE_POOL = NodePoolSpec(
    gpus_per_node=1,
    provision_s=120.0,
    provision_distribution="lognormal",
    provision_spread_s=30.0,
    node_init_s=60.0,
    capacity_failure_frac=0.05,
    capacity_retry_s=60.0,
)
NODE_FLEET = FleetSpec(nodes=NODE_POOL, image_pull_s=90.0, weights_load_s=30.0, placeholders=1)
# Runs of the cron case per engine (medians; a lockstep run of the Azure day takes minutes).
CRON_RUNS = {"fast": 5, "lockstep": 3}


def diurnal_trace(duration_s: float, mean_rps: float, seed: int) -> RequestTrace:
    """Poisson arrivals under a daily sine envelope (0.2x to 1.8x the mean), 200 in / 240 out tokens."""
    rng = np.random.default_rng(seed)
    t = np.arange(0.0, duration_s)
    rate = mean_rps * (1.0 + 0.8 * np.sin(2 * np.pi * t / DAY_S - np.pi / 2))
    counts = rng.poisson(rate)
    arrival_s = np.repeat(t, counts) + rng.uniform(0.0, 1.0, counts.sum())
    arrival_s.sort()
    n = len(arrival_s)
    return RequestTrace(arrival_s, np.full(n, 200), np.full(n, 240), f"diurnal {mean_rps} req/s")


def autoscaler(target: float, *, max_replicas: int = 16, down_window_s: int | None = None) -> Autoscaler:
    """A KEDA ScaledObject on in-flight requests (running + waiting) at ``target`` per replica."""
    from planner.autoscaler.behavior import HorizontalPodAutoscalerBehavior, HPAScalingRules

    behavior = None
    if down_window_s is not None:
        behavior = HorizontalPodAutoscalerBehavior(
            scale_down=HPAScalingRules(stabilization_window_seconds=down_window_s)
        )
    so = ScaledObjectSpec(
        "bench",
        (Trigger(0, "prometheus", target, query=IN_FLIGHT),),
        min_replica_count=1,
        max_replica_count=max_replicas,
        polling_interval_s=15.0,
        behavior=behavior,
    )
    return Autoscaler("ScaledObject", "bench", "bench", hpa_for_scaled_object(so), so)


def cron_autoscaler(target: float = 20.0) -> Autoscaler:
    """:func:`autoscaler` with two cron floors beside it: 6 replicas 08:00-18:00 Dublin time on weekdays, 10
    from 12:00 to 14:00 UTC every day (they overlap at lunch on weekdays)."""
    so = ScaledObjectSpec(
        "bench",
        (
            Trigger(0, "prometheus", target, query=IN_FLIGHT),
            Trigger(1, "cron", 1.0, cron=CronMetadata("0 8 * * MON-FRI", "0 18 * * MON-FRI", "Europe/Dublin", "6")),
            Trigger(2, "cron", 1.0, cron=CronMetadata("0 12 * * *", "0 14 * * *", "UTC", "10")),
        ),
        min_replica_count=1,
        max_replica_count=16,
        polling_interval_s=15.0,
    )
    return Autoscaler("ScaledObject", "bench", "bench", hpa_for_scaled_object(so), so)


def cron_case(name: str, day: RequestTrace) -> None:
    """The cron ScaledObject over ``day``: compiled kernels against the lockstep engine, medians of repeats."""
    fleet = FleetSpec(warmup_s=60.0)
    so = cron_autoscaler()
    config = [fast.Configuration(so, fleet)]
    print(f"  cron ScaledObject over the {name} day (compiled kernels: {fast.covers(so, fleet)}):")
    outcomes = {}

    def run_fast():
        outcomes["fast"] = fast.simulate_many(day, config, duration_s=DAY_S)[0]

    def run_lockstep():
        outcomes["lockstep"] = fast.lockstep.simulate_many(day, config, duration_s=DAY_S)[0]

    fast_s = median_s(run_fast, CRON_RUNS["fast"])
    lean_s = median_s(
        lambda: fast.simulate_many(day, config, duration_s=DAY_S, timeseries=False, per_request=False),
        CRON_RUNS["fast"],
    )
    plain_s = median_s(
        lambda: fast.simulate_many(
            day, [fast.Configuration(autoscaler(20.0), fleet)], duration_s=DAY_S, timeseries=False, per_request=False
        ),
        CRON_RUNS["fast"],
    )
    lockstep_s = median_s(run_lockstep, CRON_RUNS["lockstep"])
    same = outcomes["fast"].events == outcomes["lockstep"].events and outcomes["fast"].timeseries.equals(
        outcomes["lockstep"].timeseries
    )
    print(f"    compiled, 1 configuration x 24 h at 1 s ticks:  {fast_s:8.3f} s   (median of {CRON_RUNS['fast']})")
    print(f"    the same without the time series (sweep mode):  {lean_s:8.3f} s")
    print(f"    the in-flight trigger alone, sweep mode:        {plain_s:8.3f} s")
    print(
        f"    lockstep engine, the same configuration:        {lockstep_s:8.1f} s   (median of {CRON_RUNS['lockstep']})"
    )
    print(
        f"    ratio lockstep / compiled:                      {lockstep_s / fast_s:8.0f}x; "
        f"same events and time series: {same}; scale events {outcomes['fast'].scale_events}"
    )


FORECAST_RUNS = {"fast": 3, "lockstep": 1}


def forecast_autoscaler(method: str, target: float = 20.0) -> Autoscaler:
    """The ScaledObject the generator writes with ``method``'s forecast beside the in-flight trigger (a formula)."""
    from planner.manifests.generate import ScalingPlan, generate_manifests
    from planner.readers.manifest import autoscaler_from_document
    from planner.workflows.forecast_comparison import default_forecasts

    plan = ScalingPlan("bench", target, 60.0, 1024, 50, 16, forecast=default_forecasts(60.0)[method])
    autoscaler = autoscaler_from_document("bench.yaml", generate_manifests(plan).scaled_object.document)
    assert autoscaler is not None  # generate_manifests writes a ScaledObject
    return autoscaler


def forecast_case(name: str, day: RequestTrace) -> None:
    """Each generated forecast ScaledObject over ``day``: compiled kernels against the lockstep engine."""
    print(f"  generated forecast ScaledObjects over the {name} day (a subquery trigger in a formula):")
    for method in ("predict_linear", "max_over_time", "double_exponential_smoothing"):
        _forecast_pair(method, day)


def _forecast_pair(method: str, day: RequestTrace) -> None:
    fleet = FleetSpec(warmup_s=60.0)
    config = [fast.Configuration(forecast_autoscaler(method), fleet)]
    outcomes = {}

    def run_fast():
        outcomes["fast"] = fast.simulate_many(day, config, duration_s=DAY_S, per_request=False)[0]

    def run_lockstep():
        outcomes["lockstep"] = fast.lockstep.simulate_many(day, config, duration_s=DAY_S)[0]

    fast_s = median_s(run_fast, FORECAST_RUNS["fast"])
    lockstep_s = median_s(run_lockstep, FORECAST_RUNS["lockstep"])
    same = outcomes["fast"].events == outcomes["lockstep"].events and outcomes["fast"].timeseries.equals(
        outcomes["lockstep"].timeseries
    )
    print(
        f"    {method:<29} compiled {fast_s:7.3f} s (median of {FORECAST_RUNS['fast']}), lockstep "
        f"{lockstep_s:6.1f} s: {lockstep_s / fast_s:5.0f}x; same events and time series: {same}; "
        f"kernels: {fast.covers(config[0].autoscaler, fleet)}"
    )


def median_s(func: Callable[[], object], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def traces() -> dict[str, RequestTrace]:
    from tests.conftest import SHARED_DIR

    found = {"synthetic": diurnal_trace(DAY_S, 1.0, seed=1)}
    azure = SHARED_DIR / "traces" / "AzureLLMInferenceTrace_conv.csv"
    if azure.is_file():
        from planner.readers.trace import read_trace
        from planner.simulate.traffic import stretch_trace

        found["azure"] = stretch_trace(read_trace(azure), 0)
    return found


SWEEP_GRID = {
    "target": [round(float(t), 4) for t in np.linspace(2.0, 40.0, 25)],
    "scale_down_window_s": [0, 60, 300, 600, 900],
    "warmup_s": [30.0, 60.0, 120.0, 240.0],
    "max_replicas": [8, 16],
}  # 25 x 5 x 4 x 2 = 1,000 configurations


# The week's sweep (issue 24): a slow replica, a step of 24 + 1.0 ms per sequence, so a full batch of 64
# finishes the Azure conversation trace's mean 211-token answers at about 3.4 requests/s (the replica of
# planner plan's tests on real traffic; made-up constants, not a measurement).
SLOW_FLEET = FleetSpec(
    replica=ReplicaSpec(fixed_ms=24.0, per_sequence_ms=1.0, prefill_ms_per_token=0.0, max_num_seqs=64),
    warmup_s=120.0,
    usd_per_gpu_hour=2.5,
    ttft_slo_s=2.0,
)
WEEK_DAYS = 7
WEEK_GRID = {
    "target": [round(float(t), 4) for t in np.linspace(2.0, 40.0, 25)],
    "scale_down_window_s": [0, 60, 300, 600, 900],
    "min_replicas": [1, 2],
    "warmup_s": [60.0, 120.0],
    "max_replicas": [8, 16],
}  # 25 x 5 x 2 x 2 x 2 = 1,000 configurations
# Runs of the week's sweep on two threads (medians); the Dask run is made once.
WEEK_RUNS = 3


def week_trace(days: int = WEEK_DAYS) -> RequestTrace | None:
    """The Azure conversation hour stretched to ``days`` days under the weekly envelope (seed 0), or ``None``."""
    from tests.conftest import SHARED_DIR

    azure = SHARED_DIR / "traces" / "AzureLLMInferenceTrace_conv.csv"
    if not azure.is_file():
        return None
    from planner.readers.trace import read_trace
    from planner.simulate.traffic import stretch_days

    return stretch_days(read_trace(azure), 0, days)


def week_child(days: int = WEEK_DAYS, dask: bool = False) -> None:
    """The week's 1,000-configuration sweep in this (fresh) process, as ``planner sweep`` runs it; print JSON.

    Locally: :func:`planner.simulate.sweep.run_sweep` on two threads. With
    ``dask``: the same on a ``LocalCluster`` of two worker processes of one
    thread each; its start (and the workers' first compile-cache load, a
    one-configuration hour) is excluded, its ``seconds`` are the sweep's alone.
    """
    import resource

    from planner.simulate.sweep import expand_grid, run_sweep

    start = time.perf_counter()
    trace = week_trace(days)
    assert trace is not None
    trace_s = time.perf_counter() - start
    points = expand_grid(WEEK_GRID)
    base = autoscaler(20.0, down_window_s=300)
    duration_s = days * DAY_S
    fast.simulate_many(
        trace, [fast.Configuration(base, SLOW_FLEET)], duration_s=3600.0, timeseries=False
    )  # compile, or load the cache
    extra: dict = {}
    if dask:
        import distributed

        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None, silence_logs=50
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            run_sweep(trace, base, SLOW_FLEET, points[:2], duration_s=3600.0, client=client, progress=False)
            start = time.perf_counter()
            results = run_sweep(trace, base, SLOW_FLEET, points, duration_s=duration_s, client=client, progress=False)
            elapsed = time.perf_counter() - start
            extra["worker_peak_rss_gib"] = max(
                client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20).values()
            )
    else:
        cpu_start = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        results = run_sweep(trace, base, SLOW_FLEET, points, duration_s=duration_s, progress=False, workers=2)
        elapsed = time.perf_counter() - start
        cpu_end = resource.getrusage(resource.RUSAGE_SELF)
        extra["cpu_seconds"] = (cpu_end.ru_utime - cpu_start.ru_utime) + (cpu_end.ru_stime - cpu_start.ru_stime)
    attained = [r.slo_attainment_frac for r in results]
    print(
        json.dumps(
            {
                "seconds": elapsed,
                "trace_seconds": trace_s,
                "requests": len(trace),
                "configurations": len(results),
                "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                "compiled": fast.covers(base, SLOW_FLEET),
                "attainment_min": min(attained),
                "attainment_max": max(attained),
                "results_digest": hashlib.sha256(
                    json.dumps([r.as_dict() for r in results], sort_keys=True).encode()
                ).hexdigest(),
                **extra,
            }
        )
    )


def week_case(runs: int = WEEK_RUNS) -> None:
    """The week's sweep: medians of ``runs`` local runs in fresh processes, and one on a Dask LocalCluster."""
    print(
        f"  {SWEEP_CONFIGURATIONS:,} configurations x {WEEK_DAYS} days of the Azure conversation trace (slow replica):"
    )
    if week_trace(1) is None:
        print("    skipped: ../shared/traces/AzureLLMInferenceTrace_conv.csv is not there")
        return
    local = [_child_json(f"from tests.bench.engines import week_child; week_child({WEEK_DAYS})") for _ in range(runs)]
    seconds = statistics.median(r["seconds"] for r in local)
    cpu_s = statistics.median(r["cpu_seconds"] for r in local)
    rss = max(r["peak_rss_gib"] for r in local)
    first = local[0]
    print(
        f"    the week: {first['requests']:,} requests, built in {first['trace_seconds']:.1f} s; "
        f"compiled kernels: {first['compiled']}; attainment {first['attainment_min']:.3f} to "
        f"{first['attainment_max']:.3f}"
    )
    each = ", ".join(f"{r['seconds']:.1f}" for r in local)
    print(
        f"    2 threads: {seconds:8.1f} s wall (median of {len(local)}; runs {each} s; target < 60 s), "
        f"{cpu_s:.1f} s CPU, {seconds / SWEEP_CONFIGURATIONS / WEEK_DAYS * 1e3:.2f} ms per configuration-day"
    )
    print(f"    peak memory of that sweep process (max RSS): {rss:8.2f} GiB   (target < 2 GiB)")
    same = len({r["results_digest"] for r in local}) == 1
    dask = _child_json(f"from tests.bench.engines import week_child; week_child({WEEK_DAYS}, dask=True)")
    print(
        f"    Dask LocalCluster, 2 worker processes x 1 thread: {dask['seconds']:8.1f} s wall (one run, the cluster's "
        f"start excluded); worker peak RSS {dask['worker_peak_rss_gib']:.2f} GiB; "
        f"same results as the local runs: {same and dask['results_digest'] == first['results_digest']}"
    )


def sweep_child(trace_name: str, distinct_fleets: int = 0, nodes: bool = False) -> None:
    """Run the 1,000-configuration sweep as ``planner sweep`` does, in this (fresh) process; print JSON.

    The sweep is :func:`planner.cli.sweep.run_sweep` on two threads over
    :data:`SWEEP_GRID`: each configuration keeps its summary only, so the
    peak memory is that of a real sweep. The fast engine simulates the fleet
    once for configurations whose decisions agree; ``fleet_days`` is how many
    fleet-days it simulated in all, counted from the kernel's own tick
    positions. With ``distinct_fleets`` (a count), that many configurations
    instead each get their own fleet (a different seed): nothing is shared,
    which measures the engine's speed per configuration-day on its own.
    With ``nodes``, the fleet is :data:`NODE_FLEET` (a node pool) instead of the default one.
    """
    import resource

    from planner.cli.sweep import run_sweep
    from planner.simulate.fast import compiled, engine
    from planner.simulate.sweep import expand_grid, run_chunk

    trace = traces()[trace_name]
    points = expand_grid(SWEEP_GRID)
    base = autoscaler(20.0, down_window_s=300)
    fleet = NODE_FLEET if nodes else FleetSpec()
    fast.simulate_many(
        trace, [fast.Configuration(base, fleet)], duration_s=3600.0, timeseries=False
    )  # compile, or load the cache
    simulated_ticks = []
    real_run = compiled.engine.run

    def counted(*args):
        carry = args[-1]
        start = int(carry[engine.CARRY_TICK])
        code = real_run(*args)
        simulated_ticks.append(int(carry[engine.CARRY_TICK]) - start)
        return code

    compiled.engine.run = counted
    start = time.perf_counter()
    cpu_start = resource.getrusage(resource.RUSAGE_SELF)
    if distinct_fleets:
        from concurrent.futures import ThreadPoolExecutor

        def own_fleet(index: int):  # points spread over the grid, each with its own seed
            at = index * len(points) // distinct_fleets
            return run_chunk(trace, base, dataclasses.replace(fleet, seed=index), points[at : at + 1], DAY_S)

        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(own_fleet, range(distinct_fleets)))
    else:
        results = run_sweep(trace, base, fleet, points, duration_s=DAY_S, progress=False, workers=2)
    elapsed = time.perf_counter() - start
    cpu_end = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = (cpu_end.ru_utime - cpu_start.ru_utime) + (cpu_end.ru_stime - cpu_start.ru_stime)
    print(
        json.dumps(
            {
                "seconds": elapsed,
                "cpu_seconds": cpu_s,
                "configurations": len(results),
                "fleet_days": sum(simulated_ticks) / DAY_S,
                "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                "compiled": fast.covers(base, fleet),
            }
        )
    )


def _child(call: str) -> dict:
    return _child_json(f"from tests.bench.engines import sweep_child; {call}")


def _child_json(code: str) -> dict:
    # A fresh process (its peak RSS is the sweep's own); its last line of output is the JSON.
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(repeat: int = 5) -> None:
    print("\nfleet simulator engines (wall clock on this machine; medians of repeats)")
    fleet = FleetSpec(warmup_s=60.0)
    so = autoscaler(20.0)
    start = time.perf_counter()
    fast.simulate(diurnal_trace(600.0, 1.0, seed=3), so, fleet, duration_s=600.0)
    print(f"  first fast call (numba compile, or load from its cache): {time.perf_counter() - start:6.1f} s")
    prefill_pair(repeat)
    for name, day in traces().items():
        print(f"  {name} day: {len(day):,} requests")
        fast_s = median_s(lambda d=day: fast.simulate(d, so, fleet, duration_s=DAY_S), repeat)
        print(f"    fast, 1 configuration x 24 h at 1 s ticks:      {fast_s:8.3f} s   (target < 0.2 s)")
        lean_s = median_s(
            lambda d=day: fast.simulate_many(
                d, [fast.Configuration(so, fleet)], duration_s=DAY_S, timeseries=False, per_request=False
            ),
            repeat,
        )
        print(f"    the same without the time series (sweep mode): {lean_s:8.3f} s")
        ref_s = median_s(lambda d=day: reference.simulate(d, so, fleet, duration_s=DAY_S), 1)
        print(f"    reference, 1 configuration x 24 h (one run):   {ref_s:8.1f} s")
        print(f"    ratio reference / fast per configuration-day:  {ref_s / lean_s:8.0f}x   (target >= 25x)")
        runs = [_child(f"sweep_child({name!r})") for _ in range(SWEEP_RUNS.get(name, 1))]
        seconds = statistics.median(r["seconds"] for r in runs)
        rss = max(r["peak_rss_gib"] for r in runs)
        print(
            f"    {SWEEP_CONFIGURATIONS:,} configurations x 24 h, 2 threads: {seconds:8.1f} s (median of {len(runs)}; "
            f"target < 10 s), {seconds / SWEEP_CONFIGURATIONS * 1e3:.1f} ms per configuration-day"
        )
        print(f"    fleet-days simulated for them (shared where decisions agree): {runs[0]['fleet_days']:8.1f}")
        print(
            f"    ratio reference / sweep per configuration-day:  "
            f"{ref_s / (seconds / SWEEP_CONFIGURATIONS):8.0f}x   (target >= 25x)"
        )
        print(f"    peak memory of that sweep process (max RSS):   {rss:8.2f} GiB   (target < 2 GiB)")
        alone = _child(f"sweep_child({name!r}, distinct_fleets={DISTINCT_FLEETS})")
        print(
            f"    {DISTINCT_FLEETS} configurations with a fleet each (nothing shared), 2 threads: "
            f"{alone['seconds']:6.1f} s, {alone['seconds'] / DISTINCT_FLEETS * 1e3:.1f} ms per configuration-day"
        )
        node_pair(name)
    days = traces()
    cron_name = "azure" if "azure" in days else "synthetic"
    cron_case(cron_name, days[cron_name])
    forecast_case(cron_name, days[cron_name])
    week_case()


def prefill_traces() -> dict[str, RequestTrace]:
    """The synthetic day and, with the shared corpus, Mooncake's conversation hour stretched to a day."""
    from tests.conftest import SHARED_DIR

    found = {"synthetic": diurnal_trace(DAY_S, 1.0, seed=1)}
    mooncake = SHARED_DIR / "traces" / "mooncake_conversation_trace.jsonl"
    if mooncake.is_file():
        from planner.readers.trace import read_trace
        from planner.simulate.traffic import stretch_trace

        found["mooncake"] = stretch_trace(read_trace(mooncake), 0)
    return found


def prefill_pair(repeat: int = 5) -> None:
    """One configuration x 24 h through the fast engine, prefill off and chunked; medians and their ratios.

    Prefill's GPU time makes the fleet larger (more replica-ticks to simulate),
    so the time per replica-hour is printed too: the chunked path's own cost.
    The ScaledObject may go to 64 replicas, so Mooncake's day is served either way.
    """
    chunked = FleetSpec(warmup_s=60.0)
    off = dataclasses.replace(chunked, replica=dataclasses.replace(chunked.replica, prefill_ms_per_token=0.0))
    so = autoscaler(20.0, max_replicas=64)
    print("  chunked prefill, 1 configuration x 24 h at 1 s ticks, fast engine (sweep mode):")
    for name, day in prefill_traces().items():
        times, per_replica_hour = {}, {}
        for label, fleet in (("prefill off", off), ("chunked", chunked)):

            def run(d=day, f=fleet):
                return fast.simulate_many(
                    d, [fast.Configuration(so, f)], duration_s=DAY_S, timeseries=False, per_request=False
                )

            outcome = run()[0]  # compile the path once
            times[label] = median_s(run, repeat)
            per_replica_hour[label] = times[label] / (outcome.gpu_hours / fleet.gpus_per_replica)
            print(
                f"    {name} day ({len(day):,} requests, mean prompt {day.input_tokens.mean():,.0f} tokens), "
                f"{label + ':':12} {times[label]:7.3f} s, {per_replica_hour[label] * 1e3:6.2f} ms per replica-hour, "
                f"attainment {outcome.slo_attainment_frac:.3f}, {outcome.gpu_hours:.0f} GPU-hours"
            )
        print(
            f"    {name} day, ratio chunked / off: {times['chunked'] / times['prefill off']:6.2f}x wall, "
            f"{per_replica_hour['chunked'] / per_replica_hour['prefill off']:6.2f}x per replica-hour"
        )


def node_pair(name: str) -> None:
    """The 1,000-configuration sweep without and with a node pool, alternated run by run; medians and their ratio."""
    runs: dict[bool, list[dict]] = {False: [], True: []}
    for _ in range(NODE_PAIR_RUNS.get(name, 1)):
        for nodes in (False, True):
            runs[nodes].append(_child(f"sweep_child({name!r}, nodes={nodes})"))
    without_s, with_s = (statistics.median(r["seconds"] for r in runs[nodes]) for nodes in (False, True))
    cpu_without_s, cpu_with_s = (statistics.median(r["cpu_seconds"] for r in runs[nodes]) for nodes in (False, True))
    count = len(runs[True])
    print(f"    {SWEEP_CONFIGURATIONS:,} configurations x 24 h, 2 threads, without and with a node pool (nodes:):")
    for nodes, label in ((False, "without nodes:"), (True, "with nodes:   ")):
        each = ", ".join(f"{r['seconds']:.1f}" for r in runs[nodes])
        first = runs[nodes][0]
        print(
            f"      {label} {(with_s if nodes else without_s):8.1f} s wall (median of {count}; runs {each} s), "
            f"{(cpu_with_s if nodes else cpu_without_s):6.1f} s CPU, fleet-days simulated "
            f"{first['fleet_days']:.1f}, compiled kernels: {first['compiled']}"
        )
    # CPU time too: on a shared machine the wall clock also counts the time others hold the cores.
    print(f"      ratio with / without, wall: {with_s / without_s:6.2f}x   (target <= 1.5x)")
    print(f"      ratio with / without, CPU:  {cpu_with_s / cpu_without_s:6.2f}x")


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(description="The fleet simulator's benchmarks (all, or one case).")
    parser.add_argument(
        "--only",
        choices=["week", "forecast"],
        help="run one case: week (the week-long 1,000-configuration sweep), forecast (the forecast triggers' day)",
    )
    parser.add_argument("--runs", type=int, default=WEEK_RUNS, help="local runs of the week's sweep (median)")
    args = parser.parse_args()
    if args.only == "week":
        week_case(args.runs)
    elif args.only == "forecast":
        days = traces()
        name = "azure" if "azure" in days else "synthetic"
        forecast_case(name, days[name])
    else:
        main()
