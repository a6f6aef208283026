"""Compile the fast engine's kernels into numba's on-disk cache, once, in one process.

`make test` runs this beside `make lint` (`planner/simulate/fast` keys the cache on the kernels'
sources, so it does nothing once they are cached). Without it, on a fresh checkout both test
workers would compile the same kernels at the same time, each for about a minute of CPU.
"""

from __future__ import annotations

import time

from planner.simulate import simulate
from planner.simulate.fleet import FleetSpec
from planner.simulate.replica import ReplicaSpec
from planner.simulate.sweep import expand_grid, run_sweep
from tests.bench.engines import NODE_FLEET, autoscaler, cron_autoscaler, diurnal_trace


def main() -> None:
    started = time.perf_counter()
    hour = diurnal_trace(3600.0, 2.0, seed=1)
    # A metric trigger, cron floors beside it, a node pool, prefill off: each compiles its own paths.
    simulate(hour, autoscaler(8.0), FleetSpec(warmup_s=60.0))
    simulate(hour, cron_autoscaler(8.0), FleetSpec(warmup_s=60.0))
    simulate(hour, autoscaler(8.0), NODE_FLEET)
    simulate(hour, autoscaler(8.0), FleetSpec(warmup_s=60.0, replica=ReplicaSpec(prefill_ms_per_token=0.0)))
    # A sweep runs the kernels without time series.
    points = expand_grid({"target": [6.0, 8.0]})
    run_sweep(hour, autoscaler(8.0), FleetSpec(warmup_s=60.0), points, progress=False, workers=1)
    print(f"fast engine kernels compiled or read from the cache in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
