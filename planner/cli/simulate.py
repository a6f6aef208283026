"""``planner simulate``: replay a request trace through a vLLM fleet scaled by a manifest's autoscaler.

Usage::

    planner simulate --trace TRACE --manifest FILE.yaml [--fleet FLEET.yaml]
                     [--trace-format FORMAT] [--trace-model NAME] [--trace-series INDEX|LABELS]
                     [--engine fast|reference] [--duration-s N] [--stretch-day | --stretch-days N] [--seed N]
                     [--start ISO] [--timeseries OUT.csv] [--json]

``TRACE`` is any trace :func:`planner.readers.trace.read_trace` reads: the canonical
CSV (a header ``arrival_s,input_tokens,output_tokens`` and one request per row,
sorted by arrival), Azure, BurstGPT, a rate trace, Mooncake JSONL, a Prometheus
``query_range`` export or a scenario (see :mod:`planner.cli.traffic`).

``--start`` puts the trace's time 0 on the calendar (default Monday 2024-01-01 00:00 UTC);
only KEDA cron triggers read it.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from datetime import UTC, datetime
from pathlib import Path

from planner.cli.output import print_json, print_table, write_text_atomically
from planner.cli.traffic import add_traffic_arguments, read_traffic
from planner.errors import PlannerInputError
from planner.readers.fleet import read_fleet
from planner.readers.manifest import load_autoscaler
from planner.simulate import ENGINES, simulate
from planner.simulate.fleet import FleetSpec

HELP = "replay a request trace through a simulated vLLM fleet driven by the manifest's autoscaler"


def add_replay_arguments(parser: argparse.ArgumentParser) -> None:
    """The inputs every replay takes: trace, manifest (and which autoscaler), fleet, duration."""
    add_traffic_arguments(parser)
    parser.add_argument(
        "--manifest",
        required=True,
        metavar="FILE.yaml",
        help="YAML with an autoscaling/v2 HorizontalPodAutoscaler or a keda.sh ScaledObject",
    )
    parser.add_argument("--name", metavar="NAME", help="which autoscaler, when the file holds several")
    parser.add_argument("--fleet", metavar="FLEET.yaml", help="replica and fleet parameters (defaults otherwise)")
    parser.add_argument(
        "--duration-s", type=float, metavar="N", help="simulated time; default: the last arrival plus 120 s [s]"
    )
    add_start_argument(parser)


def add_start_argument(parser: argparse.ArgumentParser) -> None:
    """``--start``: the wall-clock time of the trace's time 0."""
    parser.add_argument(
        "--start",
        metavar="ISO",
        help="the date and time the trace starts, e.g. 2024-06-03T08:00 (UTC unless it carries an offset, "
        "such as +01:00); KEDA cron triggers read it (default: Monday 2024-01-01 00:00 UTC)",
    )


def parse_start(text: str) -> float:
    """``--start`` as UTC epoch seconds: an ISO date, or date and time, read as UTC unless it has an offset.

    Raises
    ------
    PlannerInputError
        Naming ``--start`` and the form expected.
    """
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise PlannerInputError(
            f"--start: expected an ISO date and time such as 2024-06-03T08:00 or 2024-06-03T08:00+01:00, got {text!r}"
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def with_start(fleet: FleetSpec, start: str | None) -> FleetSpec:
    """``fleet`` with the wall-clock start ``--start`` gives (unchanged without one)."""
    if start is None:
        return fleet
    return dataclasses.replace(fleet, start_epoch_s=parse_start(start))


def read_replay_inputs(args: argparse.Namespace):
    """Check ``--duration-s`` and read the trace, the autoscaler and the fleet the flags name."""
    if args.duration_s is not None and not (math.isfinite(args.duration_s) and args.duration_s > 0):
        raise PlannerInputError(f"--duration-s: expected a number > 0, got {args.duration_s}")
    fleet = with_start(read_fleet(args.fleet) if args.fleet else FleetSpec(), args.start)
    trace, _ = read_traffic(args)
    autoscaler = load_autoscaler(args.manifest, args.name)
    return trace, autoscaler, fleet


def register(subparsers) -> None:
    """Add the ``simulate`` subcommand."""
    parser = subparsers.add_parser(
        "simulate",
        help=HELP,
        description=(
            "Replay a request trace through a model of a vLLM fleet (continuous batching, KV cache, "
            "cold starts, drain) whose replica count is decided by the manifest's HPA or KEDA "
            "ScaledObject, through the planner's exact port of the controllers. Reports SLO "
            "attainment, GPU cost, scale events and flapping."
        ),
    )
    add_replay_arguments(parser)
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="fast",
        help="simulation engine: fast (default) or reference (the readable specification); same results",
    )
    parser.add_argument("--timeseries", metavar="OUT.csv", help="write the per-tick time series here")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    trace, autoscaler, fleet = read_replay_inputs(args)
    if args.timeseries:
        out_path = Path(args.timeseries)
        for given in (args.trace, args.manifest, args.fleet):
            if given and Path(given).resolve() == out_path.resolve():
                raise PlannerInputError(f"--timeseries {out_path}: would overwrite an input file")
        if out_path.is_dir():
            raise PlannerInputError(f"--timeseries {out_path}: is a directory; expected a file name")
        if not out_path.parent.resolve().is_dir():
            raise PlannerInputError(f"--timeseries {out_path}: folder {out_path.parent} does not exist")
    outcome = simulate(trace, autoscaler, fleet, engine=args.engine, duration_s=args.duration_s)
    if args.timeseries:
        write_text_atomically(Path(args.timeseries), outcome.timeseries.to_csv(index=False))
    summary = outcome.summary()
    if args.json:
        print_json(
            {
                "trace": str(args.trace),
                "manifest": autoscaler.source,
                "start": datetime.fromtimestamp(fleet.start_epoch_s, UTC).isoformat(),
                **summary,
                "events": [{"t_s": t, "from": a, "to": b} for t, a, b in outcome.events],
            }
        )
    else:
        print_table(list(summary.items()), title=f"{autoscaler.kind} {autoscaler.name} on {args.trace}")
    return 0
