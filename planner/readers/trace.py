"""Read request traces and rate traces: CSV, Mooncake JSON Lines, a Prometheus range-query export, a scenario.

Seven formats (:data:`TRACE_FORMATS`), told apart by :func:`trace_format` or
named (``file_format=``, ``--trace-format``). The CSV shapes, by their header:

``arrival_s,input_tokens,output_tokens`` (canonical request trace)
    One row per request: arrival time from the start of the trace [s],
    prompt length and answer length [tokens]. Rows sorted by arrival.
``TIMESTAMP,ContextTokens,GeneratedTokens`` (Azure LLM inference trace)
    The public Azure traces (2023, published with the Splitwise paper):
    wall-clock arrival like ``2023-11-16 18:17:03.9799600`` (up to 9
    fractional digits; 100 ns ticks in the published files), kept to the
    nanosecond, and made relative to the first request.
``t_s,rate_rps[,mean_input_tokens,mean_output_tokens]`` (rate trace)
    A piecewise-constant arrival rate: ``rate_rps`` holds from its row's
    ``t_s`` until the next row's. The last row holds until ``end_s`` (by
    default one more step as long as the one before it). Requests come from a
    seeded non-homogeneous Poisson process (:meth:`RateTrace.requests`).
``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type`` (BurstGPT)
    The BurstGPT traces (github.com/HPMLL/BurstGPT; arXiv 2401.17644):
    ``Timestamp`` in seconds from midnight of the trace's first day, kept as
    it is (so the time of day stays). Failed requests, written with 0
    ``Response tokens``, are dropped: whether a failure cost the server a
    prefill is not recorded, and the engines replay answers of at least one
    token; the publishers' own ``BurstGPT_without_fails`` files drop them too.
    The trace's ``source`` says how many were dropped. ``model=`` keeps one
    ``Model`` (``ChatGPT`` or ``GPT-4``); ``Total tokens`` and ``Log Type`` are
    checked and not used, and further columns (the publishers announce
    session ids and elapsed times) are ignored.

The other formats: ``mooncake`` (JSON Lines with ``timestamp`` in ms,
``input_length``, ``output_length``, ``hash_ids``; :mod:`planner.readers.mooncake`),
``prometheus`` (the JSON of ``/api/v1/query_range`` holding a request rate;
:mod:`planner.readers.range_query`) and ``scenario`` (``.yaml``;
:mod:`planner.readers.scenario`). A rate (a rate trace, a Prometheus export)
or a scenario becomes requests by a seeded Poisson draw.

Auto-detection: ``.yaml``/``.yml`` is a scenario; a file whose first line is
a JSON object with ``timestamp`` (or any ``.jsonl``) is Mooncake; other JSON
holding ``"status"`` or ``"resultType"`` is a Prometheus export; anything else
is CSV, told by its header.

Every problem raises :class:`~planner.errors.PlannerInputError` naming the
file, the 1-based data row of a CSV (the first row after the header is row
1), the line of a JSON Lines file or the key of a JSON document, and what was
expected: unparseable or unsorted times, negative or non-integer token
counts, an answer of 0 tokens, an empty file or trace, a missing or unknown
column.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from planner.errors import PlannerInputError
from planner.readers.mooncake import read_mooncake_trace
from planner.readers.range_query import read_range_query
from planner.readers.scenario import read_scenario
from planner.simulate.scenario import scenario_trace
from planner.simulate.traffic import DEFAULT_MEAN_INPUT_TOKENS, DEFAULT_MEAN_OUTPUT_TOKENS, RateTrace, RequestTrace

__all__ = [
    "AZURE_COLUMNS",
    "BURSTGPT_COLUMNS",
    "CANONICAL_COLUMNS",
    "DEFAULT_MEAN_INPUT_TOKENS",
    "DEFAULT_MEAN_OUTPUT_TOKENS",
    "RATE_COLUMNS",
    "RATE_OPTIONAL_COLUMNS",
    "TRACE_FORMATS",
    "read_burstgpt_trace",
    "read_rate_trace",
    "read_request_trace",
    "read_trace",
    "trace_format",
]

CANONICAL_COLUMNS = ("arrival_s", "input_tokens", "output_tokens")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
RATE_COLUMNS = ("t_s", "rate_rps")
RATE_OPTIONAL_COLUMNS = ("mean_input_tokens", "mean_output_tokens")
BURSTGPT_COLUMNS = ("Timestamp", "Model", "Request tokens", "Response tokens", "Total tokens", "Log Type")
TRACE_FORMATS = ("canonical", "azure", "rate", "burstgpt", "mooncake", "prometheus", "scenario")
"""The formats :func:`read_trace` reads, as ``file_format=`` and ``--trace-format`` name them."""

# name -> (required columns, optional columns, whether other columns are allowed)
_SHAPES = {
    "canonical": (CANONICAL_COLUMNS, (), False),
    "azure": (AZURE_COLUMNS, (), False),
    "rate": (RATE_COLUMNS, RATE_OPTIONAL_COLUMNS, False),
    "burstgpt": (BURSTGPT_COLUMNS, (), True),
}
_SHAPE_NAMES = {
    "canonical": "canonical request trace",
    "azure": "Azure LLM trace",
    "rate": "rate trace",
    "burstgpt": "BurstGPT trace",
    "mooncake": "Mooncake trace",
    "prometheus": "Prometheus range-query export",
    "scenario": "scenario",
}
_EXPECTED = (
    "expected a header of arrival_s,input_tokens,output_tokens (request trace), "
    "TIMESTAMP,ContextTokens,GeneratedTokens (Azure LLM trace), "
    "t_s,rate_rps[,mean_input_tokens,mean_output_tokens] (rate trace) or "
    "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type (BurstGPT)"
)
_AZURE_TIME_FORMATS = ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S")
_JSON_PEEK_CHARS = 65_536


def trace_format(path: str | Path) -> str:
    """Which of :data:`TRACE_FORMATS` the file is, from its name and content (see the module's notes).

    Raises
    ------
    PlannerInputError
        Missing file, empty file, a CSV with a missing column or an unknown
        header, JSON that is neither Mooncake nor a Prometheus export.
    """
    path = Path(path)
    if path.suffix.lower() in (".yaml", ".yml"):
        return "scenario"
    return _content_format(path)


def read_request_trace(path: str | Path) -> RequestTrace:
    """Read a canonical or Azure request trace.

    Returns
    -------
    RequestTrace
        Arrivals [s] from the start (the first request for the Azure shape),
        and int64 token counts.
    """
    path = Path(path)
    shape = trace_format(path)
    if shape not in ("canonical", "azure"):
        raise PlannerInputError(
            f"{path}: this is a {_SHAPE_NAMES[shape]}, not a canonical or Azure request trace; read it with read_trace"
        )
    frame = _read_frame(path, ("TIMESTAMP",) if shape == "azure" else ())
    if shape == "azure":
        ns = _azure_times_ns(path, frame["TIMESTAMP"])
        _require_sorted(path, "TIMESTAMP", ns)
        arrival_s = (ns - ns[0]) / 1e9
        input_tokens = _tokens(path, frame, "ContextTokens", minimum=0)
        output_tokens = _tokens(path, frame, "GeneratedTokens", minimum=1)
    else:
        arrival_s = _numbers(path, frame, "arrival_s", minimum=0.0)
        _require_sorted(path, "arrival_s", arrival_s)
        input_tokens = _tokens(path, frame, "input_tokens", minimum=0)
        output_tokens = _tokens(path, frame, "output_tokens", minimum=1)
    return RequestTrace(arrival_s, input_tokens, output_tokens, str(path))


def read_rate_trace(
    path: str | Path,
    *,
    end_s: float | None = None,
    mean_input_tokens: float | None = None,
    mean_output_tokens: float | None = None,
) -> RateTrace:
    """Read a ``t_s,rate_rps[,mean_input_tokens,mean_output_tokens]`` file.

    Parameters
    ----------
    path : path
    end_s : float, optional
        End of the last step. Default: the last ``t_s`` plus the step before
        it (a one-row file then needs ``end_s``). [s]
    mean_input_tokens, mean_output_tokens : float, optional
        Lengths for files without those columns (default 512 and 240; refused for
        a file that has the column, whose values would win). [tokens]

    Returns
    -------
    RateTrace
    """
    path = Path(path)
    shape = trace_format(path)
    if shape != "rate":
        raise PlannerInputError(f"{path}: this is a {_SHAPE_NAMES[shape]}, not a rate trace (t_s,rate_rps)")
    frame = _read_frame(path)
    t_s = _numbers(path, frame, "t_s", minimum=0.0)
    strictly = np.diff(t_s) <= 0
    if strictly.any():
        row = int(np.argmax(strictly)) + 2
        raise PlannerInputError(
            f"{path}: row {row}: t_s {t_s[row - 1]:g} must be after the previous row's {t_s[row - 2]:g} "
            "(rows sorted, one per step)"
        )
    rate_rps = _numbers(path, frame, "rate_rps", minimum=0.0)
    means = {}
    given = {"mean_input_tokens": mean_input_tokens, "mean_output_tokens": mean_output_tokens}
    defaults = {"mean_input_tokens": DEFAULT_MEAN_INPUT_TOKENS, "mean_output_tokens": DEFAULT_MEAN_OUTPUT_TOKENS}
    for column, value in given.items():
        if column in frame.columns:
            if value is not None:
                raise PlannerInputError(f"{path}: has a {column} column; a {column} given as well would not be used")
            means[column] = _numbers(path, frame, column, minimum=1.0)
        else:
            means[column] = np.full(len(t_s), float(defaults[column] if value is None else value))
    if end_s is None:
        if len(t_s) < 2:
            raise PlannerInputError(f"{path}: a one-row rate trace needs an explicit end time (end_s)")
        end_s = float(t_s[-1] + (t_s[-1] - t_s[-2]))
    return RateTrace(t_s, rate_rps, float(end_s), means["mean_input_tokens"], means["mean_output_tokens"], str(path))


def read_burstgpt_trace(path: str | Path, *, model: str | None = None) -> RequestTrace:
    """Read a BurstGPT trace (``BurstGPT_1.csv`` and its kin), without its failed requests.

    Parameters
    ----------
    path : path
    model : str, optional
        Keep only the rows of this ``Model`` (``ChatGPT``, ``GPT-4``); default all.

    Returns
    -------
    RequestTrace
        Arrivals as in the file [s] (from midnight of its first day), ``Request
        tokens`` and ``Response tokens`` as int64; ``source`` names the model and
        how many failed requests (0 ``Response tokens``) were dropped.
    """
    path = Path(path)
    shape = trace_format(path)
    if shape != "burstgpt":
        raise PlannerInputError(f"{path}: this is a {_SHAPE_NAMES[shape]}, not a BurstGPT trace; {_EXPECTED}")
    frame = _read_frame(path, ("Model", "Log Type"))
    arrival_s = _numbers(path, frame, "Timestamp", minimum=0.0)
    _require_sorted(path, "Timestamp", arrival_s)
    input_tokens = _tokens(path, frame, "Request tokens", minimum=0)
    output_tokens = _tokens(path, frame, "Response tokens", minimum=0)
    _tokens(path, frame, "Total tokens", minimum=0)
    for column in ("Model", "Log Type"):
        _first_bad(path, frame[column], frame[column].isna().to_numpy(), "a name")
    models = frame["Model"].str.strip()
    chosen = np.ones(len(frame), dtype=bool) if model is None else (models == model).to_numpy()
    if not chosen.any():
        raise PlannerInputError(
            f"{path}: Model: no row is {model!r}; the file has {', '.join(repr(m) for m in sorted(set(models)))}"
        )
    failed = int(np.count_nonzero(chosen & (output_tokens < 1)))
    keep = chosen & (output_tokens >= 1)
    if not keep.any():
        raise PlannerInputError(
            f"{path}: every request{f' of Model {model!r}' if model else ''} failed (Response tokens 0); "
            "nothing to replay"
        )
    return RequestTrace(
        arrival_s[keep],
        input_tokens[keep],
        output_tokens[keep],
        f"{path}{f' (Model {model})' if model else ''}, {failed} failed request{'s' if failed != 1 else ''} dropped",
    )


def read_trace(
    path: str | Path,
    *,
    seed: int = 0,
    token_distribution: str = "fixed",
    file_format: str = "auto",
    model: str | None = None,
    series: int | str | None = None,
    **rate_options,
) -> RequestTrace:
    """Requests from any of :data:`TRACE_FORMATS`.

    Parameters
    ----------
    path : path
    seed : int, optional
        Seed for the Poisson arrivals of a rate (a rate trace, a Prometheus
        export) or a scenario (ignored for request traces).
    token_distribution : {"fixed", "geometric"}, optional
        Lengths for a rate's requests from its means (a scenario names its own).
    file_format : str, optional
        One of :data:`TRACE_FORMATS`, or ``"auto"`` (default) to tell by :func:`trace_format`.
    model : str, optional
        A BurstGPT trace's ``Model`` to keep (only for BurstGPT).
    series : int or str, optional
        A Prometheus export's series, by index or labels (only for Prometheus;
        see :func:`~planner.readers.range_query.read_range_query`).
    **rate_options
        ``mean_input_tokens``, ``mean_output_tokens`` for a rate trace or a Prometheus export;
        ``end_s`` for a rate trace (:func:`read_rate_trace`), ``step_s`` for a Prometheus export.
    """
    path = Path(path)
    if file_format == "auto":
        kind = trace_format(path)
    elif file_format in TRACE_FORMATS:
        kind = file_format
    else:
        raise PlannerInputError(
            f"trace format must be auto or one of {', '.join(TRACE_FORMATS)}, got {file_format!r}",
            parameter="file_format",
            expected=f"auto or one of {', '.join(TRACE_FORMATS)}",
            value=file_format,
        )
    if model is not None and kind != "burstgpt":
        raise PlannerInputError(f"{path}: a model to keep applies to a BurstGPT trace; this is a {_SHAPE_NAMES[kind]}")
    if series is not None and kind != "prometheus":
        raise PlannerInputError(
            f"{path}: a series to choose applies to a Prometheus export; this is a {_SHAPE_NAMES[kind]}"
        )
    if file_format != "auto" and kind in _SHAPES:
        shape = _content_format(path)
        if shape != kind:
            raise PlannerInputError(f"{path}: not a {_SHAPE_NAMES[kind]}: it reads as a {_SHAPE_NAMES[shape]}")
    means = {"mean_input_tokens", "mean_output_tokens"}
    allowed = {"rate": {"end_s", *means}, "prometheus": {"step_s", *means}}.get(kind, set())
    extra = sorted(set(rate_options) - allowed)
    if extra:
        raise PlannerInputError(f"{path}: {extra[0]} does not apply to a {_SHAPE_NAMES[kind]}")
    if kind == "scenario":
        return scenario_trace(read_scenario(path), seed)
    if kind == "mooncake":
        return read_mooncake_trace(path)
    if kind == "burstgpt":
        return read_burstgpt_trace(path, model=model)
    if kind == "prometheus":
        rates = read_range_query(path, series=series, **rate_options)
        return rates.requests(seed, token_distribution=token_distribution)
    if kind == "rate":
        return read_rate_trace(path, **rate_options).requests(seed, token_distribution=token_distribution)
    return read_request_trace(path)


# ------------------------------------------------------------------ helpers


def _first_line(path: Path) -> str:
    if not path.is_file():
        raise PlannerInputError(f"{path}: no such file")
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            for line in handle:
                if line.strip():
                    return line.strip()
    except UnicodeDecodeError:
        raise PlannerInputError(f"{path}: not a UTF-8 text file; {_EXPECTED}") from None
    raise PlannerInputError(f"{path}: empty file; {_EXPECTED}")


def _split_header(line: str) -> list[str]:
    return [cell.strip().strip('"') for cell in line.split(",")]


def _content_format(path: Path) -> str:
    first = _first_line(path)
    if first.lstrip().startswith(("{", "[")):
        return _json_format(path, first)
    return _shape(path, _split_header(first))


def _json_format(path: Path, first_line: str) -> str:
    if path.suffix.lower() == ".jsonl":
        return "mooncake"
    try:
        record = json.loads(first_line)
    except ValueError:
        record = None
    if isinstance(record, dict) and "timestamp" in record:
        return "mooncake"
    with path.open(encoding="utf-8-sig") as handle:
        head = handle.read(_JSON_PEEK_CHARS)
    if re.search(r'"(status|resultType)"\s*:', head):
        return "prometheus"
    raise PlannerInputError(
        f"{path}: JSON that is neither a Mooncake trace (one object a line with timestamp, input_length, "
        'output_length, hash_ids) nor a Prometheus /api/v1/query_range response ({"status": ..., "data": ...}); '
        "name its format (--trace-format)"
    )


def _shape(path: Path, header: list[str]) -> str:
    seen = set(header)
    for name, (required, optional, others_allowed) in _SHAPES.items():
        if seen & set(required):
            missing = [c for c in required if c not in seen]
            if missing:
                raise PlannerInputError(
                    f"{path}: missing column {missing[0]!r} for a {_SHAPE_NAMES[name]} "
                    f"(header: {','.join(header)}; expected {','.join(required + optional)})"
                )
            unknown = [c for c in header if c not in required + optional]
            if unknown and not others_allowed:
                raise PlannerInputError(
                    f"{path}: unknown column {unknown[0]!r} in a {_SHAPE_NAMES[name]} "
                    f"(expected {','.join(required)}{' and optionally ' + ','.join(optional) if optional else ''})"
                )
            if len(set(header)) != len(header):
                raise PlannerInputError(f"{path}: a column appears twice in the header ({','.join(header)})")
            return name
    raise PlannerInputError(f"{path}: unknown header {','.join(header)!r}; {_EXPECTED}")


def _read_frame(path: Path, text_columns: tuple[str, ...] = ()) -> pd.DataFrame:
    # Numeric columns go through the C parser; only a column holding a bad
    # cell falls back to the slower per-cell path that finds the row.
    try:
        frame = pd.read_csv(path, dtype=dict.fromkeys(text_columns, str), encoding="utf-8-sig", skipinitialspace=True)
    except pd.errors.ParserError as error:
        raise PlannerInputError(f"{path}: not a well-formed CSV ({str(error).strip()})") from None
    frame.columns = [str(c).strip() for c in frame.columns]
    if frame.empty:
        raise PlannerInputError(f"{path}: no data rows after the header (an empty trace)")
    return frame


def _first_bad(path: Path, column: pd.Series, bad: np.ndarray, expected: str) -> None:
    if bad.any():
        i = int(np.argmax(bad))
        cell = column.iloc[i]
        shown = "an empty cell" if pd.isna(cell) or str(cell).strip() == "" else repr(str(cell))
        raise PlannerInputError(f"{path}: row {i + 1}: {column.name} {shown} is not {expected}")


def _as_float(column: pd.Series) -> np.ndarray:
    if pd.api.types.is_numeric_dtype(column.dtype) and not pd.api.types.is_bool_dtype(column.dtype):
        return column.to_numpy(dtype=float, na_value=np.nan)
    return pd.to_numeric(column.astype(str).str.strip(), errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def _numbers(path: Path, frame: pd.DataFrame, column: str, *, minimum: float) -> np.ndarray:
    values = _as_float(frame[column])
    _first_bad(path, frame[column], ~np.isfinite(values), "a finite number")
    _first_bad(path, frame[column], values < minimum, f"a number >= {minimum:g}")
    return values


def _tokens(path: Path, frame: pd.DataFrame, column: str, *, minimum: int) -> np.ndarray:
    values = _as_float(frame[column])
    expected = f"a whole number of tokens >= {minimum}"
    _first_bad(path, frame[column], ~np.isfinite(values) | (values != np.floor(values)), expected)
    _first_bad(path, frame[column], values < minimum, expected)
    return values.astype(np.int64)


def _azure_times_ns(path: Path, column: pd.Series) -> np.ndarray:
    text = column.fillna("").str.strip()
    parsed = pd.to_datetime(text, format=_AZURE_TIME_FORMATS[0], errors="coerce")
    missing = parsed.isna()
    if missing.any():
        parsed = parsed.where(
            ~missing, pd.to_datetime(text.where(missing), format=_AZURE_TIME_FORMATS[1], errors="coerce")
        )
    _first_bad(path, column, parsed.isna().to_numpy(), "a time like 2023-11-16 18:17:03.9799600")
    return parsed.to_numpy(dtype="datetime64[ns]").astype(np.int64)


def _require_sorted(path: Path, column: str, values: np.ndarray) -> None:
    back = np.diff(values) < 0
    if back.any():
        row = int(np.argmax(back)) + 2
        raise PlannerInputError(
            f"{path}: row {row}: {column} goes back in time (before row {row - 1}); expected rows sorted by arrival"
        )
