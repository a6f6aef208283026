"""Read a request rate exported from Prometheus's range-query API as a :class:`~planner.simulate.traffic.RateTrace`.

The file is the JSON body of ``GET /api/v1/query_range`` (Prometheus HTTP API,
"Range queries"; written by ``web/api/v1/json_codec.go`` and
``util/jsonutil/marshal.go`` in prometheus/prometheus: timestamps in seconds
with up to three decimals, values as strings with the shortest exact decimal)::

    {"status": "success",
     "data": {"resultType": "matrix",
              "result": [{"metric": {"model_name": "chat"},
                          "values": [[1731772800, "5.2"], [1731772860, "5.9"]]}]}}

for a query of requests per second, for example
``curl 'http://PROM/api/v1/query_range' --data-urlencode 'query=sum(rate(vllm:request_success_total[1m]))'
-d start=... -d end=... -d step=60 > rate.json``. (vLLM counts a request when it
finishes, so this rate lags the arrivals by about one request's duration and
leaves out failed requests; over a step of a minute or more that is close.)

How the samples become a rate:

- Prometheus evaluates a range query at ``start, start + step, ...``; each
  sample is a number written as a JSON string (``"NaN"``, ``"+Inf"`` included).
- ``rate(x[w])`` at time ``t`` is the average over the ``w`` before ``t``, so a
  sample at ``t_k`` stands for the step before it: the rate trace's step ``k``
  covers ``[t_k - step, t_k)``. Time 0 of the trace is ``t_0 - step``, and the
  trace lasts ``n x step``.
- Within a step the rate is taken as constant (the window average): bursts
  shorter than the step are gone, and :meth:`RateTrace.requests
  <planner.simulate.traffic.RateTrace.requests>` draws Poisson arrivals from
  it (seeded; exact for a piecewise-constant rate).
- Token lengths are not in the export: every request gets
  ``mean_input_tokens`` and ``mean_output_tokens`` (default 512 and 240), drawn
  as the rate traces' ``token_distribution`` says (``fixed``: the mean;
  ``geometric``: a geometric draw with that mean).

Refused, each with one line naming the file and the JSON key or index: a
response that is not ``"status": "success"``, a result that is not a
``matrix`` (an instant query's ``vector``), no series, several series and
none chosen, a ``NaN``, infinite or negative value, timestamps that do not
increase, samples off the step or missing (a gap: the series had no value;
fill it in the query with ``(QUERY) or vector(0)`` where no requests is what it
means).
"""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from planner.errors import PlannerInputError
from planner.simulate.traffic import DEFAULT_MEAN_INPUT_TOKENS, DEFAULT_MEAN_OUTPUT_TOKENS, RateTrace

__all__ = ["read_range_query", "series_labels"]

_EXPECTED = (
    'expected a Prometheus /api/v1/query_range response: {"status": "success", "data": {"resultType": "matrix", ...}}'
)
# Prometheus writes timestamps in seconds with millisecond resolution.
_STEP_TOLERANCE_S = 5e-4


def read_range_query(
    path: str | Path,
    *,
    series: int | str | None = None,
    step_s: float | None = None,
    mean_input_tokens: float = DEFAULT_MEAN_INPUT_TOKENS,
    mean_output_tokens: float = DEFAULT_MEAN_OUTPUT_TOKENS,
) -> RateTrace:
    """Read one series of a ``query_range`` response as a request rate [requests/s].

    Parameters
    ----------
    path : path
        The saved JSON response.
    series : int or str, optional
        Which series, when the result holds several: its index in ``data.result``
        (0-based), or labels ``name=value[,name=value]`` that exactly one series
        carries. An index as text (``"1"``) is an index.
    step_s : float, optional
        The query's step. Default: the spacing of the samples (a one-sample
        series needs it). [s]
    mean_input_tokens, mean_output_tokens : float, optional
        Prompt and answer length of every step's requests. [tokens]

    Returns
    -------
    RateTrace
        One step per sample, time 0 one step before the first sample.
    """
    path = Path(path)
    document = _document(path)
    result = _matrix(path, document)
    index = _choose(path, result, series)
    where = f"data.result[{index}]"
    entry = result[index]
    if not isinstance(entry, dict):
        raise PlannerInputError(f"{path}: {where}: expected an object with metric and values")
    if "values" not in entry and "histograms" in entry:
        raise PlannerInputError(
            f"{path}: {where}: holds native histograms, not float samples (values); query a rate of requests instead"
        )
    values = entry.get("values")
    if not isinstance(values, list) or not values:
        raise PlannerInputError(f'{path}: {where}.values: expected a list of [unix_time, "value"] samples')
    times = np.empty(len(values))
    rates = np.empty(len(values))
    for j, sample in enumerate(values):
        times[j], rates[j] = _sample(path, f"{where}.values[{j}]", sample)
        if j and times[j] <= times[j - 1]:
            raise PlannerInputError(
                f"{path}: {where}.values[{j}]: timestamp {times[j]:.3f} is not after the previous sample's "
                f"{times[j - 1]:.3f}; expected samples sorted by time"
            )
    step = _step(path, where, times, step_s)
    start = datetime.fromtimestamp(times[0] - step, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    n = len(times)
    return RateTrace(
        times - times[0],
        rates,
        float(times[-1] - times[0] + step),
        np.full(n, float(mean_input_tokens)),
        np.full(n, float(mean_output_tokens)),
        f"{path} ({series_labels(entry.get('metric'))}, {n} steps of {step:g} s from {start})",
    )


def series_labels(metric) -> str:
    """A series' labels as ``{name="value", ...}`` (``{}`` for none), for messages."""
    if not isinstance(metric, dict) or not metric:
        return "{}"
    return "{" + ", ".join(f'{k}="{v}"' for k, v in sorted(metric.items())) + "}"


def _document(path: Path) -> dict:
    if not path.is_file():
        raise PlannerInputError(f"{path}: no such file")
    try:
        document = json.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError:
        raise PlannerInputError(f"{path}: not a UTF-8 text file; {_EXPECTED}") from None
    except json.JSONDecodeError as error:
        raise PlannerInputError(
            f"{path}: not valid JSON ({error.msg} at line {error.lineno} column {error.colno}); {_EXPECTED}"
        ) from None
    if not isinstance(document, dict):
        raise PlannerInputError(f"{path}: a JSON {type(document).__name__}, not an object; {_EXPECTED}")
    return document


def _matrix(path: Path, document: dict) -> list:
    status = document.get("status")
    if status == "error":
        raise PlannerInputError(
            f"{path}: status: the query failed ({document.get('errorType', 'error')}: {document.get('error', '')})"
        )
    if status != "success":
        raise PlannerInputError(f'{path}: status: expected "success", got {status!r}; {_EXPECTED}')
    data = document.get("data")
    if not isinstance(data, dict):
        raise PlannerInputError(f"{path}: data: expected an object with resultType and result; {_EXPECTED}")
    kind = data.get("resultType")
    if kind != "matrix":
        raise PlannerInputError(
            f'{path}: data.resultType: expected "matrix" (a range query\'s result), got {kind!r}; '
            "save /api/v1/query_range, not /api/v1/query"
        )
    result = data.get("result")
    if not isinstance(result, list):
        raise PlannerInputError(f"{path}: data.result: expected a list of series")
    if not result:
        raise PlannerInputError(f"{path}: data.result: no series (the query matched nothing over the range)")
    return result


def _choose(path: Path, result: list, series: int | str | None) -> int:
    if series is None:
        if len(result) > 1:
            shown = ", ".join(f"[{i}] {series_labels(_metric(s))}" for i, s in enumerate(result[:3]))
            more = f" and {len(result) - 3} more" if len(result) > 3 else ""
            raise PlannerInputError(
                f"{path}: data.result: {len(result)} series ({shown}{more}); choose one by index or labels "
                "(series=1 or series='model_name=chat'; on the command line --trace-series), or sum them in the query"
            )
        return 0
    if isinstance(series, str) and series.strip().isdigit():
        series = int(series.strip())
    if isinstance(series, int) and not isinstance(series, bool):
        if not 0 <= series < len(result):
            raise PlannerInputError(
                f"{path}: data.result[{series}]: no such series; "
                f"the result holds {len(result)} (0 to {len(result) - 1})"
            )
        return series
    if not isinstance(series, str):
        raise PlannerInputError(f"series must be an index or labels name=value[,name=value], got {series!r}")
    wanted = {}
    for item in series.split(","):
        name, equals, value = item.partition("=")
        if not equals or not name.strip():
            raise PlannerInputError(
                f"series {series!r}: expected an index or labels name=value[,name=value], got {item.strip()!r}"
            )
        wanted[name.strip()] = value.strip().strip('"')
    matches = [i for i, s in enumerate(result) if all(_metric(s).get(k) == v for k, v in wanted.items())]
    if len(matches) != 1:
        found = "no series has" if not matches else f"{len(matches)} series ({', '.join(map(str, matches))}) have"
        raise PlannerInputError(f"{path}: data.result: {found} the labels {series}; choose exactly one")
    return matches[0]


def _metric(entry) -> dict:
    metric = entry.get("metric") if isinstance(entry, dict) else None
    return metric if isinstance(metric, dict) else {}


def _sample(path: Path, where: str, sample) -> tuple[float, float]:
    if not isinstance(sample, list) or len(sample) != 2:
        raise PlannerInputError(f'{path}: {where}: expected [unix_time, "value"], got {json.dumps(sample)[:40]}')
    when, text = sample
    if isinstance(when, bool) or not isinstance(when, int | float) or not math.isfinite(when):
        raise PlannerInputError(f"{path}: {where}: timestamp {when!r} is not a Unix time in seconds")
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise PlannerInputError(f"{path}: {where}: value {text!r} is not a number (Prometheus writes it as a string)")
    try:
        value = float(text)
    except ValueError:
        raise PlannerInputError(f"{path}: {where}: value {text!r} is not a number") from None
    if math.isnan(value):
        raise PlannerInputError(
            f"{path}: {where}: value {text!r} is not a rate (NaN: 0/0 in the query, e.g. a ratio with no requests)"
        )
    if not math.isfinite(value) or value < 0:
        raise PlannerInputError(f"{path}: {where}: value {text!r} is not a request rate (a finite number >= 0)")
    return float(when), value


def _step(path: Path, where: str, times: np.ndarray, step_s: float | None) -> float:
    if step_s is not None:
        if not (math.isfinite(step_s) and step_s > 0):
            raise PlannerInputError(f"step_s must be a finite number > 0, got {step_s!r}")
        step = float(step_s)
    elif len(times) < 2:
        raise PlannerInputError(f"{path}: {where}.values: one sample has no step; export two or more, or give step_s")
    else:
        step = float(times[1] - times[0])
    gaps = np.diff(times) / step
    off = (np.abs(gaps - np.round(gaps)) * step > _STEP_TOLERANCE_S) | (np.round(gaps) < 1)
    if off.any():
        j = int(np.argmax(off)) + 1
        raise PlannerInputError(
            f"{path}: {where}.values[{j}]: timestamp {times[j]:.3f} is not on the {step:g} s step of the samples "
            "before it; expected one sample per step"
        )
    missing = np.round(gaps) > 1
    if missing.any():
        j = int(np.argmax(missing)) + 1
        count = int(np.round(gaps[j - 1])) - 1
        raise PlannerInputError(
            f"{path}: {where}.values[{j}]: {count} step{'s' if count != 1 else ''} of {step:g} s missing before "
            f"{times[j]:.3f} (the series had no value there); fill them in the query, e.g. (QUERY) or vector(0), "
            "or export a range without gaps"
        )
    return step
