"""The ``forecast`` module writes predictive-scaling queries a KEDA Prometheus trigger can carry as they are.

A forecast needs no new component: Prometheus itself computes it, each time
KEDA (or prometheus-adapter) sends the trigger's query. Four methods, each over
the fleet's in-flight requests (``sum(running) + sum(waiting)``) or its request
rate (``sum(rate(vllm:request_success_total[5m]))``, completions per second):

* ``seasonal_naive``: the signal one period ago (a day or a week), ``lead_s``
  ahead of it: every selector reads ``offset (period - lead)``. With the lead
  set to the cold start, replicas ordered now are Ready when yesterday's load
  comes back. A negative offset would read the future, which Prometheus has not
  scraped: the lead is folded into a positive offset instead (``1d`` minus
  5 minutes is written ``offset 23h55m``; PromQL has no duration arithmetic
  before Prometheus 3.5's experimental ``promql-duration-expr``);
* ``predict_linear``: the least-squares line through the signal over a
  window, ``ahead_s`` ahead (set it to the cold start);
* ``max_over_time``: the window's peak of the signal, which holds capacity
  through dips shorter than the window;
* ``double_exponential_smoothing``: Holt's smoothed level of the signal over
  the window (factors ``smoothing_frac`` and ``trend_frac``). It smooths, it
  does not look ahead. Prometheus 3 calls it ``double_exponential_smoothing`` and
  serves it only with ``--enable-feature=promql-experimental-functions``;
  Prometheus 2 calls it ``holt_winters`` (``prometheus_major=2``).

The last three read the fleet signal as a subquery, ``(signal)[window:step]``,
so they work on the sum over pods that come and go, with no recording rule.
Every forecast ends in ``or vector(0)``: where it has nothing to read (the
first period of a seasonal forecast, fewer than two points for a line) it
proposes 0 and the reactive trigger beside it decides, instead of failing the
ScaledObject's whole formula. Put a forecast beside the reactive trigger (the
HPA takes the larger), never alone.

This module writes text only; :mod:`planner.simulate.metrics` evaluates it as
Prometheus does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from planner.errors import PlannerInputError

__all__ = [
    "FORECAST_METHODS",
    "SIGNAL_KINDS",
    "Forecast",
    "forecast_query",
    "promql_duration",
    "signal_query",
]

FORECAST_METHODS = ("seasonal_naive", "predict_linear", "max_over_time", "double_exponential_smoothing")
SIGNAL_KINDS = ("in_flight", "request_rate")
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
COMPLETED = "vllm:request_success_total"
_UNITS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000), ("ms", 1))


@dataclass(frozen=True)
class Forecast:
    """One forecast, its method and its parameters.

    Attributes
    ----------
    method : str
        One of :data:`FORECAST_METHODS`.
    period_s : float
        ``seasonal_naive``: the season, a day (86400) or a week (604800). [s]
    lead_s : float
        ``seasonal_naive``: how far past "one period ago" to read, 0 <= lead < period
        (the cold start, so capacity is Ready when the load arrives). [s]
    window_s : float
        The other methods: the history they read. [s]
    step_s : float
        The subquery's resolution (a point per step). [s]
    ahead_s : float
        ``predict_linear``: how far ahead the line is read (the cold start). [s]
    smoothing_frac, trend_frac : float
        ``double_exponential_smoothing``: Holt's factors, each in (0, 1). [fraction]
    """

    method: str
    period_s: float = 86_400.0
    lead_s: float = 0.0
    window_s: float = 1800.0
    step_s: float = 60.0
    ahead_s: float = 0.0
    smoothing_frac: float = 0.3
    trend_frac: float = 0.3

    def __post_init__(self) -> None:
        if self.method not in FORECAST_METHODS:
            raise PlannerInputError(
                f"forecast method {self.method!r}: expected one of {', '.join(FORECAST_METHODS)}",
                parameter="method",
                expected=", ".join(FORECAST_METHODS),
                value=self.method,
            )
        for name in ("period_s", "window_s", "step_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise PlannerInputError(f"forecast {name}: expected a number > 0, got {value!r}", parameter=name)
        for name in ("lead_s", "ahead_s"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise PlannerInputError(f"forecast {name}: expected a number >= 0, got {value!r}", parameter=name)
        if self.lead_s >= self.period_s:
            raise PlannerInputError(
                f"forecast lead_s {self.lead_s:g} s must be shorter than the period {self.period_s:g} s "
                "(the offset period - lead must stay positive: a negative offset reads the future)",
                parameter="lead_s",
            )
        if self.step_s > self.window_s:
            raise PlannerInputError(
                f"forecast step_s {self.step_s:g} s is longer than its window {self.window_s:g} s", parameter="step_s"
            )
        for name in ("smoothing_frac", "trend_frac"):
            value = getattr(self, name)
            if not (isinstance(value, int | float) and 0 < value < 1):
                raise PlannerInputError(
                    f"forecast {name}: expected a fraction strictly between 0 and 1 (Prometheus refuses others), "
                    f"got {value!r}",
                    parameter=name,
                )
        for name in ("period_s", "lead_s", "window_s", "step_s"):
            promql_duration(getattr(self, name), allow_zero=True)  # whole milliseconds

    @property
    def offset_s(self) -> float:
        """``seasonal_naive``: the offset every selector reads, period - lead. [s]"""
        return self.period_s - self.lead_s


def promql_duration(seconds: float, *, allow_zero: bool = False) -> str:
    """A PromQL duration literal, largest units first.

    Examples
    --------
    >>> promql_duration(86100), promql_duration(604800), promql_duration(90.5)
    ('23h55m', '7d', '1m30s500ms')
    """
    milliseconds = round(seconds * 1000)
    if not math.isfinite(seconds) or abs(milliseconds - seconds * 1000) > 1e-6 or milliseconds < 0:
        raise PlannerInputError(f"duration {seconds!r} s: expected whole milliseconds >= 0")
    if milliseconds == 0:
        if allow_zero:
            return "0s"
        raise PlannerInputError("duration 0 s: a PromQL range or offset here must be positive")
    parts = []
    for unit, size in _UNITS:
        count, milliseconds = divmod(milliseconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts)


def signal_query(signal: str, match: str = "", *, rate_window_s: float = 300.0, offset_s: float = 0.0) -> str:
    """The fleet signal a forecast reads, optionally ``offset``.

    Parameters
    ----------
    signal : str
        ``in_flight`` (requests running + waiting over the fleet) or
        ``request_rate`` (completed requests per second over the fleet).
    match : str
        The label matcher block every selector carries, e.g. ``{model_name="chat"}``.
    rate_window_s : float
        ``request_rate``: the ``rate`` window. [s]
    offset_s : float
        Read the signal this long ago (0: now). [s]
    """
    offset = f" offset {promql_duration(offset_s)}" if offset_s else ""
    if signal == "in_flight":
        return f"sum({RUNNING}{match}{offset}) + sum({WAITING}{match}{offset})"
    if signal == "request_rate":
        return f"sum(rate({COMPLETED}{match}[{promql_duration(rate_window_s)}]{offset}))"
    raise PlannerInputError(
        f"forecast signal {signal!r}: expected one of {', '.join(SIGNAL_KINDS)}",
        parameter="signal",
        expected=", ".join(SIGNAL_KINDS),
        value=signal,
    )


def forecast_query(
    forecast: Forecast,
    signal: str = "in_flight",
    match: str = "",
    *,
    prometheus_major: int = 3,
    rate_window_s: float = 300.0,
) -> str:
    """The query text of ``forecast`` over the fleet ``signal``, for a KEDA Prometheus trigger.

    Parameters
    ----------
    forecast : Forecast
    signal : str
        ``in_flight`` or ``request_rate`` (:func:`signal_query`).
    match : str
        The label matcher block, e.g. ``{namespace="llm",model_name="chat"}``.
    prometheus_major : int
        The Prometheus the trigger queries: 3 writes ``double_exponential_smoothing``, 2 ``holt_winters``.
    rate_window_s : float
        ``request_rate``: the ``rate`` window. [s]

    Examples
    --------
    >>> forecast_query(Forecast("seasonal_naive", lead_s=300))
    '(sum(vllm:num_requests_running offset 23h55m) + sum(vllm:num_requests_waiting offset 23h55m)) or vector(0)'
    >>> forecast_query(Forecast("predict_linear", window_s=1800, ahead_s=300))
    'predict_linear((sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting))[30m:1m], 300) or vector(0)'
    """
    if prometheus_major not in (2, 3):
        raise PlannerInputError(f"prometheus_major: expected 2 or 3, got {prometheus_major!r}")
    if forecast.method == "seasonal_naive":
        text = signal_query(signal, match, rate_window_s=rate_window_s, offset_s=forecast.offset_s)
        return f"({text}) or vector(0)"
    base = signal_query(signal, match, rate_window_s=rate_window_s)
    subquery = f"({base})[{promql_duration(forecast.window_s)}:{promql_duration(forecast.step_s)}]"
    if forecast.method == "predict_linear":
        return f"predict_linear({subquery}, {_number(forecast.ahead_s)}) or vector(0)"
    if forecast.method == "max_over_time":
        return f"max_over_time({subquery}) or vector(0)"
    name = "holt_winters" if prometheus_major == 2 else "double_exponential_smoothing"
    return f"{name}({subquery}, {_number(forecast.smoothing_frac)}, {_number(forecast.trend_frac)}) or vector(0)"


def _number(value: float) -> str:
    # As short as it reads back: 300 rather than 300.0.
    return str(int(value)) if float(value).is_integer() else repr(float(value))
