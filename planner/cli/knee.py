"""``planner knee``: the knee, targets and fitted step-time model from load-test files."""

from __future__ import annotations

import argparse
import math

from planner.cli.output import print_json, print_table
from planner.errors import PlannerInputError

_REPEATS = ("worst", "mean", "refuse")  # planner.readers.loadtest.REPEATS, without importing pandas at start


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "knee",
        help="knee, concurrency/KV/queue targets and step-time fit from load-test results",
        description="Read load-test results (canonical CSV, vllm bench serve JSON or JSON lines, "
        "a directory of runs, GuideLLM benchmarks.json, per-request CSV) as one sweep and report "
        "the knee K, the target T = K/(1+growth), the KV target, the drain rate mu = K/W, "
        "the queue threshold and the step-time fit. No step meeting the objectives is a finding "
        "(exit 0), not an error.",
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="load-test files or directories (one sweep)")
    parser.add_argument("--ttft-p99-ms", type=float, required=True, help="TTFT p99 objective [ms]")
    parser.add_argument("--itl-p99-ms", type=float, required=True, help="ITL p99 objective [ms]")
    parser.add_argument(
        "--warmup-s",
        type=float,
        default=None,
        help="time for a new replica to become Ready [s]; reported with the growth",
    )
    parser.add_argument(
        "--growth-frac",
        type=float,
        default=0.2,
        help="expected growth in load during one warmup, e.g. 0.2 for +20%% (default 0.2)",
    )
    parser.add_argument(
        "--wait-budget-s",
        type=float,
        default=None,
        help="longest acceptable queue wait, for the queue-depth threshold [s]",
    )
    parser.add_argument(
        "--kv-margin-frac",
        type=float,
        default=None,
        help="KV target's relative margin under the usage at the knee (default 0.05)",
    )
    parser.add_argument(
        "--interpolate",
        action="store_true",
        help="interpolate the knee between the last passing and first failing step",
    )
    parser.add_argument(
        "--repeats",
        choices=_REPEATS,
        default="worst",
        help="repeated runs of one step: 'worst' takes the worst run's percentiles (the step "
        "passes only if every run did), 'mean' their mean, 'refuse' stops (default worst)",
    )
    parser.add_argument(
        "--mean-output-tokens",
        type=float,
        default=None,
        help="mean generated length of the workload [tokens], for a file that records no "
        "output lengths or end-to-end latency (needed for K in a rate sweep)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # pandas loads only for this command, so the others start fast.
    from planner.capacity.knee import DEFAULT_KV_MARGIN_FRAC, thresholds_from_loadtest
    from planner.readers.loadtest import read_loadtest

    if args.warmup_s is not None and not (math.isfinite(args.warmup_s) and args.warmup_s > 0):
        raise PlannerInputError(f"--warmup-s must be a finite number > 0, got {args.warmup_s!r}")
    if args.mean_output_tokens is not None and not (
        math.isfinite(args.mean_output_tokens) and args.mean_output_tokens > 0
    ):
        raise PlannerInputError(f"--mean-output-tokens must be a finite number > 0, got {args.mean_output_tokens!r}")
    kv_margin_frac = DEFAULT_KV_MARGIN_FRAC if args.kv_margin_frac is None else args.kv_margin_frac
    steps = read_loadtest(args.files, repeats=args.repeats)
    result = thresholds_from_loadtest(
        steps,
        ttft_p99_slo_ms=args.ttft_p99_ms,
        itl_p99_slo_ms=args.itl_p99_ms,
        growth_frac=args.growth_frac,
        queue_wait_budget_s=args.wait_budget_s,
        kv_margin_frac=kv_margin_frac,
        interpolate=args.interpolate,
        mean_output_tokens=args.mean_output_tokens,
    )
    payload = _payload(steps, result, args)
    if args.json:
        print_json(payload)
        return 0
    _print_text(steps, result, payload)
    return 0


def _print_text(steps, result, payload) -> None:
    knee = result.knee
    print(payload["finding"])
    print()
    withheld = "withheld (sweep too short)" if result.sweep_too_short else None
    rows = [
        ("model", payload["model"] or "(not recorded)"),
        ("steps read", payload["steps"]),
        ("step variable", result.step_variable),
        ("knee step", knee.step if knee.found else "none (no step meets the objectives)"),
        ("knee concurrency [requests]", result.knee_concurrency),
        ("  from", result.concurrency_source),
        ("knee request rate [req/s]", result.knee_request_rate_rps),
        (
            "limited by (next step)" if knee.found else "lightest step misses",
            knee.limited_by + (" (knee is a lower bound)" if knee.lower_bound else ""),
        ),
        ("inter-token p99 from", result.itl_source),
        ("preemptions checked", "yes" if result.preemptions_checked else "no (not in the file)"),
        (f"concurrency target T = K/(1+{result.growth_frac:g})", withheld or result.concurrency_target),
        ("KV usage at knee [0-1]", result.kv_usage_at_knee_frac),
        ("KV usage target [0-1]", withheld or result.kv_usage_target_frac),
        ("mean request duration W [s]", result.request_duration_s),
        ("drain rate mu [req/s]", result.drain_rate_rps),
        ("queue threshold [requests]", withheld or result.queue_threshold_requests),
    ]
    if knee.later_passing_steps:
        rows.append(("steps passing above a failure", ", ".join(map(str, knee.later_passing_steps))))
    print_table(rows, title="Knee and targets")
    for note in payload["repeats_notes"]:
        print(f"  note: {note}")
    if result.sweep_too_short:
        print(f"\nA knee needs at least {payload['min_sweep_steps']} steps. Measure a sweep, for example:\n")
        for tool, command in payload["sweep_commands"].items():
            print(f"# {tool}\n{command}\n")
    for name, fit in (("from mean TPOT", result.tpot_fit), ("from output throughput", result.throughput_fit)):
        if fit is None:
            print(f"Step-time fit {name}: not enough data")
            continue
        print_table(
            [
                ("fixed a [ms]", fit.fixed_ms),
                ("per sequence b [ms]", fit.per_sequence_ms),
                ("R^2", fit.r_squared),
                ("RMSE [ms]", fit.rmse_ms),
                ("points", fit.n_points),
            ],
            title=f"Step-time fit {name}: step = a + b x batch",
        )
        if not fit.is_plausible:
            print(
                "  warning: a fitted constant is not positive; the step-time model does not "
                "describe this sweep (cache hits or queueing dominate), so do not use a or b"
            )


def _payload(steps, result, args) -> dict:
    from planner.capacity.knee import MIN_SWEEP_STEPS, knee_finding, sweep_commands
    from planner.readers.loadtest import repeats_notes

    knee = result.knee
    payload = {
        "model": next((m for m in steps["model"] if m), ""),
        "steps": len(steps),
        "finding": knee_finding(result, steps),
        "knee_found": knee.found,
        "knee_status": knee.status,
        "lightest_misses": [
            {"metric": m.metric, "measured": m.measured, "objective": m.objective, "excess": m.excess}
            for m in knee.lightest_misses
        ],
        "step_variable": result.step_variable,
        "knee_step": knee.step,
        "knee_concurrency": result.knee_concurrency,
        "concurrency_source": result.concurrency_source,
        "knee_request_rate_rps": result.knee_request_rate_rps,
        "knee_interpolated": knee.interpolated,
        "knee_is_lower_bound": knee.lower_bound,
        "limited_by": knee.limited_by,
        "later_passing_steps": list(knee.later_passing_steps),
        "itl_source": result.itl_source,
        "preemptions_checked": result.preemptions_checked,
        "sweep_too_short": result.sweep_too_short,
        "min_sweep_steps": MIN_SWEEP_STEPS,
        "repeats": steps.attrs.get("repeats"),
        "repeats_notes": repeats_notes(steps),
        "growth_frac": result.growth_frac,
        "warmup_s": args.warmup_s,
        "mean_output_tokens": args.mean_output_tokens,
        "concurrency_target": result.concurrency_target,
        "request_duration_s": result.request_duration_s,
        "drain_rate_rps": result.drain_rate_rps,
        "drain_rate_source": result.drain_rate_source,
        "queue_wait_budget_s": result.queue_wait_budget_s,
        "queue_threshold_requests": result.queue_threshold_requests,
    }
    if result.sweep_too_short:
        payload["sweep_commands"] = sweep_commands(steps)
    if math.isfinite(result.kv_usage_at_knee_frac):
        payload["kv_usage_at_knee_frac"] = result.kv_usage_at_knee_frac
        payload["kv_usage_target"] = result.kv_usage_target_frac
    for name, fit in (("step_time_fit_tpot", result.tpot_fit), ("step_time_fit_throughput", result.throughput_fit)):
        payload[name] = (
            None
            if fit is None
            else {
                "fixed_ms": fit.fixed_ms,
                "per_sequence_ms": fit.per_sequence_ms,
                "r_squared": fit.r_squared,
                "rmse_ms": fit.rmse_ms,
                "max_abs_residual_ms": fit.max_abs_residual_ms,
                "n_points": fit.n_points,
                "plausible": fit.is_plausible,
            }
        )
    return payload
