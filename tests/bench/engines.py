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

The first call of a compiled kernel compiles it (or loads it from numba's
cache); it is made once before any timing and reported on its own.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import numpy as np

from planner.keda import ScaledObjectSpec, Trigger, hpa_for_scaled_object
from planner.readers.manifest import Autoscaler
from planner.simulate import fast, reference
from planner.simulate.fleet import FleetSpec
from planner.simulate.traffic import RequestTrace

DAY_S = 86_400.0
IN_FLIGHT = "sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)"
SWEEP_CONFIGURATIONS = 1000
# Runs of the 1,000-configuration sweep per traffic day (the real-trace day takes minutes per run).
SWEEP_RUNS = {"synthetic": 3, "azure": 1}


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
    from planner.behavior import HorizontalPodAutoscalerBehavior, HPAScalingRules

    behavior = None
    if down_window_s is not None:
        behavior = HorizontalPodAutoscalerBehavior(
            scale_down=HPAScalingRules(stabilization_window_seconds=down_window_s))
    so = ScaledObjectSpec("bench", (Trigger(0, "prometheus", target, query=IN_FLIGHT),), min_replica_count=1,
                          max_replica_count=max_replicas, polling_interval_s=15.0, behavior=behavior)
    return Autoscaler("ScaledObject", "bench", "bench", hpa_for_scaled_object(so), so)


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


SWEEP_GRID = {"target": [round(float(t), 4) for t in np.linspace(2.0, 40.0, 25)],
              "scale_down_window_s": [0, 60, 300, 600, 900], "warmup_s": [30.0, 60.0, 120.0, 240.0],
              "max_replicas": [8, 16]}  # 25 x 5 x 4 x 2 = 1,000 configurations


def sweep_child(trace_name: str) -> None:
    """Run the 1,000-configuration sweep as ``planner sweep`` does, in this (fresh) process; print JSON.

    The sweep is :func:`planner.cli.sweep.run_sweep` on two threads over
    :data:`SWEEP_GRID`: each configuration keeps its summary only, so the
    peak memory is that of a real sweep.
    """
    import resource

    from planner.cli.sweep import run_sweep
    from planner.simulate.sweep import expand_grid

    trace = traces()[trace_name]
    points = expand_grid(SWEEP_GRID)
    base = autoscaler(20.0, down_window_s=300)
    fast.simulate_many(trace, [fast.Configuration(base, FleetSpec())], duration_s=3600.0,
                       timeseries=False)  # compile, or load the cache
    start = time.perf_counter()
    results = run_sweep(trace, base, FleetSpec(), points, duration_s=DAY_S, progress=False, workers=2)
    elapsed = time.perf_counter() - start
    print(json.dumps({"seconds": elapsed, "configurations": len(results),
                      "peak_rss_gib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
                      "compiled": fast.covers(base, FleetSpec())}))


def main(repeat: int = 5) -> None:
    print("\nfleet simulator engines (wall clock on this machine; medians of repeats)")
    fleet = FleetSpec(warmup_s=60.0)
    so = autoscaler(20.0)
    start = time.perf_counter()
    fast.simulate(diurnal_trace(600.0, 1.0, seed=3), so, fleet, duration_s=600.0)
    print(f"  first fast call (numba compile, or load from its cache): {time.perf_counter() - start:6.1f} s")
    for name, day in traces().items():
        print(f"  {name} day: {len(day):,} requests")
        fast_s = median_s(lambda d=day: fast.simulate(d, so, fleet, duration_s=DAY_S), repeat)
        print(f"    fast, 1 configuration x 24 h at 1 s ticks:      {fast_s:8.3f} s   (target < 0.2 s)")
        lean_s = median_s(lambda d=day: fast.simulate_many(d, [fast.Configuration(so, fleet)], duration_s=DAY_S,
                                                           timeseries=False), repeat)
        print(f"    the same without the time series (sweep mode): {lean_s:8.3f} s")
        ref_s = median_s(lambda d=day: reference.simulate(d, so, fleet, duration_s=DAY_S), 1)
        print(f"    reference, 1 configuration x 24 h (one run):   {ref_s:8.1f} s")
        print(f"    ratio reference / fast per configuration-day:  {ref_s / lean_s:8.0f}x   (target >= 25x)")
        runs = [json.loads(subprocess.run(
            [sys.executable, "-c", f"from tests.bench.engines import sweep_child; sweep_child({name!r})"],
            check=True, capture_output=True, text=True).stdout)
            for _ in range(SWEEP_RUNS.get(name, 1))]
        seconds = statistics.median(r["seconds"] for r in runs)
        rss = max(r["peak_rss_gib"] for r in runs)
        print(f"    {SWEEP_CONFIGURATIONS:,} configurations x 24 h, 2 threads: {seconds:8.1f} s (median of {len(runs)}; "
              f"target < 10 s), {seconds / SWEEP_CONFIGURATIONS * 1e3:.1f} ms per configuration-day")
        print(f"    peak memory of that sweep process (max RSS):   {rss:8.2f} GiB   (target < 2 GiB)")


if __name__ == "__main__":
    main()
