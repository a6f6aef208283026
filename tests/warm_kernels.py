"""Compile the fast engine's kernels into numba's on-disk cache, once per change of their sources.

``python -m tests.warm_kernels PART [PART ...]`` compiles the parts in order, in one process:

* ``engine``: the engine's kernels, as the engine and the book call them;
* ``lockstep``: the replica kernel on loose arrays, the trace's read-only, as the lockstep engine
  serves with it (what the kernels do not cover);
* ``loose``: those the differential tests call on loose arrays (the decision kernel inside another
  kernel, which is the engine's own decision kernel, and the replica kernel, which is the lockstep
  engine's: the test passes the trace's arrays read-only too);
* ``steps``: the engine's step kernels, one by one, as the tick-by-tick twins test calls them.

`make warm-kernels` (and `make test`, beside `make lint`) runs two processes: ``engine``, and
``loose steps lockstep``. The engine's part takes longest (about two minutes of one core); the other
process compiles the decision kernel within its first half minute, so the engine's part reads that
from the cache instead of compiling it too. The book build runs ``engine`` beside ``loose lockstep``.

`planner/simulate/fast` keys the cache on the kernels' sources, so each part does next to nothing once
they are cached. Without this, on a fresh checkout both test workers would compile the same kernels
at the same time, for minutes of CPU, while the tests wait.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from planner.simulate import simulate
from planner.simulate.fast import lockstep
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


def lockstep_kernels() -> None:
    """The replica kernel on loose arrays, the trace's read-only, as the lockstep engine serves with it."""
    lockstep.simulate(diurnal_trace(600.0, 2.0, seed=1), autoscaler(8.0), FleetSpec(warmup_s=60.0))


def loose_kernels() -> None:
    """The kernels the differential tests call on loose arrays, each through one small case of its test."""
    from tests.simulate.fast import test_simulate_fast_decision, test_simulate_fast_replica

    # The decision kernel first: called with the engine's argument types, so it is the engine's own, and
    # the engine's part, compiling beside this one, finds it in the cache.
    with tempfile.TemporaryDirectory() as folder:
        test_simulate_fast_decision.test_the_kernel_runs_inside_another_kernel(Path(folder))
    test_simulate_fast_replica.test_a_replica_past_its_stop_does_nothing()


def step_kernels() -> None:
    """The engine's step kernels on their own, through a few ticks of the twins test's harness."""
    from tests.simulate.fast.test_simulate_fast_twins import FLEETS, Twins
    from tests.simulate_helpers import poisson_trace

    with tempfile.TemporaryDirectory() as folder:
        trace = poisson_trace(lambda t: 12.0, 30.0, 300, 160, seed=5)
        twins = Twins(Path(folder), next(iter(FLEETS.values())), trace, threshold=6)
        for k in range(20):
            twins.tick(k)


PARTS = {
    "engine": (engine_kernels, "fast engine kernels"),
    "lockstep": (lockstep_kernels, "the replica kernel the lockstep engine serves with"),
    "loose": (loose_kernels, "the differential tests' kernels on loose arrays"),
    "steps": (step_kernels, "the engine's step kernels on their own"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("parts", nargs="*", choices=list(PARTS), default=["engine"], help="what to compile, in order")
    args = parser.parse_args()
    for part in args.parts:
        started = time.perf_counter()
        compile_part, what = PARTS[part]
        compile_part()
        print(f"{what} compiled or read from the cache in {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
