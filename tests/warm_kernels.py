"""Compile the fast engine's kernels into numba's on-disk cache, once per change of their sources.

`make test` runs ``python -m tests.warm_kernels`` (the engine's kernels, as the engine and the book
call them) and ``python -m tests.warm_kernels --tests`` (the kernels the differential tests call on
their own: the replica on loose arrays, the step kernels one by one, the decision kernel inside
another kernel) beside `make lint`, three processes on two cores. `planner/simulate/fast` keys the
cache on the kernels' sources, so both do nothing once the kernels are cached. Without them, on a
fresh checkout both test workers would compile the same kernels at the same time, each for minutes
of CPU, while the tests wait.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from planner.simulate import simulate
from planner.simulate.fleet import FleetSpec
from planner.simulate.replica import ReplicaSpec
from planner.simulate.sweep import expand_grid, run_sweep
from tests.bench.engines import NODE_FLEET, autoscaler, cron_autoscaler, diurnal_trace


def engine_kernels() -> None:
    """The engine's kernels, through the calls the engine makes."""
    hour = diurnal_trace(3600.0, 2.0, seed=1)
    # A metric trigger, cron floors beside it, a node pool, prefill off: each compiles its own paths.
    simulate(hour, autoscaler(8.0), FleetSpec(warmup_s=60.0))
    simulate(hour, cron_autoscaler(8.0), FleetSpec(warmup_s=60.0))
    simulate(hour, autoscaler(8.0), NODE_FLEET)
    simulate(hour, autoscaler(8.0), FleetSpec(warmup_s=60.0, replica=ReplicaSpec(prefill_ms_per_token=0.0)))
    # A sweep runs the kernels without time series.
    points = expand_grid({"target": [6.0, 8.0]})
    run_sweep(hour, autoscaler(8.0), FleetSpec(warmup_s=60.0), points, progress=False, workers=1)


def test_kernels() -> None:
    """The kernels the differential tests call on their own, each through one small case of its test.

    The decision kernel's own compile is shared with the engine's process: the step kernels (which call
    it with the engine's types) come last, by when that process has usually cached it.
    """
    from tests.simulate.fast import test_simulate_fast_decision, test_simulate_fast_replica
    from tests.simulate.fast.test_simulate_fast_twins import FLEETS, Twins
    from tests.simulate_helpers import poisson_trace

    test_simulate_fast_replica.test_a_replica_past_its_stop_does_nothing()
    with tempfile.TemporaryDirectory() as folder:
        test_simulate_fast_decision.test_the_kernel_runs_inside_another_kernel(Path(folder))
    with tempfile.TemporaryDirectory() as folder:
        trace = poisson_trace(lambda t: 12.0, 30.0, 300, 160, seed=5)
        twins = Twins(Path(folder), next(iter(FLEETS.values())), trace, threshold=6)
        for k in range(20):
            twins.tick(k)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tests", action="store_true", help="the kernels the differential tests call on their own")
    args = parser.parse_args()
    started = time.perf_counter()
    (test_kernels if args.tests else engine_kernels)()
    which = "the differential tests' own kernels" if args.tests else "fast engine kernels"
    print(f"{which} compiled or read from the cache in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
