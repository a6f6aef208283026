"""The traffic flags of the replaying commands (``simulate``, ``sweep``, ``plan``): the trace and how it is stretched.

``--trace`` is read by :func:`planner.readers.trace.read_trace` in the format
``--trace-format`` names (default ``auto``: told from the file); ``--stretch-day``
replays one day of it under a diurnal envelope
(:func:`planner.simulate.traffic.stretch_trace`), ``--stretch-days N`` N days
under a weekly one (:func:`planner.simulate.traffic.stretch_days`; N = 1 is
``--stretch-day``, bit for bit).
"""

from __future__ import annotations

import argparse

from planner.errors import PlannerInputError
from planner.readers.trace import TRACE_FORMATS, read_trace, trace_format
from planner.simulate.traffic import (
    DAY_NOISE_FRAC,
    SECONDS_PER_DAY,
    TOKEN_DISTRIBUTIONS,
    WEEKEND_DROP_FRAC,
    RequestTrace,
    WeeklyEnvelope,
    stretch_days,
    stretch_trace,
)

__all__ = ["add_traffic_arguments", "read_traffic"]

_RATE_FORMATS = ("rate", "prometheus")


def add_traffic_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--trace`` and the flags that say how to read and stretch it."""
    parser.add_argument(
        "--trace",
        required=True,
        metavar="TRACE",
        help="requests or a rate: CSV (arrival_s,input_tokens,output_tokens; Azure; BurstGPT; t_s,rate_rps), "
        "Mooncake JSONL, a Prometheus query_range JSON export, or a scenario YAML",
    )
    parser.add_argument(
        "--trace-format",
        choices=("auto", *TRACE_FORMATS),
        default="auto",
        help="the trace's format (default auto: from the file's name and content)",
    )
    parser.add_argument("--trace-model", metavar="NAME", help="a BurstGPT trace's Model to keep (ChatGPT, GPT-4)")
    parser.add_argument(
        "--trace-series",
        metavar="INDEX|LABELS",
        help="a Prometheus export's series when it holds several: its index, or labels like model_name=chat",
    )
    parser.add_argument(
        "--token-distribution",
        choices=TOKEN_DISTRIBUTIONS,
        default="fixed",
        help="lengths of a rate's requests around their means: fixed (the mean) or geometric (default fixed)",
    )
    parser.add_argument(
        "--mean-input-tokens",
        type=float,
        metavar="N",
        help="prompt length of a rate's requests (a rate trace without that column, a Prometheus export; "
        "default 512) [tokens]",
    )
    parser.add_argument(
        "--mean-output-tokens",
        type=float,
        metavar="N",
        help="answer length of a rate's requests (default 240) [tokens]",
    )
    stretch = parser.add_mutually_exclusive_group()
    stretch.add_argument(
        "--stretch-day",
        action="store_true",
        help="replay one day stretched from the trace under a diurnal envelope (seeded by --seed); "
        "the same as --stretch-days 1",
    )
    stretch.add_argument(
        "--stretch-days",
        type=int,
        metavar="N",
        help="replay N days stretched from the trace under a weekly envelope from Monday 00:00 UTC: "
        f"the daily cycle, lower weekends, days that differ by about {100 * DAY_NOISE_FRAC:g} %% (seeded by --seed)",
    )
    parser.add_argument(
        "--weekend-drop-frac",
        type=float,
        metavar="F",
        help=f"with --stretch-days: how much lower Saturday and Sunday run than a weekday "
        f"(default {WEEKEND_DROP_FRAC:g}, an assumption; measure yours) [fraction]",
    )
    parser.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="seed for a scenario's or a rate's arrivals and for --stretch-day/--stretch-days (default 0)",
    )


def read_traffic(args: argparse.Namespace) -> tuple[RequestTrace, float | None]:
    """The trace the flags name, stretched as they say, and the span it stands for.

    Returns
    -------
    RequestTrace
    float or None
        ``N x 86400`` for ``N`` stretched days; ``None`` for the trace as read (its own span). [s]
    """
    days = 1 if args.stretch_day else args.stretch_days
    if days is not None and days < 1:
        raise PlannerInputError(f"--stretch-days: expected a number of days >= 1, got {days}")
    if args.weekend_drop_frac is not None and args.stretch_days is None:
        raise PlannerInputError("--weekend-drop-frac: applies to a replay of --stretch-days N")
    kind = args.trace_format if args.trace_format != "auto" else trace_format(args.trace)
    for flag, value, formats, what in (
        ("--trace-model", args.trace_model, ("burstgpt",), "a BurstGPT trace"),
        ("--trace-series", args.trace_series, ("prometheus",), "a Prometheus export"),
        ("--mean-input-tokens", args.mean_input_tokens, _RATE_FORMATS, "a rate trace or a Prometheus export"),
        ("--mean-output-tokens", args.mean_output_tokens, _RATE_FORMATS, "a rate trace or a Prometheus export"),
    ):
        if value is not None and kind not in formats:
            raise PlannerInputError(f"{flag}: applies to {what}; {args.trace} is read as {kind}")
    given = {"mean_input_tokens": args.mean_input_tokens, "mean_output_tokens": args.mean_output_tokens}
    means = {key: value for key, value in given.items() if value is not None}
    trace = read_trace(
        args.trace,
        seed=args.seed,
        token_distribution=args.token_distribution,
        file_format=kind,
        model=args.trace_model,
        series=args.trace_series,
        **means,
    )
    if days is None:
        return trace, None
    if args.stretch_day:
        return stretch_trace(trace, args.seed, duration_s=SECONDS_PER_DAY), SECONDS_PER_DAY
    envelope = WeeklyEnvelope()
    if args.weekend_drop_frac is not None:
        envelope = WeeklyEnvelope(weekend_drop_frac=args.weekend_drop_frac)
    return stretch_days(trace, args.seed, days, envelope=envelope), days * SECONDS_PER_DAY
