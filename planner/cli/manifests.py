"""``planner manifests``: the KEDA ScaledObject, the equivalent HPA and the workload patch a plan calls for."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import TypedDict

from planner.autoscaler.versions import (
    DEFAULT_KEDA_VERSION,
    DEFAULT_KUBERNETES_VERSION,
    KEDA_TOLERANCE_SINCE,
    ClusterVersions,
)
from planner.cli.output import print_json, print_table, write_text_atomically
from planner.errors import PlannerInputError
from planner.manifests.generate import (
    DEFAULT_PRE_STOP_S,
    ScalingPlan,
    generate_manifests,
    manifest_thresholds,
)
from planner.manifests.schema import schema_errors
from planner.manifests.writer import dump_manifest, patch_workload_text, vllm_argument

_KNEE_KEYS = (
    "concurrency_target",
    "kv_usage_target",
    "queue_threshold_requests",
    "knee_concurrency",
    "growth_frac",
    "warmup_s",
    "kv_usage_at_knee_frac",
)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "manifests",
        help="write the KEDA ScaledObject, the equivalent HPA and the Deployment patch for a plan",
        description=(
            "Write a KEDA ScaledObject and the equivalent autoscaling/v2 HPA (External metrics via "
            "prometheus-adapter, rules included) that scale on vLLM's in-flight requests, KV usage "
            "and, if given, queue depth, with a scale-down window of at least the warmup; and a "
            "Deployment patch setting terminationGracePeriodSeconds, a preStop sleep and vLLM's "
            "--shutdown-timeout. Thresholds come from `planner knee --json` output, from load-test "
            "files, or from the flags. Every manifest is checked against the Kubernetes and KEDA "
            "schemas before it is written. Comments in the YAML give the reason for each number."
        ),
    )
    add_threshold_arguments(parser)
    parser.add_argument("--warmup-s", type=float, help="decision to Ready for a new replica [s]")
    parser.add_argument(
        "--max-tokens", type=float, required=True, help="largest max_tokens the service accepts [tokens]"
    )
    parser.add_argument(
        "--itl-ms", type=float, required=True, help="inter-token latency while draining; a high percentile [ms]"
    )
    parser.add_argument("--ttft-ms", type=float, default=0.0, help="time to first token [ms]")
    parser.add_argument("--min-replicas", type=int, default=1, help="lower bound (default 1)")
    parser.add_argument("--max-replicas", type=int, required=True, help="upper bound: GPU quota / GPUs per replica")
    parser.add_argument(
        "--target", metavar="NAME", help="Deployment (or StatefulSet) to scale; default: the one in --patch"
    )
    parser.add_argument("--target-kind", choices=("Deployment", "StatefulSet"), default="Deployment")
    parser.add_argument("--namespace", default="", help="namespace, also a label matcher in the queries")
    parser.add_argument("--model-name", default="", help="vLLM model_name label for the queries")
    parser.add_argument(
        "--match",
        action="append",
        default=[],
        metavar='LABEL="VALUE"',
        help='a label matcher every query keeps, e.g. your own model_name="chat" (repeatable); '
        "with --patch, the workload's namespace and served model name are added for labels "
        "not named",
    )
    parser.add_argument(
        "--prometheus",
        default="http://prometheus-operated.monitoring.svc:9090",
        metavar="URL",
        help="Prometheus address KEDA queries",
    )
    parser.add_argument(
        "--container",
        metavar="NAME",
        help="the vLLM container (default: found by image or command in --patch, else 'vllm')",
    )
    parser.add_argument(
        "--max-num-seqs",
        type=int,
        metavar="N",
        help="vLLM's --max-num-seqs (default: read from --patch); the target must stay below it",
    )
    parser.add_argument(
        "--pre-stop-s",
        type=float,
        default=DEFAULT_PRE_STOP_S,
        help=f"preStop sleep before SIGTERM (default {DEFAULT_PRE_STOP_S:g}) [s]",
    )
    parser.add_argument(
        "--scale-up-tolerance",
        default="0",
        metavar="FRAC|cluster",
        help="behavior.scaleUp.tolerance (default 0); 'cluster' leaves the cluster's 10 %%",
    )
    parser.add_argument(
        "--placeholders",
        type=int,
        default=0,
        metavar="N",
        help="also write N low-priority pause pods holding one replica's GPUs each, and their PriorityClass",
    )
    parser.add_argument(
        "--gpus-per-replica", type=int, default=1, metavar="N", help="GPUs each placeholder requests (default 1)"
    )
    add_version_arguments(parser)
    parser.add_argument(
        "--patch",
        metavar="FILE",
        help="your Deployment/StatefulSet YAML: a patched copy is written to --out (the file itself is never changed)",
    )
    parser.add_argument("--out", metavar="DIR", help="directory to write the files to (default: stdout)")
    parser.add_argument("--json", action="store_true", help="print a JSON summary")
    parser.set_defaults(func=run)


def add_version_arguments(parser) -> None:
    """``--kubernetes-version`` and ``--keda-version``, shared with ``planner lint``."""
    parser.add_argument(
        "--kubernetes-version",
        metavar="MAJOR.MINOR",
        default=None,
        help=f"the cluster's Kubernetes (default {DEFAULT_KUBERNETES_VERSION}): decides whether "
        "behavior.scaleUp.tolerance is kept and whether an HPA may scale to zero",
    )
    parser.add_argument(
        "--keda-version",
        metavar="MAJOR.MINOR",
        default=None,
        help=f"the cluster's KEDA (default {DEFAULT_KEDA_VERSION}, the newest minor series): "
        f"KEDA {KEDA_TOLERANCE_SINCE} and later pass tolerance to their HPA",
    )


def add_threshold_arguments(parser: argparse.ArgumentParser) -> None:
    """The thresholds' sources: a knee file, a load test, or the flags (``planner plan`` takes them too)."""
    source = parser.add_argument_group("thresholds (one source; the flags override)")
    source.add_argument("--knee-json", metavar="FILE", help="a file holding `planner knee --json` output")
    source.add_argument(
        "--loadtest",
        nargs="+",
        metavar="FILE",
        help="load-test files or directories (one sweep), read as `planner knee` does",
    )
    source.add_argument("--ttft-p99-ms", type=float, help="TTFT p99 objective, with --loadtest [ms]")
    source.add_argument("--itl-p99-ms", type=float, help="ITL p99 objective, with --loadtest [ms]")
    source.add_argument(
        "--growth-frac", type=float, default=0.2, help="load growth during one warmup, with --loadtest (default 0.2)"
    )
    source.add_argument(
        "--wait-budget-s",
        type=float,
        help="longest acceptable queue wait, with --loadtest, for the queue threshold [s]",
    )
    source.add_argument("--concurrency-target", type=float, metavar="T", help="per-replica in-flight target [requests]")
    source.add_argument("--kv-target", type=float, metavar="FRAC", help="per-replica KV usage target, 0-1 [fraction]")
    source.add_argument(
        "--queue-threshold", type=float, metavar="N", help="per-replica waiting-request threshold [requests]"
    )


def run(args: argparse.Namespace) -> int:
    thresholds = _thresholds(args)
    patch_text = None
    target = args.target
    if args.patch:
        patch_path = Path(args.patch)
        patch_text = patch_path.read_text(encoding="utf-8")
        if target is None:
            target = _workload_name(patch_text, args.patch)
        if not args.out:
            raise PlannerInputError("--patch needs --out DIR: the patched copy is written there, never over your file")
    if target is None:
        raise PlannerInputError("--target NAME is required (the Deployment to scale) unless --patch names it")
    max_num_seqs = args.max_num_seqs
    if max_num_seqs is None and patch_text is not None:
        found = vllm_argument(
            patch_text, "--max-num-seqs", source=args.patch, target_name=target, container_name=args.container
        )
        if found is not None:
            try:
                max_num_seqs = int(found)
            except ValueError:
                raise PlannerInputError(f"{args.patch}: --max-num-seqs {found!r} is not a whole number") from None
    warmup_s = args.warmup_s if args.warmup_s is not None else thresholds.get("warmup_s")
    if warmup_s is None:
        raise PlannerInputError("--warmup-s is required (the knee file does not record a warmup)")
    matchers = tuple(args.match)
    if patch_text is not None:
        matchers += _workload_scope(patch_text, args.patch, target, matchers, args)
    plan = ScalingPlan(
        target_name=target,
        concurrency_target=thresholds["concurrency_target"],
        warmup_s=warmup_s,
        max_output_tokens=args.max_tokens,
        itl_ms=args.itl_ms,
        ttft_ms=args.ttft_ms,
        max_replicas=args.max_replicas,
        min_replicas=args.min_replicas,
        kv_usage_target_frac=thresholds.get("kv_usage_target"),
        queue_threshold_requests=thresholds.get("queue_threshold_requests"),
        prometheus_address=args.prometheus,
        namespace=args.namespace,
        model_name=args.model_name,
        target_kind=args.target_kind,
        container_name=args.container or "vllm",
        knee_concurrency=thresholds.get("knee_concurrency"),
        growth_frac=thresholds.get("growth_frac"),
        kv_usage_at_knee_frac=thresholds.get("kv_usage_at_knee_frac"),
        pre_stop_s=args.pre_stop_s,
        scale_up_tolerance_frac=_tolerance(args.scale_up_tolerance),
        max_num_seqs=max_num_seqs,
        label_matchers=matchers,
        placeholders=args.placeholders,
        gpus_per_replica=args.gpus_per_replica,
    )
    result = generate_manifests(plan, ClusterVersions.parse(args.kubernetes_version, args.keda_version))
    files: dict[str, str] = {}
    for manifest in result.all:
        if manifest.is_kubernetes_object:
            problems = schema_errors(manifest.document, source=f"{manifest.file_stem}.yaml", partial=manifest.is_patch)
            if problems:  # a bug here, or an input the schema refuses (a name, a label)
                raise PlannerInputError("generated manifest fails its schema: " + "; ".join(map(str, problems)))
        files[f"{manifest.file_stem}.yaml"] = dump_manifest(manifest)
    patch_summary: _PatchSummary | None = None
    if patch_text is not None:
        patch = patch_workload_text(
            patch_text, result.grace, source=args.patch, target_name=target, container_name=args.container
        )
        _check_patched(patch_text, patch.text, args.patch)
        name = Path(args.patch).name
        files[name] = patch.text
        patch_summary = _PatchSummary(
            file=name,
            document=patch.document_index + 1,
            container=patch.container,
            changes=list(patch.changes),
            warnings=list(patch.warnings),
        )
    written = _write(files, args.out, args.patch) if args.out else []
    if args.json:
        print_json(_summary(result, plan, written, patch_summary))
        return 0
    if not args.out:
        print("\n---\n".join(text.rstrip("\n") for text in files.values()))
        return 0
    print_table(
        [
            ("signals", ", ".join(result.signals)),
            ("formula", result.formula or "(one signal)"),
            ("scale-down window [s]", result.scale_down_window_s),
            ("remove at most 1 replica per [s]", result.scale_down_period_s),
            ("longest generation [s]", result.grace.drain_time_s),
            ("vLLM flag", result.shutdown_flag),
            ("terminationGracePeriodSeconds", result.grace.termination_grace_period_s),
        ],
        title="Plan",
    )
    print("Wrote: " + ", ".join(written))
    if patch_summary:
        for change in patch_summary["changes"]:
            print(f"  patched {change}")
        for warning in patch_summary["warnings"]:
            print(f"  warning: {warning}")
    for note in result.notes:
        print(f"note: {note}")
    return 0


def _workload_scope(text: str, source: str, target: str, given: tuple[str, ...], args) -> tuple[str, ...]:
    """The patched workload's namespace and served model name, for labels neither --match nor the flags name."""
    from planner.manifests.generate import workload_matchers
    from planner.readers.workload import manifest_set_from_texts

    workload = next((w for w in manifest_set_from_texts({Path(source).name: text}).workloads if w.name == target), None)
    if workload is None:
        return ()
    named = {m.split("=")[0].rstrip("!~").strip() for m in given}
    named |= {label for label, flag in (("namespace", args.namespace), ("model_name", args.model_name)) if flag}
    server = workload.servers[0] if workload.servers else None
    scope = workload_matchers(workload.namespace, server.flags if server is not None else {})
    return tuple(m for m in scope if m.split("=")[0] not in named)


def _tolerance(text: str) -> float | None:
    if text.strip().lower() == "cluster":
        return None
    try:
        value = float(text)
    except ValueError:
        raise PlannerInputError(f"--scale-up-tolerance expects a fraction or 'cluster', got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise PlannerInputError(f"--scale-up-tolerance must be a fraction >= 0, got {text!r}")
    return value


def _thresholds(args) -> dict:
    found: dict = {}
    if args.knee_json and args.loadtest:
        raise PlannerInputError("give --knee-json or --loadtest, not both")
    if args.knee_json:
        found = _read_knee_json(args.knee_json)
    elif args.loadtest:
        found = _from_loadtest(args)
    for key, value in (
        ("concurrency_target", args.concurrency_target),
        ("kv_usage_target", args.kv_target),
        ("queue_threshold_requests", args.queue_threshold),
    ):
        if value is not None:
            found[key] = value
    if found.get("concurrency_target") is None:
        raise PlannerInputError("no concurrency target: give --concurrency-target, --knee-json or --loadtest")
    return found


def _read_knee_json(path: str) -> dict:
    text = Path(path).read_text(encoding="utf-8")
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as error:
        raise PlannerInputError(
            f"{path}: not JSON (line {error.lineno}): {error.msg}; expected the output of `planner knee --json`"
        ) from None
    if not isinstance(payload, dict) or "concurrency_target" not in payload:
        raise PlannerInputError(
            f"{path}: expected the output of `planner knee --json`, with a concurrency_target field"
        )
    if payload["concurrency_target"] is None and payload.get("finding"):
        raise PlannerInputError(f"{path}: no concurrency target: {payload['finding']}")
    found = {}
    for key in _KNEE_KEYS:
        value = payload.get(key)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise PlannerInputError(f"{path}: {key}: expected a number, got {value!r}")
        found[key] = float(value)
    return found


def _from_loadtest(args) -> dict:
    from planner.capacity.knee import thresholds_from_loadtest
    from planner.readers.loadtest import read_loadtest

    if args.ttft_p99_ms is None or args.itl_p99_ms is None:
        raise PlannerInputError("--loadtest needs --ttft-p99-ms and --itl-p99-ms (the objectives)")
    steps = read_loadtest(args.loadtest)
    result = thresholds_from_loadtest(
        steps,
        ttft_p99_slo_ms=args.ttft_p99_ms,
        itl_p99_slo_ms=args.itl_p99_ms,
        growth_frac=args.growth_frac,
        queue_wait_budget_s=args.wait_budget_s,
    )
    try:
        return manifest_thresholds(result, steps)
    except PlannerInputError as error:
        # The same finding, named by the flag that brought the load test in.
        raise PlannerInputError(str(error).replace("the load test", "--loadtest", 1)) from None


def _workload_name(text: str, source: str) -> str:
    from planner.manifests.writer import workload_names

    names = workload_names(text, source)
    if len(names) != 1:
        raise PlannerInputError(f"{source}: holds {len(names)} Deployments/StatefulSets; name one with --target")
    return names[0]


def _check_patched(before: str, after: str, source: str) -> None:
    """The patch must not add schema problems (ones the file already had are the user's)."""
    import yaml

    old = [d for d in yaml.safe_load_all(before) if d is not None]
    new = [d for d in yaml.safe_load_all(after) if d is not None]
    known = {str(p) for d in old for p in schema_errors(d, source=source)}
    added = [str(p) for d in new for p in schema_errors(d, source=source) if str(p) not in known]
    if added:
        raise PlannerInputError("the patched file would fail its schema: " + "; ".join(added))


def _write(files: dict[str, str], out_dir: str, patch_input: str | None) -> list[str]:
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise PlannerInputError(f"--out {out_dir}: exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in files.items():
        path = out / name
        if patch_input is not None and path.resolve() == Path(patch_input).resolve():
            raise PlannerInputError(
                f"--out {out_dir}: would overwrite the input {patch_input}; choose another directory"
            )
        write_text_atomically(path, text)
        written.append(str(path))
    return written


class _PatchSummary(TypedDict):
    """The workload file ``--patch`` edited, as ``--json`` reports it (``document`` is 1-based)."""

    file: str
    document: int
    container: str
    changes: list[str]
    warnings: list[str]


def _summary(result, plan, written, patch_summary: _PatchSummary | None) -> dict:
    return {
        "target": {"kind": plan.target_kind, "name": plan.target_name},
        "signals": list(result.signals),
        "formula": result.formula,
        "concurrency_target": plan.concurrency_target,
        "kv_usage_target": plan.kv_usage_target_frac,
        "queue_threshold_requests": plan.queue_threshold_requests,
        "min_replicas": plan.min_replicas,
        "max_replicas": plan.max_replicas,
        "max_num_seqs": plan.max_num_seqs,
        "warmup_s": plan.warmup_s,
        "scale_down_window_s": result.scale_down_window_s,
        "scale_down_period_s": result.scale_down_period_s,
        "scale_up_tolerance": plan.scale_up_tolerance_frac,
        "scale_up_tolerance_written": "tolerance" in result.hpa.document["spec"]["behavior"]["scaleUp"],
        "drain_time_s": result.grace.drain_time_s,
        "shutdown_timeout_s": result.grace.shutdown_timeout_s,
        "pre_stop_s": result.grace.pre_stop_s,
        "termination_grace_period_s": result.grace.termination_grace_period_s,
        "shutdown_flag": result.shutdown_flag,
        "files": written,
        "patch": patch_summary,
        "notes": list(result.notes),
    }
