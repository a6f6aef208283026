"""Benchmarks of the fleet simulator's engines and of a sweep, time-bounded for a 2-core machine.

Targets (issue 9): 24 h of traffic at 1 s ticks through the exact controller
with the fast engine in under 0.2 s; 1,000 configurations x 24 h in under
10 s and at least 25x the reference engine per configuration-day; peak
memory of that sweep under 2 GiB. A full 1,000 x 24 h sweep takes hours at
the speeds measured here, so it is not run: its time is extrapolated from a
measured chunk (configurations x hours), and the extrapolation is labelled
as one. Each figure is the median of the repeats; nothing is asserted.
"""

from __future__ import annotations

import resource
import statistics
import time
import tracemalloc
from collections.abc import Callable

import numpy as np

from planner.keda import ScaledObjectSpec, Trigger, hpa_for_scaled_object
from planner.readers.manifest import Autoscaler
from planner.simulate import fast, reference
from planner.simulate.fleet import FleetSpec
from planner.simulate.sweep import expand_grid, run_chunk
from planner.simulate.traffic import RequestTrace

DAY_S = 86_400.0
IN_FLIGHT = "sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)"


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


def autoscaler(target: float) -> Autoscaler:
    so = ScaledObjectSpec("bench", (Trigger(0, "prometheus", target, query=IN_FLIGHT),), min_replica_count=1,
                          max_replica_count=16, polling_interval_s=15.0)
    return Autoscaler("ScaledObject", "bench", "bench", hpa_for_scaled_object(so), so)


def median_s(func: Callable[[], object], repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        start = time.perf_counter()
        func()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def main(repeat: int = 3) -> None:
    print("\nfleet simulator engines (median of repeats; wall clock on this machine)")
    fleet = FleetSpec(warmup_s=60.0)
    day = diurnal_trace(DAY_S, 1.0, seed=1)
    hour = diurnal_trace(3600.0, 1.0, seed=2)

    # 1. One configuration, 24 h at 1 s ticks, fast engine.
    day_fast_s = median_s(lambda: fast.simulate(day, autoscaler(20.0), fleet, duration_s=DAY_S), 1)
    print(f"  fast, 1 configuration x 24 h ({len(day)} requests): {day_fast_s:8.2f} s   (target < 0.2 s)")

    # 2. Per configuration-hour: reference one at a time vs fast in lockstep (8 configurations).
    targets = [5.0, 10.0, 15.0, 20.0, 25.0, 30.0, 35.0, 40.0]
    configs = [fast.Configuration(autoscaler(t), fleet) for t in targets]
    ref_s = median_s(lambda: reference.simulate(hour, configs[0].autoscaler, fleet, duration_s=3600.0), repeat)
    fast_many_s = median_s(lambda: fast.simulate_many(hour, configs, duration_s=3600.0), repeat) / len(configs)
    print(f"  reference, per configuration-hour:               {ref_s:8.3f} s")
    print(f"  fast (8 in lockstep), per configuration-hour:    {fast_many_s:8.3f} s")
    print(f"  ratio reference / fast per configuration-day:    {ref_s / fast_many_s:8.2f}x   (target >= 25x)")
    sweep_1000_day_s = fast_many_s * 24 * 1000
    print(f"  1,000 configurations x 24 h, extrapolated from the line above, one core: {sweep_1000_day_s:,.0f} s;"
          f" two Dask workers: {sweep_1000_day_s / 2:,.0f} s   (target < 10 s)")

    # 3. Peak memory of a sweep: chunks of 8 configurations, so the peak is one chunk's, whatever the grid size.
    points = expand_grid({"target": targets})
    tracemalloc.start()
    run_chunk(day, autoscaler(20.0), fleet, points[:8], DAY_S / 12)
    _, peak_bytes = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    peak_day_gib = peak_bytes / 2**30 * 12  # the state grows with simulated time; scaled to 24 h
    rss_gib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    print(f"  sweep chunk of 8 x 2 h: peak traced memory {peak_bytes / 2**20:,.0f} MiB; scaled to 24 h "
          f"{peak_day_gib:.2f} GiB per worker (target < 2 GiB); this process's max RSS {rss_gib:.2f} GiB")


if __name__ == "__main__":
    main()
