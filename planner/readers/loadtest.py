"""Read load-test results as the tools wrote them into one tidy table of load steps.

Supported inputs (:func:`read_loadtest` detects which):

- the planner's canonical CSV, one row per load step (columns in ``data/README.md``);
- ``vllm bench serve --save-result`` JSON: one file, ``--append-result`` JSON
  lines, a ``vllm bench sweep`` ``summary.json`` list, or a directory of runs;
- GuideLLM ``benchmarks.json``: the pre-0.4 shape (benchmark-level ``args``),
  the 0.4-0.6 shape (``{args, benchmarks}``) and the 0.7+ shape
  (``{metadata: {version: 2}, config, benchmarks}``); each benchmark of a
  multi-rate report becomes one step;
- a per-request CSV (one row per request: step label, start time, TTFT,
  latency, input and output tokens), aggregated to percentiles per step.

Every reader returns the columns of :data:`COLUMNS` with their units in their
names; :func:`validate_sweep` then checks the steps form one sweep of one model.

Repeated runs of one step (``vllm bench sweep`` writes ``run=0.json``,
``run=1.json`` and a ``summary.json`` listing both) are combined into one step,
as :data:`REPEATS` describes; a result read twice (the same run in its own file
and in ``summary.json``) is counted once.
Errors are :class:`~planner.errors.PlannerInputError` naming the file, the row
or key, and what was expected.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from planner.errors import PlannerInputError

LATENCY_METRICS = ("ttft", "itl", "tpot", "e2e")
LATENCY_STATS = ("mean", "p50", "p90", "p95", "p99")

# Canonical columns, in order, with their units (also documented in data/README.md).
COLUMNS: dict[str, str] = {
    "source": "file the step was read from",
    "tool": "reader that produced the row: canonical-csv, vllm-bench-serve, guidellm or per-request-csv",
    "model": "model name as the tool recorded it",
    "step_label": "the step's name in its file",
    "concurrency": "configured cap on requests in flight [requests]",
    "request_rate_rps": "configured arrival rate; inf = all at once [requests/s]",
    "mean_concurrency": "mean requests in flight, measured or by Little's law [requests]",
    "completed_requests": "requests that finished [requests]",
    "failed_requests": "requests that errored [requests]",
    "duration_s": "length of the measured window [s]",
    "request_throughput_rps": "completed requests per second [requests/s]",
    "output_throughput_tps": "generated tokens per second [tokens/s]",
    "mean_input_tokens": "mean prompt length [tokens]",
    "mean_output_tokens": "mean generated length [tokens]",
    **{f"{metric}_{stat}_ms": f"{metric.upper()} {stat} [ms]" for metric in LATENCY_METRICS for stat in LATENCY_STATS},
    "preemptions": "vLLM preemptions during the step [count]",
    "kv_usage_frac": "peak KV-cache usage during the step [fraction of 1]",
    "run_settings": "other settings the result records, e.g. a sweep's server parameters, as key=value",
}
TEXT_COLUMNS = ("source", "tool", "model", "step_label", "run_settings")
NUMERIC_COLUMNS = tuple(c for c in COLUMNS if c not in TEXT_COLUMNS)

STEP_VARIABLES = ("concurrency", "request_rate_rps", "mean_concurrency")

# How repeated runs of one step become one step. Means are pooled exactly (weighted by
# completed requests; rates by measured time) whatever the choice; percentiles differ.
REPEATS: dict[str, str] = {
    "worst": "percentiles are the worst run's: the step passes only if every run did. The highest "
    "of the runs' p99s is not the p99 of all their requests (that needs per-request data), "
    "but it is never below it, give or take one sample's interpolation",
    "mean": "percentiles are the mean of the runs' percentiles, an estimate of the step's percentile "
    "with less run-to-run noise; a step can pass while one of its runs failed",
    "refuse": "repeated runs are an error: keep one run per step",
}

__all__ = [
    "COLUMNS",
    "REPEATS",
    "combine_runs",
    "describe_input",
    "read_canonical_csv",
    "read_guidellm",
    "read_loadtest",
    "read_per_request_csv",
    "read_vllm_bench",
    "repeats_notes",
    "step_variable",
    "validate_sweep",
]


# ---------------------------------------------------------------- dispatcher


def read_loadtest(paths: str | Path | Sequence[str | Path], *, repeats: str = "worst") -> pd.DataFrame:
    """Read one or more load-test files or directories into one validated sweep.

    Parameters
    ----------
    paths : path or sequence of paths
        Files in any supported format, or directories of ``vllm bench serve``
        / GuideLLM JSON results (read non-recursively; ``*.pytorch.json``
        sidecars are skipped).
    repeats : {"worst", "mean", "refuse"}
        How repeated runs of one step are combined (see :data:`REPEATS`).

    Returns
    -------
    pandas.DataFrame
        One row per load step, columns :data:`COLUMNS`, sorted by the step
        variable (see :func:`step_variable`).

    Raises
    ------
    PlannerInputError
        Unknown format, missing or malformed fields, or steps that do not
        form one sweep; the message names the file and the field or row.
    """
    if isinstance(paths, str | Path):
        paths = [paths]
    if not paths:
        raise PlannerInputError("no load-test file given")
    frames = [_read_one(Path(p)) for p in paths]
    return validate_sweep(pd.concat(frames, ignore_index=True), repeats=repeats)


def _read_one(path: Path) -> pd.DataFrame:
    if path.is_dir():
        files = sorted(
            f
            for f in path.iterdir()
            if f.is_file() and f.suffix in (".json", ".jsonl", ".csv") and not f.name.endswith(".pytorch.json")
        )
        if not files:
            raise PlannerInputError(f"{path}: directory holds no .json, .jsonl or .csv result files")
        return pd.concat([_read_one(f) for f in files], ignore_index=True)
    if not path.exists():
        raise PlannerInputError(f"{path}: no such file")
    if path.suffix.lower() == ".csv":
        header = _csv_header(path)
        if {"start_s", "start_time_s", "start"} & set(header) and not ({"ttft_p99_ms", "ttft_p99_s"} & set(header)):
            return read_per_request_csv(path)
        return read_canonical_csv(path)
    documents = _load_json_documents(path)
    first = documents[0]
    if isinstance(first, Mapping) and "benchmarks" in first:
        if len(documents) > 1:
            raise PlannerInputError(f"{path}: expected one GuideLLM report, found {len(documents)} JSON documents")
        return read_guidellm(path, first)
    return read_vllm_bench(path, documents)


def _csv_header(path: Path) -> list[str]:
    with path.open(newline="", encoding="utf-8-sig") as handle:
        for row in csv.reader(handle):
            if row and not row[0].lstrip().startswith("#"):
                return [c.strip() for c in row]
    raise PlannerInputError(f"{path}: empty CSV file (expected a header row)")


def _load_json_documents(path: Path) -> list:
    text = path.read_text(encoding="utf-8")
    if not text.strip():
        raise PlannerInputError(f"{path}: empty file (expected JSON)")
    try:
        document = json.loads(text)
    except json.JSONDecodeError as whole_error:
        # `--append-result` writes one JSON object per line.
        documents = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                documents.append(json.loads(line))
            except json.JSONDecodeError as error:
                if number == 1:
                    raise PlannerInputError(
                        f"{path}: not JSON or JSON lines ({whole_error.msg} at line "
                        f"{whole_error.lineno}, column {whole_error.colno})"
                    ) from None
                raise PlannerInputError(f"{path}, line {number}: not valid JSON ({error.msg})") from None
        return documents
    if isinstance(document, list):
        if not document:
            raise PlannerInputError(f"{path}: empty JSON list (expected benchmark results)")
        return document
    return [document]


# ------------------------------------------------------------- vllm bench


def read_vllm_bench(path: str | Path, documents: Iterable[Mapping] | None = None) -> pd.DataFrame:
    """Read ``vllm bench serve`` result objects (one per step).

    Parameters
    ----------
    path : path
        The file (named in errors; read if ``documents`` is None).
    documents : iterable of dict, optional
        Already-parsed result objects: a single result, the lines of an
        ``--append-result`` file, or a ``summary.json`` list.

    Notes
    -----
    ``vllm bench serve`` writes percentile keys only for the metrics in
    ``--percentile-metrics`` (default ``ttft,tpot,itl``) and the percentiles
    in ``--metric-percentiles`` (default 99); absent ones stay NaN. The mean
    in-flight count is ``request_throughput x mean_e2el`` (Little's law); if
    ``mean_e2el_ms`` was not requested it is estimated as
    ``mean_ttft + mean_tpot x (mean output tokens - 1)``, which assumes TPOT
    does not depend on the output length.
    """
    path = Path(path)
    if documents is None:
        documents = _load_json_documents(path)
    documents = list(documents)
    rows = []
    for index, document in enumerate(documents):
        where = str(path) if len(documents) == 1 else f"{path}, result {index + 1}"
        if not isinstance(document, Mapping):
            raise PlannerInputError(
                f"{where}: expected a JSON object of benchmark results, got {type(document).__name__}"
            )
        rows.append(_vllm_row(document, where, path, index, len(documents)))
    return _frame(rows)


def _vllm_row(doc: Mapping, where: str, path: Path, index: int, count: int) -> dict:
    if "request_rate" not in doc and "max_concurrency" not in doc:
        raise PlannerInputError(
            f"{where}: not a vllm bench serve result (no 'request_rate' or 'max_concurrency' key); "
            "expected the JSON written by --save-result"
        )
    completed = _number(doc, "completed", where, required=False)
    if completed == 0:
        failed = _number(doc, "failed", where, required=False)
        raise PlannerInputError(
            f"{where}: no request completed (completed=0, failed={_fmt(failed)}); "
            "its latencies are placeholders, not measurements"
        )
    for key in ("p99_ttft_ms", "p99_itl_ms"):
        if key not in doc:
            raise PlannerInputError(
                f"{where}: key '{key}' missing; run vllm bench serve with "
                "--percentile-metrics ttft,tpot,itl --metric-percentiles 99 (the defaults)"
            )
    row: dict = {
        "source": path.name,
        "tool": "vllm-bench-serve",
        "model": str(doc.get("model_id") or ""),
        "step_label": _vllm_label(doc, path, index, count),
        "concurrency": _number(doc, "max_concurrency", where, required=False),
        "request_rate_rps": _rate(doc.get("request_rate"), where),
        "completed_requests": completed,
        "failed_requests": _number(doc, "failed", where, required=False),
        "duration_s": _number(doc, "duration", where, required=False),
        "request_throughput_rps": _number(doc, "request_throughput", where, required=False),
        "output_throughput_tps": _number(doc, "output_throughput", where, required=False),
    }
    total_in = _number(doc, "total_input_tokens", where, required=False)
    total_out = _number(doc, "total_output_tokens", where, required=False)
    if completed and completed > 0:
        row["mean_input_tokens"] = total_in / completed
        row["mean_output_tokens"] = total_out / completed
    names = {"ttft": "ttft", "itl": "itl", "tpot": "tpot", "e2e": "e2el"}
    for metric, key in names.items():
        row[f"{metric}_mean_ms"] = _number(doc, f"mean_{key}_ms", where, required=False)
        row[f"{metric}_p50_ms"] = _number(doc, f"median_{key}_ms", where, required=False)
        for stat in ("p90", "p95", "p99"):
            row[f"{metric}_{stat}_ms"] = _number(doc, f"{stat}_{key}_ms", where, required=False)
    row["mean_concurrency"] = _littles_law_concurrency(row)
    row["run_settings"] = _vllm_settings(doc)
    return row


# Keys `vllm bench serve` writes itself; any other scalar key is a setting the run
# recorded (`--metadata KEY=VALUE`, or the server parameters `vllm bench sweep` adds).
_VLLM_OWN_KEYS = frozenset(
    {
        "date",
        "endpoint_type",
        "backend",
        "label",
        "model_id",
        "tokenizer_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "ramp_up_strategy",
        "ramp_up_start_rps",
        "ramp_up_end_rps",
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "request_goodput:",
        "output_throughput",
        "total_token_throughput",
        "max_output_tokens_per_s",
        "max_concurrent_requests",
        "rtfx",
        "best_of",
        "run_number",
        "total_input_sequences",
        "input_sequence_throughput",
    }
)
_VLLM_OWN_PATTERN = re.compile(r"^((mean|median|std|p[\d.]+)_\w+_ms|(probe|spec_decode|diffusion)_\w+)$")


def _vllm_settings(doc: Mapping) -> str:
    settings = []
    for key in sorted(doc):
        value = doc[key]
        if key in _VLLM_OWN_KEYS or _VLLM_OWN_PATTERN.match(key):
            continue
        if isinstance(value, str | int | float | bool) or value is None:
            settings.append(f"{key}={value}")
    return " ".join(settings)


def _vllm_label(doc: Mapping, path: Path, index: int, count: int) -> str:
    concurrency = doc.get("max_concurrency")
    rate = doc.get("request_rate")
    parts = []
    if concurrency is not None:
        parts.append(f"concurrency {concurrency}")
    if rate is not None and not (concurrency is not None and str(rate) == "inf"):
        parts.append(f"rate {rate}")
    if "run_number" in doc:
        parts.append(f"run {doc['run_number']}")
    if count > 1:
        # Several results in one file (JSON lines, a list): name which, so a duplicate can be found.
        parts.append(f"result {index + 1}")
    return ", ".join(parts) or f"{path.stem} #{index + 1}"


def _littles_law_concurrency(row: Mapping) -> float:
    throughput = row.get("request_throughput_rps", math.nan)
    duration_ms = row.get("e2e_mean_ms", math.nan)
    if not np.isfinite(duration_ms):
        ttft, tpot, out = (row.get(k, math.nan) for k in ("ttft_mean_ms", "tpot_mean_ms", "mean_output_tokens"))
        duration_ms = ttft + tpot * max(out - 1.0, 0.0) if np.isfinite(out) else math.nan
    return throughput * duration_ms / 1000.0


def _rate(value, where: str) -> float:
    if value is None:
        return math.nan
    if isinstance(value, str):
        if value.strip().lower() in ("inf", "infinity"):
            return math.inf
        try:
            value = float(value)
        except ValueError:
            raise PlannerInputError(f"{where}: key 'request_rate' must be a number or \"inf\", got {value!r}") from None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlannerInputError(f"{where}: key 'request_rate' must be a number or \"inf\", got {value!r}")
    if value <= 0 or math.isnan(value):
        raise PlannerInputError(f"{where}: key 'request_rate' must be > 0 or \"inf\", got {value!r}")
    return float(value)


def _number(doc: Mapping, key: str, where: str, *, required: bool) -> float:
    if key not in doc or doc[key] is None:
        if required:
            raise PlannerInputError(f"{where}: key '{key}' missing (expected a number)")
        return math.nan
    value = doc[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise PlannerInputError(f"{where}: key '{key}' must be a number, got {value!r}")
    value = float(value)
    if math.isnan(value) or value < 0:
        raise PlannerInputError(f"{where}: key '{key}' must be a finite number >= 0, got {value!r}")
    return value


def _fmt(value: float) -> str:
    return "?" if not np.isfinite(value) else f"{value:g}"


# ---------------------------------------------------------------- GuideLLM

_GUIDELLM_LATENCY = {
    "ttft": "time_to_first_token_ms",
    "itl": "inter_token_latency_ms",
    "tpot": "time_per_output_token_ms",
}


def read_guidellm(path: str | Path, document: Mapping | None = None) -> pd.DataFrame:
    """Read a GuideLLM ``benchmarks.json``: one step per benchmark.

    Notes
    -----
    Values come from each metric's ``successful`` distribution. GuideLLM's
    ``request_latency`` is in seconds and becomes ``e2e_*_ms``. Its
    ``time_per_output_token_ms`` includes the first token, unlike vLLM's
    TPOT; ``inter_token_latency_ms`` is the closer match to vLLM's TPOT and
    fills ``itl_*_ms``. ``mean_concurrency`` is GuideLLM's measured
    ``request_concurrency`` mean. Synchronous benchmarks have concurrency 1;
    ``throughput`` benchmarks have rate inf.
    """
    path = Path(path)
    if document is None:
        documents = _load_json_documents(path)
        document = documents[0]
    benchmarks = document.get("benchmarks")
    if not isinstance(benchmarks, list) or not benchmarks:
        raise PlannerInputError(f"{path}: key 'benchmarks' must be a non-empty list of GuideLLM benchmarks")
    report_model = _guidellm_report_model(document)
    rows = []
    for index, bench in enumerate(benchmarks):
        where = f"{path}, benchmarks[{index}]"
        if not isinstance(bench, Mapping):
            raise PlannerInputError(f"{where}: expected an object")
        rows.append(_guidellm_row(bench, where, path, index, report_model))
    return _frame(rows)


def _guidellm_report_model(document: Mapping) -> str:
    args = document.get("args")
    if isinstance(args, Mapping) and args.get("model"):
        return str(args["model"])
    config = document.get("config")
    if isinstance(config, Mapping):
        for holder in (
            config,
            config.get("backend"),
            (config.get("spec") or {}).get("backend") if isinstance(config.get("spec"), Mapping) else None,
        ):
            if isinstance(holder, Mapping) and holder.get("model"):
                return str(holder["model"])
    return ""


def _guidellm_row(bench: Mapping, where: str, path: Path, index: int, report_model: str) -> dict:
    metrics = bench.get("metrics")
    if not isinstance(metrics, Mapping):
        raise PlannerInputError(f"{where}: key 'metrics' missing (expected GuideLLM metric summaries)")
    raw_config, raw_args = bench.get("config"), bench.get("args")
    config: Mapping = raw_config if isinstance(raw_config, Mapping) else {}
    legacy_args: Mapping = raw_args if isinstance(raw_args, Mapping) else {}
    strategy = config.get("strategy") or legacy_args.get("strategy")
    if not isinstance(strategy, Mapping):
        raise PlannerInputError(f"{where}: key 'config.strategy' missing (expected the scheduling strategy)")
    kind = str(strategy.get("type_") or strategy.get("kind") or "")
    concurrency, rate = math.nan, math.nan
    if kind == "synchronous":
        concurrency = 1.0
    elif kind == "concurrent":
        concurrency = _number(strategy, "streams", f"{where}, strategy", required=True)
    elif kind == "throughput":
        rate = math.inf
        concurrency = _number(strategy, "max_concurrency", f"{where}, strategy", required=False)
    elif kind in ("constant", "poisson"):
        rate = _rate(strategy.get("rate"), f"{where}, strategy")
    else:
        raise PlannerInputError(
            f"{where}: strategy type {kind!r} unknown; expected synchronous, concurrent, "
            "throughput, constant or poisson"
        )
    model = report_model
    backend = config.get("backend")
    worker = bench.get("worker")
    if isinstance(backend, Mapping) and backend.get("model"):
        model = str(backend["model"])
    elif isinstance(worker, Mapping) and worker.get("backend_model"):
        model = str(worker["backend_model"])

    totals = metrics.get("request_totals") or bench.get("request_totals") or {}
    completed = _number(totals, "successful", f"{where}, request_totals", required=False)
    if completed == 0:
        raise PlannerInputError(f"{where}: no request succeeded (request_totals.successful=0); nothing to measure")
    row: dict = {
        "source": path.name,
        "tool": "guidellm",
        "model": model,
        "step_label": f"{kind}"
        + (f"@{_fmt(concurrency)}" if kind == "concurrent" else "")
        + (f"@{_fmt(rate)}" if kind in ("constant", "poisson") else ""),
        "concurrency": concurrency,
        "request_rate_rps": rate,
        "completed_requests": completed,
        "failed_requests": _number(totals, "errored", f"{where}, request_totals", required=False),
        "duration_s": _guidellm_duration(bench, where),
        "mean_concurrency": _guidellm_stat(metrics, "request_concurrency", "mean", where, required=False),
        "request_throughput_rps": _guidellm_stat(metrics, "requests_per_second", "mean", where, required=False),
        "output_throughput_tps": _guidellm_stat(metrics, "output_tokens_per_second", "mean", where, required=False),
        "mean_input_tokens": _guidellm_stat(metrics, "prompt_token_count", "mean", where, required=False),
        "mean_output_tokens": _guidellm_stat(metrics, "output_token_count", "mean", where, required=False),
    }
    for metric, key in _GUIDELLM_LATENCY.items():
        required = metric in ("ttft", "itl")
        for stat in LATENCY_STATS:
            row[f"{metric}_{stat}_ms"] = _guidellm_stat(metrics, key, stat, where, required=required and stat == "p99")
    for stat in LATENCY_STATS:
        seconds = _guidellm_stat(metrics, "request_latency", stat, where, required=False)
        row[f"e2e_{stat}_ms"] = seconds * 1000.0
    return row


def _guidellm_duration(bench: Mapping, where: str) -> float:
    if isinstance(bench.get("duration"), int | float):
        return _number(bench, "duration", where, required=False)
    timing = bench.get("scheduler_metrics")
    if isinstance(timing, Mapping):
        start, end = timing.get("measure_start_time"), timing.get("measure_end_time")
        if isinstance(start, int | float) and isinstance(end, int | float) and end > start:
            return float(end - start)
    return math.nan


def _guidellm_stat(metrics: Mapping, name: str, stat: str, where: str, *, required: bool) -> float:
    summary = metrics.get(name)
    dist = summary.get("successful") if isinstance(summary, Mapping) else None
    if not isinstance(dist, Mapping):
        if required:
            raise PlannerInputError(
                f"{where}: key 'metrics.{name}.successful' missing (expected a distribution summary)"
            )
        return math.nan
    if stat == "mean":
        return _number(dist, "mean", f"{where}, metrics.{name}.successful", required=required)
    percentiles = dist.get("percentiles")
    if not isinstance(percentiles, Mapping):
        if required:
            raise PlannerInputError(f"{where}: key 'metrics.{name}.successful.percentiles' missing")
        return math.nan
    if stat == "p50" and "p50" not in percentiles:
        # Older reports have no p50 percentile; the median is the same statistic.
        return _number(dist, "median", f"{where}, metrics.{name}.successful", required=required)
    return _number(percentiles, stat, f"{where}, metrics.{name}.successful.percentiles", required=required)


# ------------------------------------------------------------ canonical CSV

_UNIT_FACTORS_TO_MS = {"ms": 1.0, "s": 1000.0, "us": 0.001}
_LATENCY_PATTERN = re.compile(r"^(ttft|itl|tpot|e2e)_(mean|p50|p90|p95|p99)(?:_(.*))?$")
_FRACTION_UNITS = {"frac": 1.0, "pct": 0.01}


def read_canonical_csv(path: str | Path) -> pd.DataFrame:
    """Read the planner's canonical CSV: one row per load step.

    Required: ``concurrency`` or ``request_rate_rps``; ``ttft_p99_ms`` and
    ``itl_p99_ms``. Latency columns may be in ``_ms``, ``_s`` or ``_us``
    (converted to ms); KV usage as ``kv_usage_frac`` or ``kv_usage_pct``.
    Other columns of :data:`COLUMNS` are optional; columns the planner does
    not know are ignored, except a latency or KV column with an unknown unit.
    The step column must increase from row to row.
    """
    path = Path(path)
    try:
        raw = pd.read_csv(path, comment="#", skipinitialspace=True, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as error:
        raise PlannerInputError(f"{path}: not a readable CSV ({error})") from None
    raw.columns = [str(c).strip() for c in raw.columns]
    if raw.empty:
        raise PlannerInputError(f"{path}: no data rows (expected one row per load step)")
    columns = _canonical_columns(raw.columns, path)
    present = {canonical for canonical, _ in columns.values()}
    if not {"concurrency", "request_rate_rps"} & present:
        raise PlannerInputError(
            f"{path}: missing column 'concurrency' or 'request_rate_rps' (the load step of each row)"
        )
    for needed in ("ttft_p99_ms", "itl_p99_ms"):
        if needed not in present:
            raise PlannerInputError(f"{path}: missing column '{needed}' (also accepted in _s or _us)")
    rows = []
    for position, record in enumerate(raw.to_dict("records")):
        row_where = f"{path}, row {position + 2}"  # header is line 1
        row: dict = {"source": path.name, "tool": "canonical-csv", "model": "", "step_label": ""}
        for original, (canonical, factor) in columns.items():
            text = str(record[original]).strip()
            if canonical in TEXT_COLUMNS:
                row[canonical] = text
                continue
            row[canonical] = _csv_number(text, original, row_where, canonical) * factor
        if not row["step_label"]:
            row["step_label"] = f"row {position + 2}"
        rows.append(row)
    frame = _frame(rows)
    _require_increasing(frame, path)
    return frame


def _canonical_columns(names: Iterable[str], path: Path) -> dict[str, tuple[str, float]]:
    mapping: dict[str, tuple[str, float]] = {}
    for name in names:
        key = name.lower()
        if key in COLUMNS:
            mapping[name] = (key, 1.0)
            continue
        match = _LATENCY_PATTERN.match(key)
        if match:
            metric, stat, unit = match.groups()
            if unit not in _UNIT_FACTORS_TO_MS:
                raise PlannerInputError(
                    f"{path}: column '{name}' has unknown unit {unit or '(none)'!r}; "
                    f"expected {metric}_{stat}_ms, _s or _us"
                )
            mapping[name] = (f"{metric}_{stat}_ms", _UNIT_FACTORS_TO_MS[unit])
            continue
        if key.startswith("kv_usage"):
            unit = key.removeprefix("kv_usage").lstrip("_")
            if unit not in _FRACTION_UNITS:
                raise PlannerInputError(
                    f"{path}: column '{name}' has unknown unit {unit or '(none)'!r}; "
                    "expected kv_usage_frac (0-1) or kv_usage_pct (0-100)"
                )
            mapping[name] = ("kv_usage_frac", _FRACTION_UNITS[unit])
    duplicated = [c for c in {v[0] for v in mapping.values()} if sum(v[0] == c for v in mapping.values()) > 1]
    if duplicated:
        names_for = [n for n, v in mapping.items() if v[0] == duplicated[0]]
        raise PlannerInputError(f"{path}: columns {names_for} give the same quantity twice")
    return mapping


def _csv_number(text: str, column: str, where: str, canonical: str) -> float:
    if text == "" or text.lower() in ("nan", "na", "n/a", "null", "none"):
        if canonical in ("ttft_p99_ms", "itl_p99_ms"):
            raise PlannerInputError(f"{where}: column '{column}' is empty or NaN (expected a number >= 0)")
        return math.nan
    if canonical == "request_rate_rps" and text.lower() in ("inf", "infinity"):
        return math.inf
    try:
        value = float(text)
    except ValueError:
        raise PlannerInputError(f"{where}: column '{column}' must be a number, got {text!r}") from None
    if math.isnan(value):
        raise PlannerInputError(f"{where}: column '{column}' is NaN (expected a number >= 0)")
    if value < 0:
        raise PlannerInputError(f"{where}: column '{column}' is negative ({text}); expected a number >= 0")
    return value


def _require_increasing(frame: pd.DataFrame, path: Path) -> None:
    variable = "concurrency" if frame["concurrency"].notna().all() else "request_rate_rps"
    values = frame[variable].to_numpy(dtype=float)
    for i in range(1, len(values)):
        if values[i] == values[i - 1]:
            raise PlannerInputError(
                f"{path}, row {i + 2}: duplicated step ({variable} {values[i]:g} also on row {i + 1})"
            )
        if values[i] < values[i - 1]:
            raise PlannerInputError(
                f"{path}, row {i + 2}: steps must increase; {variable} {values[i]:g} "
                f"follows {values[i - 1]:g} on row {i + 1}"
            )


# -------------------------------------------------------- per-request CSV

_PER_REQUEST_ALIASES = {
    "step": ("step", "step_label"),
    "start_s": ("start_s", "start_time_s", "start"),
    "ttft": ("ttft_ms", "ttft_s"),
    "latency": ("latency_ms", "latency_s", "e2e_ms", "e2e_s"),
    "input_tokens": ("input_tokens", "prompt_tokens"),
    "output_tokens": ("output_tokens",),
}


def read_per_request_csv(path: str | Path) -> pd.DataFrame:
    """Aggregate a per-request CSV into one row per step.

    Columns: ``step`` (label), ``start_s`` (start time, any origin),
    ``ttft_ms`` or ``ttft_s``, ``latency_ms`` or ``latency_s`` (end-to-end),
    ``input_tokens``, ``output_tokens``; optional ``concurrency`` or
    ``request_rate_rps`` (the step's setting, constant within a step) and
    ``model``. Steps keep their first-appearance order.

    Notes
    -----
    Per request, TPOT = (latency - TTFT) / (output tokens - 1) (requests with
    one output token have none). A per-request CSV has no token timestamps, so
    ``itl_*`` columns are left NaN and the knee uses TPOT percentiles for the
    inter-token SLO. ``mean_concurrency`` is the time average of requests in
    flight over the step's window (sum of latencies / window), exact for that
    window; the request rate is completions over the same window.
    Percentiles use numpy's default (linear) method.
    """
    path = Path(path)
    try:
        raw = pd.read_csv(path, comment="#", skipinitialspace=True, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, UnicodeDecodeError) as error:
        raise PlannerInputError(f"{path}: not a readable CSV ({error})") from None
    raw.columns = [str(c).strip().lower() for c in raw.columns]
    if raw.empty:
        raise PlannerInputError(f"{path}: no data rows (expected one row per request)")
    found: dict[str, str] = {}
    for role, aliases in _PER_REQUEST_ALIASES.items():
        present = [a for a in aliases if a in raw.columns]
        if not present:
            raise PlannerInputError(
                f"{path}: missing column '{aliases[0]}' (per-request CSV; also accepted: "
                f"{', '.join(aliases[1:]) or 'none'})"
            )
        found[role] = present[0]
    for column in raw.columns:
        if column.startswith(("ttft_", "latency_", "e2e_")) and column not in sum(_PER_REQUEST_ALIASES.values(), ()):
            raise PlannerInputError(f"{path}: column '{column}' has an unknown unit; expected _ms or _s")
    numeric: dict[str, np.ndarray] = {}
    for role in ("start_s", "ttft", "latency", "input_tokens", "output_tokens"):
        column = found[role]
        values = []
        for i, text in enumerate(raw[column]):
            values.append(_csv_number(str(text).strip(), column, f"{path}, row {i + 2}", "ttft_p99_ms"))
        factor = 1000.0 if column.endswith("_s") and role in ("ttft", "latency") else 1.0
        numeric[role] = np.asarray(values) * factor
    for optional in ("concurrency", "request_rate_rps"):
        if optional in raw.columns:
            numeric[optional] = np.asarray(
                [
                    _csv_number(str(t).strip(), optional, f"{path}, row {i + 2}", optional)
                    for i, t in enumerate(raw[optional])
                ]
            )
    bad = np.flatnonzero(numeric["latency"] < numeric["ttft"])
    if bad.size:
        i = int(bad[0])
        raise PlannerInputError(
            f"{path}, row {i + 2}: latency ({numeric['latency'][i]:g} ms) is shorter than TTFT "
            f"({numeric['ttft'][i]:g} ms)"
        )
    labels = raw[found["step"]].astype(str).str.strip().to_numpy()
    models = raw["model"].astype(str).str.strip().to_numpy() if "model" in raw.columns else np.full(labels.size, "")
    rows = []
    for label in dict.fromkeys(labels):
        mask = labels == label
        rows.append(_aggregate_step(path, label, mask, numeric, models))
    return _frame(rows)


def _aggregate_step(path: Path, label: str, mask: np.ndarray, numeric: Mapping, models: np.ndarray) -> dict:
    start_s = numeric["start_s"][mask]
    ttft = numeric["ttft"][mask]
    latency = numeric["latency"][mask]
    out = numeric["output_tokens"][mask]
    multi = out > 1
    tpot = (latency[multi] - ttft[multi]) / (out[multi] - 1.0)
    window_s = float(np.max(start_s + latency / 1000.0) - np.min(start_s))
    row: dict = {
        "source": path.name,
        "tool": "per-request-csv",
        "model": str(models[mask][0]),
        "step_label": label,
        "completed_requests": float(mask.sum()),
        "failed_requests": math.nan,
        "duration_s": window_s,
        "mean_input_tokens": float(numeric["input_tokens"][mask].mean()),
        "mean_output_tokens": float(out.mean()),
    }
    step_models = set(models[mask])
    if len(step_models) > 1:
        raise PlannerInputError(f"{path}: step {label!r} mixes models {sorted(step_models)}")
    for setting in ("concurrency", "request_rate_rps"):
        if setting in numeric:
            values = np.unique(numeric[setting][mask])
            if values.size > 1:
                raise PlannerInputError(
                    f"{path}: step {label!r} has several {setting} values {values.tolist()}; expected one per step"
                )
            row[setting] = float(values[0])
    if window_s > 0:
        row["mean_concurrency"] = float(latency.sum() / 1000.0 / window_s)
        row["request_throughput_rps"] = float(mask.sum() / window_s)
        row["output_throughput_tps"] = float(out.sum() / window_s)
    for metric, values in (("ttft", ttft), ("e2e", latency), ("tpot", tpot)):
        if values.size == 0:
            continue
        row[f"{metric}_mean_ms"] = float(values.mean())
        for stat in ("p50", "p90", "p95", "p99"):
            row[f"{metric}_{stat}_ms"] = float(np.percentile(values, float(stat[1:])))
    return row


# --------------------------------------------------------------- the sweep


def _frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    for column in COLUMNS:
        if column not in frame:
            frame[column] = "" if column in TEXT_COLUMNS else math.nan
    frame = frame[list(COLUMNS)]
    for column in NUMERIC_COLUMNS:
        frame[column] = frame[column].astype(float)
    return frame


def step_variable(frame: pd.DataFrame) -> str:
    """The column the sweep steps along.

    The configured ``concurrency`` when every step has one, unless it is the
    same for all steps while the configured request rate varies (a rate sweep
    under a fixed cap); then ``request_rate_rps`` when every step has one;
    else the measured ``mean_concurrency`` (a GuideLLM sweep mixing
    synchronous, throughput and rate steps).
    """
    concurrency, rate = frame["concurrency"], frame["request_rate_rps"]
    rate_varies = rate.notna().all() and rate.nunique() > 1
    if concurrency.notna().all() and not (concurrency.nunique() == 1 and len(frame) > 1 and rate_varies):
        return "concurrency"
    if rate.notna().all():
        return "request_rate_rps"
    if frame["mean_concurrency"].notna().all():
        return "mean_concurrency"
    raise PlannerInputError(
        "steps mix concurrency and request-rate settings and have no measured mean concurrency: "
        + "; ".join(f"{r.source} ({r.step_label})" for r in frame.itertuples())
    )


def validate_sweep(frame: pd.DataFrame, *, repeats: str = "worst") -> pd.DataFrame:
    """Check that the steps form one sweep of one model, combine repeated runs, and sort by load.

    Parameters
    ----------
    frame : pandas.DataFrame
        Rows of :data:`COLUMNS`, one per result read.
    repeats : {"worst", "mean", "refuse"}
        How repeated runs of one step are combined (see :data:`REPEATS`).

    Returns
    -------
    pandas.DataFrame
        One row per step, sorted by the step variable. ``attrs`` holds
        ``step_variable``, ``repeats`` (the choice), ``combined_steps`` (one
        sentence per step made of several runs) and ``dropped_duplicates``
        (one sentence per result read twice).

    Raises
    ------
    PlannerInputError
        Mixed models; repeated steps with ``repeats="refuse"`` or whose runs
        record different settings; NaN TTFT or inter-token p99; negative or
        NaN values where a measurement is required; KV usage outside [0, 1].
    """
    if repeats not in REPEATS:
        raise PlannerInputError(f"repeats must be one of {', '.join(REPEATS)}, got {repeats!r}")
    if frame.empty:
        raise PlannerInputError("no load steps found")
    models = {m for m in frame["model"] if m}
    if len(models) > 1:
        by_model = {m: sorted(set(frame.loc[frame["model"] == m, "source"])) for m in sorted(models)}
        raise PlannerInputError(
            "mixed models in one sweep: " + "; ".join(f"{m!r} in {', '.join(files)}" for m, files in by_model.items())
        )
    for row in frame.itertuples():
        where = f"{row.source} ({row.step_label})"
        if not np.isfinite(row.ttft_p99_ms):
            raise PlannerInputError(f"{where}: TTFT p99 missing or NaN")
        if not (np.isfinite(row.itl_p99_ms) or np.isfinite(row.tpot_p99_ms)):
            raise PlannerInputError(f"{where}: ITL p99 (or TPOT p99) missing or NaN")
        if np.isfinite(row.kv_usage_frac) and row.kv_usage_frac > 1.0:
            raise PlannerInputError(
                f"{where}: kv_usage_frac {row.kv_usage_frac:g} is above 1; a percentage belongs in kv_usage_pct"
            )
    negative = frame[list(NUMERIC_COLUMNS)].lt(0)
    if negative.to_numpy().any():
        i, column = next((i, c) for c in negative.columns for i in negative.index[negative[c]])
        raise PlannerInputError(f"{frame.at[i, 'source']} ({frame.at[i, 'step_label']}): {column} is negative")
    frame, dropped = _drop_results_read_twice(frame)
    variable = step_variable(frame)
    ordered = frame.sort_values(variable, kind="stable").reset_index(drop=True)
    rows, combined = [], []
    for value, group in ordered.groupby(variable, sort=True, dropna=False):
        if len(group) == 1:
            rows.append(group.iloc[0].to_dict())
            continue
        a, b = group.iloc[0], group.iloc[1]
        if repeats == "refuse":
            raise PlannerInputError(
                f"duplicated step: {variable} {value:g} in {a.source} ({a.step_label}) and "
                f"{b.source} ({b.step_label}); keep one run per step, or combine the runs "
                f"(repeats 'worst' or 'mean')"
            )
        _require_same_settings(group, variable, value)
        rows.append(combine_runs(group, repeats))
        combined.append(
            f"At {variable} {value:g}, {len(group)} runs were combined: "
            + ", ".join(f"{r.source} ({r.step_label})" for r in group.itertuples())
            + "."
        )
    result = _frame(rows)
    result.attrs.update(step_variable=variable, repeats=repeats, combined_steps=combined, dropped_duplicates=dropped)
    return result


def _drop_results_read_twice(frame: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    # The same run in its own file and in a summary list: identical numbers, counted once.
    key = pd.Series(
        [
            "|".join(map(repr, values))
            for values in frame[["model", "run_settings", *NUMERIC_COLUMNS]].itertuples(index=False)
        ],
        index=frame.index,
    )
    first = ~key.duplicated(keep="first")
    dropped = []
    for i in np.flatnonzero(~first.to_numpy()):
        kept = frame.loc[(first & (key == key.iloc[i])).to_numpy()].iloc[0]
        dropped.append(
            f"{frame.iloc[i].source} ({frame.iloc[i].step_label}) repeats "
            f"{kept.source} ({kept.step_label}), so it is counted once."
        )
    return frame[first.to_numpy()].reset_index(drop=True), dropped


def _require_same_settings(group: pd.DataFrame, variable: str, value: float) -> None:
    # Runs are repeats only if everything the files record about how they ran agrees.
    settings = [dict(item.split("=", 1) for item in text.split()) for text in group["run_settings"]]
    for column in ("concurrency", "request_rate_rps", "tool"):
        settings = [
            {**s, column: f"{v:g}" if isinstance(v, float) else str(v)}
            for s, v in zip(settings, group[column], strict=True)
        ]
    keys = sorted({k for s in settings for k in s})
    differing = [k for k in keys if len({s.get(k, "(none)") for s in settings}) > 1]
    if differing:
        key = differing[0]
        where = "; ".join(
            f"{s.get(key, '(none)')} in {r.source} ({r.step_label})"
            for s, r in zip(settings, group.itertuples(), strict=True)
        )
        raise PlannerInputError(
            f"{variable} {value:g} appears in results that differ in {', '.join(differing)} "
            f"({key}: {where}); these are not repeats of one step, so read them as separate sweeps"
        )


_SUMMED = ("completed_requests", "failed_requests", "duration_s", "preemptions")
_TIME_AVERAGED = ("request_throughput_rps", "output_throughput_tps", "mean_concurrency")


def combine_runs(runs: pd.DataFrame, how: str = "worst") -> dict:
    """One step from several runs of it.

    Parameters
    ----------
    runs : pandas.DataFrame
        Rows of :data:`COLUMNS` for the same step.
    how : {"worst", "mean"}
        The percentiles' combination (see :data:`REPEATS`).

    Returns
    -------
    dict
        One row: counts and durations summed; throughputs and the mean in
        flight averaged over measured time (weighted by each run's duration,
        which equals total completions over total time); means of latency
        and length weighted by completed requests (the exact mean of all the
        requests); peak KV usage the highest peak (exact); percentiles as
        ``how`` says.

    Notes
    -----
    The mean ITL is a mean over tokens; weighting it by requests is exact
    when the runs generate the same mean length, as repeats of one step do.
    """
    if how not in ("worst", "mean"):
        raise PlannerInputError(f"how must be 'worst' or 'mean', got {how!r}")
    first = runs.iloc[0]
    row = {column: first[column] for column in COLUMNS}
    row["source"] = " + ".join(dict.fromkeys(runs["source"]))
    row["step_label"] = f"{len(runs)} runs combined ({how} percentiles)"
    completed = runs["completed_requests"].to_numpy(dtype=float)
    duration = runs["duration_s"].to_numpy(dtype=float)
    for column in NUMERIC_COLUMNS:
        values = runs[column].to_numpy(dtype=float)
        if column in ("concurrency", "request_rate_rps"):
            continue
        if column in _SUMMED:
            row[column] = float(values.sum())
        elif column in _TIME_AVERAGED:
            row[column] = _weighted_mean(values, duration)
        elif column == "kv_usage_frac":
            row[column] = float(values.max())
        elif column.endswith("_mean_ms") or column.startswith("mean_"):
            row[column] = _weighted_mean(values, completed)
        else:  # percentiles
            row[column] = float(values.max() if how == "worst" else values.mean())
    return row


def _weighted_mean(values: np.ndarray, weights: np.ndarray) -> float:
    # NaN stays NaN (not measured); without weights every run counts the same.
    if not np.isfinite(weights).all() or weights.sum() <= 0:
        return float(values.mean())
    return float((values * weights).sum() / weights.sum())


# ------------------------------------------------------------ what was read

_TOOL_NAMES = {
    "vllm-bench-serve": "vllm bench serve",
    "guidellm": "GuideLLM",
    "canonical-csv": "the planner's CSV",
    "per-request-csv": "a per-request CSV",
}
_SYNTHETIC_MARK = "SYNTHETIC sample generated by data/make_samples.py"


def describe_input(paths: str | Path | Sequence[str | Path], steps: pd.DataFrame) -> str:
    """One sentence saying what was read: the synthetic sample, or the user's files.

    Parameters
    ----------
    paths : path or sequence of paths
        What :func:`read_loadtest` was given.
    steps : pandas.DataFrame
        What it returned.
    """
    given = [Path(paths)] if isinstance(paths, str | Path) else [Path(p) for p in paths]
    files = [f for p in given for f in (sorted(p.iterdir()) if p.is_dir() else [p]) if f.is_file()]
    synthetic = bool(files) and all(
        _SYNTHETIC_MARK in f.read_text(encoding="utf-8", errors="replace")[:400] for f in files
    )
    model = next((m for m in steps["model"] if m), "") or "an unnamed model"
    count = f"{len(steps)} step{'' if len(steps) == 1 else 's'}"
    variable = {
        "concurrency": "concurrency",
        "request_rate_rps": "request rate",
        "mean_concurrency": "measured requests in flight",
    }[steps.attrs.get("step_variable", "concurrency")]
    if synthetic:
        return (
            f"The input is a synthetic sweep bundled with the planner ({count} of {model} by {variable}, "
            "written from the step-time model with noise; no GPU produced it)."
        )
    tools = ", ".join(dict.fromkeys(_TOOL_NAMES.get(t, t) for t in steps["tool"]))
    names = ", ".join(p.name for p in given)
    return f"The input is {names}: {count} of {model} by {variable}, written by {tools}."


def repeats_notes(steps: pd.DataFrame) -> list[str]:
    """Sentences on how repeated runs and results read twice were handled (empty when neither occurred)."""
    notes = list(steps.attrs.get("dropped_duplicates", []))
    combined = steps.attrs.get("combined_steps", [])
    if combined:
        how = steps.attrs["repeats"]
        notes += combined
        notes.append(f"With repeats '{how}', {REPEATS[how]}; means are pooled over all the runs' requests.")
    return notes
