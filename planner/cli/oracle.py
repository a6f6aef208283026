"""``planner oracle``: the least any autoscaler can cost on a trace while meeting an attainment goal.

Usage::

    planner oracle --trace TRACE [--fleet FLEET.yaml] [--attainment-goal F] [--duration-s N]
                   [--trace-format FORMAT] [--stretch-day | --stretch-days N] [--seed N] [--json]

Prints two lower bounds (:mod:`planner.simulate.oracle`): with instant scaling and perfect
foresight, and with perfect foresight but the fleet's real cold start; for each, GPU-hours, cost and
the replicas some moment must have; and how they were computed.
"""

from __future__ import annotations

import argparse
import math

from planner.cli.output import print_json, print_table
from planner.cli.traffic import add_traffic_arguments, read_traffic
from planner.errors import PlannerInputError
from planner.readers.fleet import read_fleet
from planner.simulate.fleet import FleetSpec
from planner.simulate.oracle import how_computed_text, oracle_bound

HELP = "the least GPU-hours and cost any autoscaler needs to meet an attainment goal on a trace"
DEFAULT_ATTAINMENT_GOAL = 0.99


def register(subparsers) -> None:
    """Add the ``oracle`` subcommand."""
    parser = subparsers.add_parser(
        "oracle",
        help=HELP,
        description=(
            "Lower bounds on the GPU-hours and cost of any autoscaler configuration that meets the attainment "
            "goal on this traffic and fleet, as the simulator counts them: (a) with instant scaling and perfect "
            "foresight, (b) with perfect foresight but the fleet's shortest cold start. No configuration "
            "planner simulate or planner sweep replays can cost less."
        ),
    )
    add_traffic_arguments(parser)
    parser.add_argument("--fleet", metavar="FLEET.yaml", help="replica and fleet parameters (defaults otherwise)")
    parser.add_argument(
        "--attainment-goal",
        type=float,
        default=DEFAULT_ATTAINMENT_GOAL,
        metavar="F",
        help=f"share of requests that must meet the objective, a fraction (default {DEFAULT_ATTAINMENT_GOAL})",
    )
    parser.add_argument(
        "--duration-s", type=float, metavar="N", help="simulated time; default: the last arrival plus 120 s [s]"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    goal = args.attainment_goal
    if not (math.isfinite(goal) and 0.0 <= goal <= 1.0):
        raise PlannerInputError(f"--attainment-goal: expected a fraction between 0 and 1, got {goal}")
    if args.duration_s is not None and not (math.isfinite(args.duration_s) and args.duration_s > 0):
        raise PlannerInputError(f"--duration-s: expected a number > 0, got {args.duration_s}")
    trace, _ = read_traffic(args)
    fleet = read_fleet(args.fleet) if args.fleet else FleetSpec()
    bound = oracle_bound(trace, fleet, goal, duration_s=args.duration_s)
    how = how_computed_text(bound)
    if args.json:
        print_json({"trace": str(args.trace), "fleet": args.fleet, **bound.summary(), "how_computed": how})
        return 0
    rows: list[tuple[str, object]] = [
        ("requests", bound.requests),
        ("may miss the objective", bound.missed_requests),
        ("cannot meet it in any run", bound.impossible_requests),
    ]
    if not bound.reachable:
        print_table(rows, title=f"Oracle for {goal:.4f} attainment on {args.trace}")
        print("No configuration can reach this goal: more requests cannot meet the objective than may miss it.")
        return 0
    for name, cost in (("instant scaling", bound.instant), ("cold start", bound.cold_start)):
        rows += [
            (f"{name}: GPU-hours", cost.gpu_hours),
            (f"{name}: cost [$]", cost.cost_usd),
            (f"{name}: peak replicas at least", cost.peak_replicas),
        ]
    rows.append(("shortest cold start [s]", bound.cold_start_s))
    if bound.node_cold_start_s is not None:
        rows.append(("shortest new-node cold start [s]", bound.node_cold_start_s))
    print_table(rows, title=f"Oracle for {goal:.4f} attainment on {args.trace}")
    print()
    print(how)
    return 0
