"""``planner metrics``: which vLLM autoscaling signals a /metrics scrape has, and PromQL for them."""

from __future__ import annotations

import argparse

from planner.cli.output import print_json, print_table
from planner.readers.metrics import read_metrics_scrape


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "metrics",
        help="check a vLLM /metrics scrape and print PromQL that matches its metric names",
        description="Parse a saved /metrics scrape (Prometheus text format), report which vLLM "
        "signals it exports, flag deprecated or missing ones, and print matching PromQL.",
    )
    parser.add_argument("scrape", metavar="SCRAPE_FILE", help="saved output of curl http://POD:8000/metrics")
    parser.add_argument("--model-name", default=None, help="model_name label for the queries (default: the scrape's)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = read_metrics_scrape(args.scrape, model_name=args.model_name)
    if args.json:
        print_json(
            {
                "source": report.source,
                "engine": report.engine,
                "model_names": list(report.model_names),
                "signals": {
                    s.key: {"status": s.status, "metric": s.name, "current_name": s.current, "value": s.value}
                    for s in report.signals
                },
                "missing_required": list(report.missing_required),
                "deprecated_in_use": list(report.deprecated_in_use),
                "deprecated_present": list(report.deprecated_present),
                "legacy_metrics": list(report.legacy_metrics),
                "queries": report.queries,
            }
        )
        return 0
    print_table(
        [("engine", report.engine), ("models", ", ".join(report.model_names) or "(none labelled)")],
        title=f"Scrape {report.source}",
    )
    print_table(
        [
            (s.key, f"{s.status:<10} {s.name or s.current}" + ("" if s.value is None else f" = {s.value:g}"))
            for s in report.signals
        ],
        title="Signals",
    )
    if report.missing_required:
        print(f"Missing (needed for the planner's thresholds): {', '.join(report.missing_required)}")
    if report.deprecated_present:
        print(
            "Deprecated names exported (vLLM hides them one minor version later): "
            f"{', '.join(report.deprecated_present)}"
        )
    if report.legacy_metrics:
        print(f"V0-only swap metrics present: {', '.join(report.legacy_metrics)}")
    print_table(list(report.queries.items()), title="PromQL")
    return 0
