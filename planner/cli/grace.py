"""`planner grace`: size terminationGracePeriodSeconds and vLLM's --shutdown-timeout."""

from __future__ import annotations

import argparse

from planner.cli.output import print_json, print_table
from planner.dynamics.grace import (
    DEFAULT_TERMINATION_GRACE_PERIOD_S,
    DEFAULT_VLLM_SHUTDOWN_TIMEOUT_S,
    check_grace,
    drain_time_s,
    plan_grace,
)

# The maths' parameter names, as the flags that feed them (for error messages).
PARAMETER_FLAGS = {
    "max_output_tokens": "--max-tokens",
    "itl_ms": "--itl-ms",
    "ttft_ms": "--ttft-ms",
    "pre_stop_s": "--pre-stop-s",
    "margin_frac": "--margin-frac",
    "termination_grace_period_s": "--grace-period-s",
    "shutdown_timeout_s": "--shutdown-timeout-s",
}


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "grace",
        help="grace period and shutdown timeout that let the longest generation finish",
        description=(
            "Compute how long the longest allowed generation takes to finish, recommend vLLM's "
            "--shutdown-timeout and the pod's terminationGracePeriodSeconds, and check the "
            "settings you have now. Exit status 1 when the current settings cut generations off."
        ),
    )
    parser.add_argument(
        "--max-tokens", type=float, required=True, help="largest max_tokens the service accepts [tokens]"
    )
    parser.add_argument(
        "--itl-ms", type=float, required=True, help="inter-token latency while draining; use a high percentile [ms]"
    )
    parser.add_argument("--ttft-ms", type=float, default=0.0, help="time to first token [ms]")
    parser.add_argument("--pre-stop-s", type=float, default=0.0, help="preStop hook duration [s]")
    parser.add_argument(
        "--margin-frac", type=float, default=0.1, help="safety margin on the drain time (default 0.1) [fraction]"
    )
    parser.add_argument(
        "--grace-period-s",
        type=float,
        default=DEFAULT_TERMINATION_GRACE_PERIOD_S,
        help="current terminationGracePeriodSeconds (default 30) [s]",
    )
    parser.add_argument(
        "--shutdown-timeout-s",
        type=float,
        default=DEFAULT_VLLM_SHUTDOWN_TIMEOUT_S,
        help="current vLLM --shutdown-timeout (default 0) [s]",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    drain_s = drain_time_s(args.max_tokens, args.itl_ms, args.ttft_ms)
    plan = plan_grace(drain_s, pre_stop_s=args.pre_stop_s, margin_frac=args.margin_frac)
    check = check_grace(args.grace_period_s, args.shutdown_timeout_s, drain_s, args.pre_stop_s)
    if args.json:
        print_json(
            {
                "drain_time_s": drain_s,
                "recommended_shutdown_timeout_s": plan.shutdown_timeout_s,
                "recommended_termination_grace_period_s": plan.termination_grace_period_s,
                "pre_stop_s": plan.pre_stop_s,
                "current_ok": check.ok,
                "problems": list(check.problems),
            }
        )
    else:
        print_table(
            [
                ("longest generation finishes in", f"{drain_s:g} s"),
                ("vLLM --shutdown-timeout", f"{plan.shutdown_timeout_s} s"),
                ("terminationGracePeriodSeconds", f"{plan.termination_grace_period_s} s"),
            ],
            title="Recommended",
        )
        print("Current settings: " + ("OK" if check.ok else "generations are cut off"))
        for problem in check.problems:
            print(f"  - {problem}")
    return 0 if check.ok else 1
