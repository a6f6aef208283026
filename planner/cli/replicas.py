"""`planner replicas`: replicas and headroom from arrivals, duration, knee and target."""

from __future__ import annotations

import argparse

from planner.capacity.headroom import (
    backlog_requests,
    fleet_capacity_rps,
    replicas_for_step,
    step_frac,
    step_headroom_frac,
    target_for_step,
)
from planner.capacity.littles_law import (
    drain_rate_rps,
    in_flight_requests,
    per_replica_load,
    replicas_for_target,
)
from planner.cli.output import print_json, print_table
from planner.errors import PlannerInputError

# The maths' parameter names, as the flags that feed them (for error messages).
PARAMETER_FLAGS = {
    "arrival_rate_rps": "--arrival-rate-rps",
    "time_in_system_s": "--duration-s",
    "request_duration_s": "--duration-s",
    "per_replica_target": "--target",
    "target_concurrency": "--target",
    "knee_concurrency": "--knee",
    "concurrency": "--knee",
    "step_arrival_rate_rps": "--step-arrival-rate-rps",
    "duration_s": "--warmup-s",
}


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "replicas",
        help="replicas for an arrival rate (Little's law), headroom and warmup backlog",
        description=(
            "In-flight requests = arrival rate x time in system; replicas = ceil(in flight / "
            "per-replica target). With --step-arrival-rate-rps, also the backlog a warmup leaves "
            "and the target that would absorb the step."
        ),
    )
    parser.add_argument("--arrival-rate-rps", type=float, required=True, help="arrival rate [requests/s]")
    parser.add_argument("--duration-s", type=float, required=True, help="mean time in system per request [s]")
    parser.add_argument("--knee", type=float, required=True, help="per-replica knee from the load test [requests]")
    parser.add_argument("--target", type=float, help="per-replica concurrency target (default: the knee) [requests]")
    parser.add_argument("--step-arrival-rate-rps", type=float, help="arrival rate after a sudden step [requests/s]")
    parser.add_argument("--warmup-s", type=float, default=0.0, help="pod scheduled to Ready [s]")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    target = args.target if args.target is not None else args.knee
    if args.target is not None and args.knee > 0 and target > args.knee:
        raise PlannerInputError(
            f"--target {target:g} is above --knee {args.knee:g}: replicas held above the knee miss "
            "their latency objectives; choose a target at or below the knee"
        )
    in_flight = in_flight_requests(args.arrival_rate_rps, args.duration_s)
    replicas = replicas_for_target(in_flight, target)
    result = {
        "in_flight_requests": in_flight,
        "replicas": replicas,
        "per_replica_load": per_replica_load(in_flight, replicas),
        "step_headroom_frac": step_headroom_frac(args.knee, target),
        "drain_rate_rps": drain_rate_rps(args.knee, args.duration_s),
    }
    if args.step_arrival_rate_rps is not None:
        step = step_frac(args.arrival_rate_rps, args.step_arrival_rate_rps)
        capacity = fleet_capacity_rps(replicas, result["drain_rate_rps"])
        result |= {
            "step_frac": step,
            "backlog_requests": backlog_requests(args.step_arrival_rate_rps, capacity, args.warmup_s),
            "target_for_step": target_for_step(args.knee, step),
            "replicas_for_step": replicas_for_step(in_flight, args.knee, step),
        }
    if args.json:
        print_json(result)
    else:
        print_table([(key.replace("_", " "), value) for key, value in result.items()])
    return 0
