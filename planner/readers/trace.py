"""Read request traces and rate traces from CSV.

Three shapes, told apart by the header (:func:`trace_format`):

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

:func:`read_trace` also takes a scenario file (``.yaml``; see
:mod:`planner.readers.scenario`) and draws its requests with the seed.

Every problem raises :class:`~planner.errors.PlannerInputError` naming the
file, the 1-based data row (the first row after the header is row 1) and
what was expected: unparseable or unsorted times, negative or non-integer
token counts, an answer of 0 tokens, an empty file or trace, a missing or
unknown column.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from planner.errors import PlannerInputError
from planner.readers.scenario import read_scenario
from planner.simulate.scenario import scenario_trace
from planner.simulate.traffic import RateTrace, RequestTrace

__all__ = [
    "AZURE_COLUMNS",
    "CANONICAL_COLUMNS",
    "DEFAULT_MEAN_INPUT_TOKENS",
    "DEFAULT_MEAN_OUTPUT_TOKENS",
    "RATE_COLUMNS",
    "RATE_OPTIONAL_COLUMNS",
    "read_rate_trace",
    "read_request_trace",
    "read_trace",
    "trace_format",
]

CANONICAL_COLUMNS = ("arrival_s", "input_tokens", "output_tokens")
AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
RATE_COLUMNS = ("t_s", "rate_rps")
RATE_OPTIONAL_COLUMNS = ("mean_input_tokens", "mean_output_tokens")
DEFAULT_MEAN_INPUT_TOKENS = 512.0
"""Prompt length for a rate trace without ``mean_input_tokens``. [tokens]"""
DEFAULT_MEAN_OUTPUT_TOKENS = 240.0
"""Answer length for a rate trace without ``mean_output_tokens``. [tokens]"""

_SHAPES = {
    "canonical": (CANONICAL_COLUMNS, ()),
    "azure": (AZURE_COLUMNS, ()),
    "rate": (RATE_COLUMNS, RATE_OPTIONAL_COLUMNS),
}
_SHAPE_NAMES = {"canonical": "canonical request trace", "azure": "Azure LLM trace", "rate": "rate trace"}
_EXPECTED = (
    "expected a header of arrival_s,input_tokens,output_tokens (request trace), "
    "TIMESTAMP,ContextTokens,GeneratedTokens (Azure LLM trace) or "
    "t_s,rate_rps[,mean_input_tokens,mean_output_tokens] (rate trace)"
)
_AZURE_TIME_FORMATS = ("%Y-%m-%d %H:%M:%S.%f", "%Y-%m-%d %H:%M:%S")


def trace_format(path: str | Path) -> str:
    """``"canonical"``, ``"azure"`` or ``"rate"``, from the file's header.

    Raises
    ------
    PlannerInputError
        Missing file, empty file, a missing column or an unknown header.
    """
    path = Path(path)
    return _shape(path, _header(path))


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
    if shape == "rate":
        raise PlannerInputError(
            f"{path}: this is a rate trace (t_s,rate_rps); read it with read_rate_trace or read_trace"
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
    mean_input_tokens: float = DEFAULT_MEAN_INPUT_TOKENS,
    mean_output_tokens: float = DEFAULT_MEAN_OUTPUT_TOKENS,
) -> RateTrace:
    """Read a ``t_s,rate_rps[,mean_input_tokens,mean_output_tokens]`` file.

    Parameters
    ----------
    path : path
    end_s : float, optional
        End of the last step. Default: the last ``t_s`` plus the step before
        it (a one-row file then needs ``end_s``). [s]
    mean_input_tokens, mean_output_tokens : float, optional
        Lengths for files without those columns. [tokens]

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
    for column, default in (("mean_input_tokens", mean_input_tokens), ("mean_output_tokens", mean_output_tokens)):
        if column in frame.columns:
            means[column] = _numbers(path, frame, column, minimum=1.0)
        else:
            means[column] = np.full(len(t_s), float(default))
    if end_s is None:
        if len(t_s) < 2:
            raise PlannerInputError(f"{path}: a one-row rate trace needs an explicit end time (end_s)")
        end_s = float(t_s[-1] + (t_s[-1] - t_s[-2]))
    return RateTrace(t_s, rate_rps, float(end_s), means["mean_input_tokens"], means["mean_output_tokens"], str(path))


def read_trace(path: str | Path, *, seed: int = 0, token_distribution: str = "fixed", **rate_options) -> RequestTrace:
    """Requests from any of the three CSV shapes, or from a scenario file (``.yaml``/``.yml``).

    Parameters
    ----------
    path : path
    seed : int, optional
        Seed for the Poisson arrivals of a rate trace or a scenario (ignored
        for request traces).
    token_distribution : {"fixed", "geometric"}, optional
        Lengths for a rate trace's requests from its means (a scenario names its own).
    **rate_options
        ``end_s``, ``mean_input_tokens``, ``mean_output_tokens`` for :func:`read_rate_trace`.
    """
    if Path(path).suffix.lower() in (".yaml", ".yml"):
        return scenario_trace(read_scenario(path), seed)
    if trace_format(path) == "rate":
        return read_rate_trace(path, **rate_options).requests(seed, token_distribution=token_distribution)
    return read_request_trace(path)


# ------------------------------------------------------------------ helpers


def _header(path: Path) -> list[str]:
    if not path.is_file():
        raise PlannerInputError(f"{path}: no such file")
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            for line in handle:
                if line.strip():
                    return [cell.strip().strip('"') for cell in line.strip().split(",")]
    except UnicodeDecodeError:
        raise PlannerInputError(f"{path}: not a UTF-8 text file; {_EXPECTED}") from None
    raise PlannerInputError(f"{path}: empty file; {_EXPECTED}")


def _shape(path: Path, header: list[str]) -> str:
    seen = set(header)
    for name, (required, optional) in _SHAPES.items():
        if seen & set(required):
            missing = [c for c in required if c not in seen]
            if missing:
                raise PlannerInputError(
                    f"{path}: missing column {missing[0]!r} for a {_SHAPE_NAMES[name]} "
                    f"(header: {','.join(header)}; expected {','.join(required + optional)})"
                )
            unknown = [c for c in header if c not in required + optional]
            if unknown:
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
