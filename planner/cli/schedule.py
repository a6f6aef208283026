"""``planner schedule``: a weekly set of KEDA cron triggers beside a metric trigger, verified by replay.

Usage::

    planner schedule --trace TRACE --fleet FLEET.yaml [--manifest SCALEDOBJECT.yaml [--name NAME]]
                     [--stretch-day | --stretch-days N] [--seed N] [--start ISO] [--timezone ZONE]
                     [--goal F] [--max-rounds N] [--json] [--out FILE]

The trace flags (``--trace-format``, ``--weekend-drop-frac``, ...) are those of
:mod:`planner.cli.traffic`. Prints the ScaledObject (the metric trigger and one cron trigger per
window; the team's own with ``--manifest``, else the one ``planner manifests`` writes for the
fleet) and, as YAML comments after it so the output can be applied as is, the cost, GPU-hours and
attainment of the schedule with the metric trigger, of the metric trigger alone and of the oracle's
bound, and what ``planner lint`` finds in it. The method is :func:`planner.workflows.schedule.make_schedule`.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from planner.cli.output import print_json, write_text_atomically
from planner.cli.simulate import add_start_argument, with_start
from planner.cli.traffic import add_traffic_arguments, read_traffic
from planner.errors import PlannerInputError
from planner.readers.fleet import read_fleet
from planner.readers.workload import read_manifest_set
from planner.workflows.plan import current_setup
from planner.workflows.schedule import (
    DEFAULT_ATTAINMENT_GOAL,
    DEFAULT_MAX_ROUNDS,
    DEFAULT_TIMEZONE,
    Schedule,
    make_schedule,
)

HELP = "derive weekly KEDA cron triggers (minimum replicas by weekday and hour) from traffic, verified by replay"


def register(subparsers) -> None:
    """Add the ``schedule`` subcommand."""
    parser = subparsers.add_parser(
        "schedule",
        help=HELP,
        description=(
            "From several days of traffic and the fleet's cold start, derive minimum replicas by weekday and hour "
            "(by hour of the day for less than a week), written as KEDA cron triggers that start a cold start "
            "early, beside the metric trigger; replay the ScaledObject as written and raise the minimums where "
            "requests miss until it meets the attainment goal. Prints the ScaledObject and its cost against the "
            "metric trigger alone and the oracle's bound."
        ),
    )
    add_traffic_arguments(parser)
    parser.add_argument("--fleet", required=True, metavar="FLEET.yaml", help="replica and fleet parameters")
    parser.add_argument(
        "--manifest",
        metavar="FILE.yaml",
        help="the team's KEDA ScaledObject: its triggers are the metric trigger, its cron triggers are replaced "
        "(default: the ScaledObject planner manifests writes for the fleet)",
    )
    parser.add_argument("--name", metavar="NAME", help="which ScaledObject, when the file holds several")
    parser.add_argument(
        "--goal",
        "--attainment-goal",
        dest="goal",
        type=float,
        default=DEFAULT_ATTAINMENT_GOAL,
        metavar="F",
        help=f"share of requests that must meet the objective, a fraction (default {DEFAULT_ATTAINMENT_GOAL})",
    )
    parser.add_argument(
        "--timezone",
        default=DEFAULT_TIMEZONE,
        metavar="ZONE",
        help=f"IANA zone of the hours and of every trigger, e.g. Europe/Dublin (default {DEFAULT_TIMEZONE})",
    )
    parser.add_argument(
        "--max-rounds",
        type=int,
        default=DEFAULT_MAX_ROUNDS,
        metavar="N",
        help=f"replays of the schedule at most, each raising the minimums where requests missed "
        f"(default {DEFAULT_MAX_ROUNDS})",
    )
    add_start_argument(parser)
    parser.add_argument("--out", metavar="FILE", help="write the ScaledObject here (never over an input)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    goal = args.goal
    if not (math.isfinite(goal) and 0.0 <= goal <= 1.0):
        raise PlannerInputError(f"--goal: expected a fraction between 0 and 1, got {goal}")
    if args.max_rounds < 1:
        raise PlannerInputError(f"--max-rounds: expected a whole number >= 1, got {args.max_rounds}")
    if args.name and not args.manifest:
        raise PlannerInputError("--name: picks a ScaledObject of --manifest, which is not given")
    out = _checked_out(args) if args.out else None
    fleet = with_start(read_fleet(args.fleet), args.start)
    metric = None
    if args.manifest:
        setup = current_setup(read_manifest_set([args.manifest]), args.name or "")
        if setup.autoscaler.kind != "ScaledObject":
            raise PlannerInputError(
                f"{args.manifest}: {setup.autoscaler.kind} {setup.autoscaler.name} cannot hold cron triggers (an HPA "
                "has no schedule); pass its KEDA ScaledObject, or leave out --manifest for the generated one"
            )
        metric = setup.document.data
    trace, _ = read_traffic(args)
    schedule = make_schedule(
        trace,
        fleet,
        metric,
        attainment_goal_frac=goal,
        timezone=args.timezone,
        max_rounds=args.max_rounds,
        source=args.manifest or "scaledobject.yaml",
    )
    if out is not None:
        write_text_atomically(out, schedule.scaled_object_text)
    if args.json:
        print_json(
            {"trace": str(args.trace), "fleet": args.fleet, "manifest": args.manifest}
            | schedule.summary()
            | ({"written": str(out)} if out is not None else {})
        )
        return 0
    if out is None:
        print(schedule.scaled_object_text.rstrip("\n"))
    print("\n".join("# " + line if line else "#" for line in report_lines(schedule, out)))
    return 0


def _checked_out(args: argparse.Namespace) -> Path:
    out = Path(args.out)
    for given in (args.trace, args.manifest, args.fleet):
        if given and out.resolve() == Path(given).resolve():
            raise PlannerInputError(f"--out {out}: would overwrite the input {given}; choose another file")
    if out.is_dir():
        raise PlannerInputError(f"--out {out}: is a directory; expected a file name")
    if not out.parent.resolve().is_dir():
        raise PlannerInputError(f"--out {out}: folder {out.parent} does not exist")
    return out


def report_lines(schedule: Schedule, written: Path | None = None) -> list[str]:
    """The table, the search's outcome and the lint findings, as plain lines."""
    rows = [("", "GPU-hours", "cost [$]", "attainment")]
    for replay in schedule.comparison:
        label = "oracle (bound, at the goal)" if replay.outcome is None else replay.name
        rows.append(
            (label, f"{replay.gpu_hours:,.2f}", f"{replay.cost_usd:,.2f}", f"{100 * replay.slo_attainment_frac:.2f} %")
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    lines = [
        f"planner schedule: {len(schedule.windows)} cron trigger(s), minimums by "
        f"{'weekday and hour' if schedule.by_weekday else 'hour of the day'} in {schedule.timezone}, each rise "
        f"{schedule.lead_s / 60:g} min early (time to Ready and one HPA sync)",
        "",
    ]
    lines += [
        "  ".join(
            [row[0].ljust(widths[0]), *(cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True))]
        )
        for row in rows
    ]
    lines += ["", schedule.reason]
    serious = [f for f in schedule.findings if f.severity in ("error", "warning")]
    lines.append(f"planner lint: {len(serious)} error(s) or warning(s)" + (":" if serious else ", clean"))
    lines += [f"  {f.severity}: {f.rule}: {f.why}" for f in serious]
    if written is not None:
        lines.append(f"Wrote {written}")
    return lines
