"""``planner sweep``: replay one trace through a grid of autoscaler settings and show the trade-off.

Usage::

    planner sweep --trace TRACE --manifest FILE.yaml --grid GRID.yaml [--fleet FLEET.yaml]
                  [--attainment-goal F] [--max-flap-cycles N] [--stretch-day | --stretch-days N] [--seed N]
                  [--start ISO] [--scheduler ADDRESS [--connect-timeout-s S]] [--json]

GRID.yaml maps grid keys to lists of values (the keys are documented in
:mod:`planner.simulate.sweep`)::

    target: [5, 10, 20]
    min_replicas: [1, 2]
    scale_down_window_s: [60, 300]
    warmup_s: [60]

The sweep runs in chunks of configurations, each chunk simulated by the
``fast`` engine, which simulates the fleet of configurations that differ
only in their autoscaler once for as long as their decisions agree; so, by
default, a chunk keeps such configurations together, and the points are cut
into two chunks per worker thread. With ``--scheduler tcp://HOST:8786`` (or a
``dask.distributed.Client`` passed to :func:`planner.simulate.sweep.run_sweep`) the chunks run on a
Dask cluster; each chunk's result is kept under its chunk number and taken
once, so a worker lost mid-sweep costs only the recomputation of its chunks.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import yaml

from planner.cli.output import print_json, print_table
from planner.cli.simulate import add_replay_arguments, read_replay_inputs
from planner.errors import PlannerInputError
from planner.simulate.sweep import (
    CHUNKS_PER_THREAD,
    SweepPoint,
    expand_grid,
    run_sweep,
    summarize,
    with_regret,
)

HELP = "search a grid of autoscaler settings for the cost-attainment trade-off"
DEFAULT_ATTAINMENT_GOAL = 0.99
DEFAULT_CONNECT_TIMEOUT_S = 10.0  # distributed.Client's own default is 30 s; a wrong address should fail sooner


def register(subparsers) -> None:
    """Add the ``sweep`` subcommand."""
    parser = subparsers.add_parser(
        "sweep",
        help=HELP,
        description=(
            "Replay a request trace through every combination of a grid of autoscaler settings "
            "(signal, target, min/max, stabilization windows, policies, warmup), with the fast "
            "engine, and report the cost-attainment Pareto front and the cheapest configuration "
            "meeting the attainment goal. Runs on a Dask cluster with --scheduler."
        ),
    )
    add_replay_arguments(parser)
    parser.add_argument("--grid", required=True, metavar="GRID.yaml", help="grid keys -> lists of values")
    parser.add_argument(
        "--attainment-goal",
        type=float,
        default=DEFAULT_ATTAINMENT_GOAL,
        metavar="F",
        help=f"SLO attainment to meet, a fraction (default {DEFAULT_ATTAINMENT_GOAL})",
    )
    parser.add_argument(
        "--max-flap-cycles",
        type=int,
        metavar="N",
        help="the cheapest configuration may flap at most N times over the trace "
        "(a scale-up after a scale-down); default: no limit",
    )
    parser.add_argument("--scheduler", metavar="ADDRESS", help="Dask scheduler, e.g. tcp://10.0.0.5:8786")
    parser.add_argument(
        "--connect-timeout-s",
        type=float,
        default=DEFAULT_CONNECT_TIMEOUT_S,
        metavar="S",
        help=f"give up reaching --scheduler after S seconds (default {DEFAULT_CONNECT_TIMEOUT_S:g})",
    )
    parser.add_argument(
        "--chunk-size",
        type=int,
        metavar="N",
        help="configurations per chunk of work (default: configurations that can share a "
        f"simulated fleet kept together, {CHUNKS_PER_THREAD} chunks per worker thread)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def read_grid(path: str | Path) -> list[SweepPoint]:
    """Read GRID.yaml into the sweep's points, naming the file and key of any problem."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise PlannerInputError(f"{path}: not valid YAML ({error.__class__.__name__})") from None
    return expand_grid(data, str(path))


def run(args: argparse.Namespace) -> int:
    goal = args.attainment_goal
    if not (math.isfinite(goal) and 0.0 <= goal <= 1.0):
        raise PlannerInputError(f"--attainment-goal: expected a fraction between 0 and 1, got {goal}")
    if args.max_flap_cycles is not None and args.max_flap_cycles < 0:
        raise PlannerInputError(f"--max-flap-cycles: expected an integer >= 0, got {args.max_flap_cycles}")
    if not (math.isfinite(args.connect_timeout_s) and args.connect_timeout_s > 0.0):
        raise PlannerInputError(f"--connect-timeout-s: expected a number of seconds > 0, got {args.connect_timeout_s}")
    points = read_grid(args.grid)
    trace, autoscaler, fleet = read_replay_inputs(args)
    client = None
    if args.scheduler:
        try:
            from distributed import Client
        except ImportError:
            raise PlannerInputError("--scheduler needs dask.distributed: pip install 'planner[cluster]'") from None
        try:
            client = Client(args.scheduler, timeout=args.connect_timeout_s)
        except OSError as error:
            raise PlannerInputError(
                f"--scheduler {args.scheduler}: cannot reach the Dask scheduler within "
                f"{args.connect_timeout_s:g} s ({error})"
            ) from None
    try:
        results = run_sweep(
            trace,
            autoscaler,
            fleet,
            points,
            duration_s=args.duration_s,
            client=client,
            chunk_size=args.chunk_size,
            progress=not args.json,
        )
    finally:
        if client is not None:
            client.close()
    oracle_usd, results = with_regret(trace, autoscaler, fleet, points, results, goal, duration_s=args.duration_s)
    summary = summarize(results, goal, args.max_flap_cycles, oracle_cost_usd=oracle_usd)
    if args.json:
        print_json({"trace": str(args.trace), "manifest": autoscaler.source, **summary})
        return 0
    best = summary["cheapest_meeting_goal"]
    print_table(
        [
            (
                f"#{r['index']} {_label(r)}",
                f"{r['slo_attainment_frac']:.4f} attained, ${r['cost_usd']:.2f}{_regret(r)}, "
                f"{r['flap_cycles']} flap cycles",
            )
            for r in summary["pareto_front"]
        ],
        title=f"Pareto front of {len(results)} configurations ({autoscaler.kind} {autoscaler.name})",
    )
    if math.isfinite(oracle_usd):
        print(f"No setting can cost less than ${oracle_usd:.2f} at {goal:.4f} attainment (planner oracle).")
    else:
        print(f"No setting can reach {goal:.4f} attainment: too many requests cannot meet the objective.")
    limit = "" if args.max_flap_cycles is None else f" within {args.max_flap_cycles} flap cycles"
    if best is None:
        print(f"No configuration reaches {goal:.4f} attainment{limit}.")
    else:
        print(
            f"Cheapest meeting {goal:.4f}{limit}: #{best['index']} {_label(best)}: "
            f"{best['slo_attainment_frac']:.4f} attained, ${best['cost_usd']:.2f}, {best['flap_cycles']} flap cycles"
        )
    return 0


def _regret(result: dict) -> str:
    regret = result.get("regret_usd")
    return "" if regret is None else f" (${regret:.2f} over the oracle)"


def _label(result: dict) -> str:
    skip = {
        "index",
        "slo_attainment_frac",
        "cost_usd",
        "gpu_hours",
        "scale_events",
        "flap_cycles",
        "peak_replicas",
        "peak_waiting",
        "cut_generations",
        "regret_usd",
    }
    return " ".join(f"{k}={v}" for k, v in result.items() if k not in skip) or "(manifest as written)"
