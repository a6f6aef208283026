"""``planner hpa``: the replica count an HPA or KEDA ScaledObject sets for given metric values.

Usage::

    planner hpa --manifest FILE.yaml --current-replicas N [--ready-replicas N]
                --metric NAME=VALUE [--metric NAME=VALUE ...] [--json]

``NAME`` is a trigger's (or metric's) ``name`` or its 0-based index.
``VALUE`` is what its query returns: for an ``AverageValue`` trigger on a
``sum(...)`` query, the fleet total. An empty ``VALUE`` (``NAME=``) is a
query that returned no result.
"""

from __future__ import annotations

import argparse

from planner.autoscaler.explain import evaluate_decision
from planner.cli.output import print_json, print_table
from planner.errors import PlannerInputError
from planner.readers.manifest import load_autoscaler

HELP = "replica count an HPA or KEDA ScaledObject sets for given metric values, step by step"


def register(subparsers) -> None:
    """Add the ``hpa`` subcommand."""
    parser = subparsers.add_parser(
        "hpa",
        help=HELP,
        description=(
            "Evaluate one decision of the Kubernetes HPA (and KEDA, for a ScaledObject) exactly as the "
            "controllers make it, and explain each step. The controller is taken to have just started "
            "(or to have held the current count for a while), so a scale-down waits for the "
            "stabilization window; pods that are not Ready report no per-pod samples."
        ),
    )
    parser.add_argument(
        "--manifest",
        required=True,
        metavar="FILE.yaml",
        help="YAML with an autoscaling/v2 HorizontalPodAutoscaler or a keda.sh ScaledObject",
    )
    parser.add_argument("--name", metavar="NAME", help="which autoscaler, when the file holds several")
    parser.add_argument(
        "--current-replicas", required=True, type=_count, metavar="N", help="spec.replicas of the scale target now"
    )
    parser.add_argument("--ready-replicas", type=_count, metavar="N", help="pods that are Ready (default: all of them)")
    parser.add_argument(
        "--metric",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        required=True,
        help="a trigger's or metric's name (or 0-based index) and what its query returns; repeat",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number of replicas, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of replicas >= 0, got {text!r}")
    return value


def _parse_metrics(items: list[str]) -> dict[str, str]:
    values: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise PlannerInputError(f"--metric expects NAME=VALUE, got {item!r}")
        if name in values:
            raise PlannerInputError(f"--metric {name} was given twice")
        values[name] = value.strip()
    return values


def run(args: argparse.Namespace) -> int:
    """Load the manifest, evaluate, print; returns 0."""
    autoscaler = load_autoscaler(args.manifest, args.name)
    decision = evaluate_decision(
        autoscaler, args.current_replicas, _parse_metrics(args.metric), ready_replicas=args.ready_replicas
    )
    if args.json:
        print_json(decision.to_dict())
        return 0
    print(f"{decision.kind} {decision.name} ({decision.source})")
    print()
    for number, step in enumerate(decision.steps, start=1):
        print(f"{number:>2}. {step}")
    print()
    rows = []
    for line in decision.metrics:
        proposal = "-" if line.proposal is None else line.proposal
        state = line.error or (
            ""
            if line.within_tolerance is None
            else ("inside tolerance" if line.within_tolerance else "outside tolerance")
        )
        rows.append(
            (
                f"{line.key} [{line.target_type} {line.target:g}]",
                f"value {_show(line.value_to_hpa)}  ratio {_show(line.usage_ratio, 4)}  "
                f"proposal {proposal}  {state}".rstrip(),
            )
        )
    print_table(rows, title="Per trigger")
    print()
    print_table([("current replicas", decision.current_replicas), ("desired replicas", decision.desired_replicas)])
    for note in decision.notes:
        print(f"note: {note}")
    return 0


def _show(value, digits: int = 6) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}g}"
