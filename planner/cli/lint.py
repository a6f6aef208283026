"""``planner lint``: review autoscaler and model-server manifests, one finding per line with its fix."""

from __future__ import annotations

import argparse

from planner.autoscaler.versions import ClusterVersions
from planner.cli.manifests import add_version_arguments
from planner.cli.output import print_json
from planner.errors import PlannerInputError
from planner.manifests.lint import DEFAULT_ITL_MS, DEFAULT_WARMUP_S, LintSettings, ReplicaSupply, exit_status, lint
from planner.readers.fleet import read_fleet
from planner.readers.metrics import read_metrics_scrape
from planner.readers.workload import read_manifest_set

RULES_PAGE = "book/lint_rules.md"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "lint",
        help="review ScaledObjects, HPAs and vLLM Deployments for known autoscaling mistakes",
        description=(
            "Read YAML files or folders (multi-document and Helm-rendered output work) and report each "
            "finding with its rule id, severity, file, document, YAML path, line, why and fix. "
            "A file or document that cannot be read is reported as an unreadable-document finding and the "
            "rest is reviewed. Exit status: 1 when a finding is an error, 2 for a usage error (a path that "
            "does not exist, a bad option value), 0 otherwise."
        ),
    )
    parser.add_argument("paths", nargs="+", metavar="FILE|DIR", help="manifests to review")
    parser.add_argument("--format", choices=("text", "json"), default="text", help="output format (default text)")
    parser.add_argument(
        "--json",
        action="store_const",
        const="json",
        dest="format",
        help="same as --format json, like the other subcommands",
    )
    parser.add_argument(
        "--max-tokens",
        type=float,
        default=None,
        help="largest max_tokens the service accepts [tokens] (default: the server's --max-model-len)",
    )
    parser.add_argument(
        "--itl-ms",
        type=float,
        default=None,
        help=f"inter-token latency while draining [ms] (default {DEFAULT_ITL_MS:g})",
    )
    parser.add_argument(
        "--max-num-seqs",
        type=int,
        default=None,
        help="vLLM --max-num-seqs of the replicas (default: the workload's flag, else 256)",
    )
    parser.add_argument(
        "--warmup-s",
        type=float,
        default=None,
        help=f"time from a new pod to Ready [s] (default: the fleet file's, else {DEFAULT_WARMUP_S:g})",
    )
    parser.add_argument(
        "--fleet",
        metavar="FLEET.yaml",
        help="the fleet file planner simulate reads: its warmup, and with nodes: its node quota and cold start",
    )
    parser.add_argument(
        "--scrape",
        default=None,
        metavar="SCRAPE_FILE",
        help="a saved vLLM /metrics scrape: flag queries on metrics the server does not export",
    )
    add_version_arguments(parser)
    parser.set_defaults(func=run)


def _positive(name: str, value, integer: bool = False):
    if value is not None and not value > 0:
        raise PlannerInputError(f"{name} must be {'an integer' if integer else 'a number'} above 0, got {value!r}")
    return value


def run(args: argparse.Namespace) -> int:
    if args.format != "json":
        return _run(args)
    try:
        return _run(args)
    except PlannerInputError as error:  # a usage error: JSON readers still get one object
        print_json({"error": str(error), "files": [], "findings": [], "counts": {}, "exit_status": 2})
        raise


def _run(args: argparse.Namespace) -> int:
    fleet = read_fleet(args.fleet) if args.fleet else None
    warmup_s = _positive("--warmup-s", args.warmup_s)
    if warmup_s is None:
        warmup_s = fleet.warmup_s if fleet is not None else DEFAULT_WARMUP_S
    settings = LintSettings(
        warmup_s=warmup_s,
        supply=ReplicaSupply.from_fleet(fleet) if fleet is not None else None,
        max_tokens=_positive("--max-tokens", args.max_tokens),
        itl_ms=_positive("--itl-ms", args.itl_ms),
        max_num_seqs=_positive("--max-num-seqs", args.max_num_seqs, integer=True),
        exported_metrics=read_metrics_scrape(args.scrape).exported if args.scrape else None,
        versions=ClusterVersions.parse(args.kubernetes_version, args.keda_version),
    )
    manifests = read_manifest_set(args.paths, strict=False)
    findings = lint(manifests, settings)
    status = exit_status(findings)
    if args.format == "json":
        print_json(
            {
                "files": list(manifests.files),
                "findings": [finding.as_dict() for finding in findings],
                "counts": {
                    severity: sum(f.severity == severity for f in findings) for severity in ("error", "warning", "info")
                },
                "exit_status": status,
            }
        )
        return status
    for finding in findings:
        template = f" [{finding.template}]" if finding.template else ""
        print(f"{finding.file}:{finding.line}: {finding.severity}: {finding.rule}{template}: {finding.why}")
        print(f"    at document {finding.document}, {finding.path}")
        print(f"    fix: {finding.fix}")
        print(f"    see: {RULES_PAGE}#{finding.rule}")
    counts = {s: sum(f.severity == s for f in findings) for s in ("error", "warning", "info")}
    print(
        f"{len(manifests.files)} file(s), {len(findings)} finding(s): "
        f"{counts['error']} error, {counts['warning']} warning, {counts['info']} info"
    )
    return status
