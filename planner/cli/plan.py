"""``planner plan``: what to run instead of the current autoscaler, on the team's own traffic, and the manifests for it.

Usage::

    planner plan --trace TRACE --manifest CURRENT.yaml --fleet FLEET.yaml
                 (--concurrency-target T | --knee-json FILE | --loadtest DIR --ttft-p99-ms MS --itl-p99-ms MS)
                 [--grid GRID.yaml] [--attainment-goal F] [--max-flap-cycles N]
                 [--stretch-day | --stretch-days N] [--seed N] [--start ISO]
                 [--forecasts [METHOD,...]] [--forecast-targets F,F,...] [--schedule [ZONE]]
                 [--out DIR] [--json]

The trace flags (``--trace-format``, ``--trace-model``, ``--trace-series``, ...) are
those of :mod:`planner.cli.traffic`.

The grid varies the generated ScaledObject (keys ``target``, ``min_replicas``,
``max_replicas``, ``polling_interval_s``, ``scale_down_window_s``; default: the
target and half of it, floors 1 and 2, windows 120/600/1800 s) and, with a fleet
whose ``nodes:`` section gives a node pool, ``placeholders`` (default 0 and 1:
warm spare GPUs written as a pause-pod Deployment), ``image_pull_s`` and the node
autoscaler's ``scale_down_unneeded_s`` or ``consolidate_after_s``, reported as
changes to make outside the manifests. Every point and
the current setting replay the same trace on the same fleet; the recommendation
follows :func:`planner.workflows.plan.recommend`. The work is :func:`planner.workflows.plan.make_plan`,
the function the chapter "Your plan" calls.

``--forecasts`` also replays reactive scaling beside each predictive trigger
(:mod:`planner.vllm.forecast`: all four methods, or those listed) around the
recommended setting, at the targets ``--forecast-targets`` gives as fractions
of its target, and prices each at the attainment goal
(:func:`planner.workflows.forecast_comparison.compare_forecasts`); ``--json``
gets a ``forecasts`` section. The forecasts run in the lockstep engine, about
6 s per configuration and simulated day of 50 000 requests on one core.

``--schedule`` also derives, as ``planner schedule`` does, KEDA cron triggers (minimum replicas by
weekday and hour in ZONE, default UTC) beside the recommendation (the team's ScaledObject when it
is kept, else the generated one), replays them, and prices the schedule against those triggers
alone and the oracle's cold-start bound
(:func:`planner.workflows.schedule.make_schedule`); ``--json`` gets a ``schedule`` section.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from pathlib import Path

import yaml

from planner.cli.manifests import _thresholds, add_threshold_arguments
from planner.cli.output import print_json, print_table, write_text_atomically
from planner.cli.simulate import add_start_argument, with_start
from planner.cli.traffic import add_traffic_arguments, read_traffic
from planner.errors import PlannerInputError
from planner.manifests.generate import ScalingPlan
from planner.markdown import plural
from planner.readers.fleet import read_fleet
from planner.readers.workload import read_manifest_set
from planner.simulate.fleet import FleetSpec
from planner.vllm.forecast import FORECAST_METHODS
from planner.workflows.forecast_comparison import DEFAULT_TARGET_FRACS, compare_forecasts, default_forecasts
from planner.workflows.plan import (
    CURRENT_INDEX,
    current_setup,
    default_grid,
    make_plan,
    plan_configuration,
    recommended_scaling_plan,
)
from planner.workflows.schedule import DEFAULT_TIMEZONE, Schedule, make_schedule, zone_problem

HELP = "recommend an autoscaler setting against the current one on your traffic, and write its manifests"
DEFAULT_ATTAINMENT_GOAL = 0.99


def register(subparsers) -> None:
    """Add the ``plan`` subcommand."""
    parser = subparsers.add_parser(
        "plan",
        help=HELP,
        description=(
            "Replay a request trace through the team's current HPA or ScaledObject and through a grid of "
            "settings around the ScaledObject planner manifests writes, on one simulated fleet; recommend "
            "one (the current setting stays when it meets the goals and nothing meeting them is strictly "
            "cheaper without flapping more; the recommendation is never dominated on cost, attainment and "
            "flap cycles); print current against recommended per week, the Pareto front and the reason; "
            "write the manifests carrying exactly the recommended values, and lint them with the patched "
            "workload."
        ),
    )
    add_traffic_arguments(parser)
    parser.add_argument(
        "--manifest",
        required=True,
        metavar="FILE.yaml",
        help="the current manifests: a file or folder with the HPA or ScaledObject (and its workload)",
    )
    parser.add_argument("--name", default="", metavar="NAME", help="which autoscaler, when there are several")
    parser.add_argument("--fleet", metavar="FLEET.yaml", help="replica and fleet parameters (defaults otherwise)")
    parser.add_argument("--grid", metavar="GRID.yaml", help="grid keys -> lists of values (default: around the target)")
    parser.add_argument(
        "--attainment-goal",
        type=float,
        default=DEFAULT_ATTAINMENT_GOAL,
        metavar="F",
        help=f"SLO attainment to meet, a fraction (default {DEFAULT_ATTAINMENT_GOAL})",
    )
    parser.add_argument(
        "--max-flap-cycles",
        type=float,
        metavar="N",
        help="flap cycles allowed over the replayed trace (a day with --stretch-day, N days with --stretch-days N); "
        "default: no limit",
    )
    add_start_argument(parser)
    add_threshold_arguments(parser)
    parser.add_argument(
        "--warmup-s",
        type=float,
        help="pod request to Ready (default: the fleet's warmup_s; with nodes:, a removed replica's comeback) [s]",
    )
    parser.add_argument(
        "--max-tokens",
        type=float,
        default=0.0,
        help="longest generation to drain (default: the workload's --max-model-len, else 4096) [tokens]",
    )
    parser.add_argument(
        "--itl-ms", type=float, default=50.0, help="inter-token latency while draining (default 50) [ms]"
    )
    parser.add_argument(
        "--max-replicas", type=int, help="upper bound of the generated setting (default: the current autoscaler's)"
    )
    parser.add_argument(
        "--target",
        metavar="NAME",
        help="the Deployment the emitted manifests scale (default: the one the current autoscaler scales)",
    )
    parser.add_argument(
        "--max-num-seqs",
        type=int,
        metavar="N",
        help="vLLM --max-num-seqs (default: the workload's flag, else the fleet's max_num_seqs)",
    )
    parser.add_argument(
        "--prometheus",
        default="http://prometheus-operated.monitoring.svc:9090",
        metavar="URL",
        help="Prometheus address KEDA queries",
    )
    parser.add_argument(
        "--forecasts",
        nargs="?",
        const="all",
        metavar="METHOD,...",
        help="also compare reactive scaling with predictive triggers (all of "
        f"{', '.join(FORECAST_METHODS)}, or those listed) on GPU-hours at the attainment goal; "
        "slow: they run in the lockstep engine",
    )
    parser.add_argument(
        "--forecast-targets",
        default=",".join(f"{f:g}" for f in DEFAULT_TARGET_FRACS),
        metavar="F,F,...",
        help="targets each strategy is replayed at, as fractions of the recommended target "
        f"(default {','.join(f'{f:g}' for f in DEFAULT_TARGET_FRACS)})",
    )
    parser.add_argument(
        "--schedule",
        nargs="?",
        const=DEFAULT_TIMEZONE,
        metavar="ZONE",
        help="also derive weekly KEDA cron triggers beside the recommended trigger (as planner schedule does, "
        f"hours in ZONE, default {DEFAULT_TIMEZONE}) and price them against it and the oracle",
    )
    parser.add_argument(
        "--out",
        metavar="DIR",
        help="write scaledobject.yaml (or the kept autoscaler), the patch and the patched workload here",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    goal = args.attainment_goal
    if not (math.isfinite(goal) and 0.0 <= goal <= 1.0):
        raise PlannerInputError(f"--attainment-goal: expected a fraction between 0 and 1, got {goal}")
    methods, target_fracs = _forecast_arguments(args)
    if args.schedule is not None:
        problem = zone_problem(args.schedule)
        if problem is not None:
            raise PlannerInputError(f"--schedule {args.schedule!r}: {problem}")
    if args.max_flap_cycles is not None and not (math.isfinite(args.max_flap_cycles) and args.max_flap_cycles >= 0):
        raise PlannerInputError(f"--max-flap-cycles: expected a number >= 0, got {args.max_flap_cycles}")
    thresholds = _thresholds(args)
    setup = current_setup(read_manifest_set([args.manifest]), args.name)
    fleet = with_start(read_fleet(args.fleet) if args.fleet else FleetSpec(), args.start)
    trace, period_s = read_traffic(args)
    grid = (
        _read_grid(args.grid)
        if args.grid
        else default_grid(thresholds["concurrency_target"], placeholders=(0, 1) if fleet.nodes is not None else ())
    )
    current = setup.autoscaler
    target = args.target or current.hpa.scale_target_name or current.name
    kind = (
        current.hpa.scale_target_kind
        if current.hpa.scale_target_kind in ("Deployment", "StatefulSet")
        else "Deployment"
    )
    server = setup.workload.servers[0] if setup.workload is not None and setup.workload.servers else None
    base = ScalingPlan(
        target_name=target,
        target_kind=kind,
        concurrency_target=thresholds["concurrency_target"],
        # With a node pool, the generated scale-down window covers a replica's comeback, not only vLLM's warmup.
        warmup_s=args.warmup_s if args.warmup_s is not None else thresholds.get("warmup_s", fleet.comeback_s),
        max_output_tokens=setup.max_tokens(args.max_tokens),
        itl_ms=args.itl_ms,
        max_replicas=args.max_replicas if args.max_replicas is not None else current.hpa.max_replicas,
        kv_usage_target_frac=thresholds.get("kv_usage_target"),
        queue_threshold_requests=thresholds.get("queue_threshold_requests"),
        knee_concurrency=thresholds.get("knee_concurrency"),
        growth_frac=thresholds.get("growth_frac"),
        kv_usage_at_knee_frac=thresholds.get("kv_usage_at_knee_frac"),
        prometheus_address=args.prometheus,
        container_name=server.container if server is not None else "vllm",
        max_num_seqs=args.max_num_seqs
        or (server.max_num_seqs if server is not None and server.max_num_seqs else fleet.replica.max_num_seqs),
        label_matchers=setup.scope(target, kind),
    )
    source = Path(setup.workload.document.source).name if setup.workload is not None else "deployment.yaml"
    plan = make_plan(
        trace,
        current,
        fleet,
        base,
        grid,
        goal,
        args.max_flap_cycles,
        period_s=period_s,
        current_document=setup.document.data,
        workload_text=setup.workload_yaml,
        workload_source=source,
    )
    comparison = schedule = None
    schedule_beside = ""
    around = base if plan.emitted is None else recommended_scaling_plan(base, plan.recommended)
    if methods:
        forecasts = default_forecasts(around.warmup_s)
        comparison = compare_forecasts(
            trace,
            dataclasses.replace(around, gpus_per_replica=fleet.gpus_per_replica),
            plan_configuration(plan, current, fleet).fleet,
            goal,
            forecasts={name: forecasts[name] for name in methods},
            target_fracs=target_fracs,
        )
    if args.schedule is not None:
        # Floors go beside the trigger the plan recommends: the team's own ScaledObject when it is kept;
        # a kept HPA has no place for cron triggers, so then the ScaledObject the generator writes.
        keeps_scaled_object = plan.recommendation.is_current and current.kind == "ScaledObject"
        schedule_beside = "the current ScaledObject" if keeps_scaled_object else "the generated ScaledObject"
        schedule = make_schedule(
            trace,
            plan_configuration(plan, current, fleet).fleet,
            setup.document.data
            if keeps_scaled_object
            else dataclasses.replace(around, gpus_per_replica=fleet.gpus_per_replica),
            attainment_goal_frac=goal,
            timezone=args.schedule,
            source=Path(args.manifest).name,
        )
    written = _write(plan, args.out, source, [args.trace, args.manifest, args.fleet, args.grid]) if args.out else []
    if args.json:
        extra = {} if comparison is None else {"forecasts": comparison.as_dict()}
        if schedule is not None:
            extra["schedule"] = {**schedule.summary(), "beside": schedule_beside}
        print_json(
            {"trace": str(args.trace), "manifest": str(args.manifest), **plan.as_dict(), **extra, "files": written}
        )
        return 0
    _print(plan, written)
    if comparison is not None:
        _print_forecasts(comparison)
    if schedule is not None:
        _print_schedule(schedule, schedule_beside)
    return 0


def _forecast_arguments(args: argparse.Namespace) -> tuple[tuple[str, ...], tuple[float, ...]]:
    """The forecast methods asked for (none without ``--forecasts``) and the target fractions, checked."""
    if args.forecasts is None:
        return (), DEFAULT_TARGET_FRACS
    names = (
        FORECAST_METHODS
        if args.forecasts.strip() == "all"
        else tuple(name.strip() for name in args.forecasts.split(",") if name.strip())
    )
    unknown = [name for name in names if name not in FORECAST_METHODS]
    if unknown or not names:
        raise PlannerInputError(
            f"--forecasts: unknown method {', '.join(unknown) or '(none)'}; expected 'all' or a comma list of "
            f"{', '.join(FORECAST_METHODS)}"
        )
    try:
        fracs = tuple(float(part) for part in args.forecast_targets.split(","))
    except ValueError:
        raise PlannerInputError(
            f"--forecast-targets: expected comma-separated fractions such as 0.5,1,1.5, got {args.forecast_targets!r}"
        ) from None
    if not fracs or not all(math.isfinite(f) and f > 0 for f in fracs):
        raise PlannerInputError(f"--forecast-targets: expected numbers > 0, got {args.forecast_targets!r}")
    return tuple(dict.fromkeys(names)), fracs


def _print_forecasts(comparison) -> None:
    summary = comparison.as_dict()
    goal = 100 * summary["attainment_goal_frac"]
    rows = []
    for strategy in summary["strategies"]:
        at_goal = strategy["gpu_hours_at_goal"]
        saving = strategy["saving_vs_reactive_frac"]
        text = (
            strategy["note"]
            if at_goal is None
            else f"{at_goal:,.1f} GPU-hours at {goal:g} %"
            + (
                ""
                if saving is None or strategy["name"] == "reactive"
                else f" ({-100 * saving:+.1f} % against reactive)"
            )
        )
        runs = ", ".join(
            f"target {run['target']:g}: {run['gpu_hours']:,.1f} h, {100 * run['slo_attainment_frac']:.2f} %"
            for run in strategy["runs"]
        )
        rows.append((strategy["name"], f"{text} [{runs}]"))
    print_table(rows, title=f"Predictive triggers beside reactive scaling, priced at {goal:g} % attainment")
    for strategy in summary["strategies"][1:]:
        print(f"  {strategy['name']}: {strategy['query']}")


def _print_schedule(schedule: Schedule, beside: str) -> None:
    goal = 100 * schedule.attainment_goal_frac
    rows = [
        (
            name,
            f"${replay.cost_usd:,.2f}, {replay.gpu_hours:,.1f} GPU-hours, {100 * replay.slo_attainment_frac:.2f} %"
            + (" (a bound, not a fleet)" if name == "oracle" else ""),
        )
        for name, replay in (
            (f"schedule + metric ({plural(len(schedule.windows), 'cron trigger')})", schedule.scheduled),
            ("its metric triggers alone", schedule.reactive),
            ("oracle", schedule.oracle),
        )
    ]
    print_table(rows, title=f"Cron floors beside {beside}, goal {goal:g} % ({schedule.timezone})")
    print(f"  {schedule.reason}")
    for finding in schedule.findings:
        print(f"  {finding.severity}: {finding.rule}: {finding.why}")
    print("  The ScaledObject: planner plan --json (schedule.scaled_object), or planner schedule on the same inputs.")


def _read_grid(path: str) -> dict:
    try:
        data = yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise PlannerInputError(f"{path}: not valid YAML ({error.__class__.__name__})") from None
    if not isinstance(data, dict) or not data:
        raise PlannerInputError(f"{path}: expected a mapping of grid keys to lists of values")
    return data


def _write(plan, out_dir: str, source: str, inputs) -> list[str]:
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise PlannerInputError(f"--out {out_dir}: exists and is not a directory")
    kept = plan.recommendation.is_current
    files = {
        ("current-autoscaler.yaml" if kept else "scaledobject.yaml"): plan.manifests_text,
        "deployment-patch.yaml": plan.deployment_patch_text,
    }
    if plan.patched_workload_text:
        files[f"patched-{source}"] = plan.patched_workload_text
    if plan.placeholders_text:
        files["gpu-placeholders.yaml"] = plan.placeholders_text
    given = {Path(p).resolve() for p in inputs if p}
    for name in files:
        if (out / name).resolve() in given:
            raise PlannerInputError(f"--out {out_dir}: would overwrite the input {name}; choose another directory")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        write_text_atomically(out / name, text)
        written.append(str(out / name))
    return written


def _row(figures: dict) -> str:
    return (
        f"${figures['cost_usd_per_week']:,.0f}/week, {100 * figures['slo_attainment_frac']:.2f} % attained, "
        f"{figures['flap_cycles_per_week']:,.0f} flap cycles/week, {figures['scale_events_per_week']:,.0f} "
        f"scale events/week, peak {figures['peak_replicas']} replicas"
    )


def _print(plan, written: list[str]) -> None:
    summary = plan.as_dict()
    print_table(
        [
            ("current", _row(summary["current"])),
            ("recommended" + (" (current)" if plan.recommendation.is_current else ""), _row(summary["recommended"])),
        ],
        title="Current against recommended",
    )
    print(f"Recommended: {summary['recommended']['setting']}.")
    print(summary["reason"])
    print_table(
        [
            (("current" if r["index"] == CURRENT_INDEX else f"#{r['index']} {r['setting']}"), _row(r))
            for r in summary["front"]
        ],
        title=f"Pareto front on cost, attainment and flap cycles ({len(summary['front'])} of "
        f"{len(summary['configurations']) + 1})",
    )
    oracle = summary["oracle_cost_usd_per_week"]
    if math.isfinite(oracle):
        regret = summary["recommended"].get("regret_usd_per_week")
        over = "" if regret is None else f"; at its own attainment the recommended one costs ${regret:,.0f}/week more"
        print(f"No setting can cost less than ${oracle:,.0f}/week at the attainment goal (planner oracle){over}.")
    for change in plan.node_pool_changes:
        print(f"Also change, outside the manifests: {change}")
    errors = plan.errors
    print(f"lint of the manifests with the patched workload: {len(plan.findings)} finding(s), {len(errors)} error(s)")
    for finding in errors:
        print(f"  error: {finding.rule}: {finding.why}")
    if written:
        print("Wrote: " + ", ".join(written))
    else:
        print("---\n" + plan.manifests_text.rstrip("\n") + "\n---\n" + plan.deployment_patch_text.rstrip("\n"))
