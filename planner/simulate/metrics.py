"""The ``metrics`` module is the simulated Prometheus: per-pod scrapes and the queries autoscalers send.

Every ``scrape_interval_s`` each pod whose vLLM server is up (Ready, or
terminating but not yet exited) is scraped: the gauges ``num_requests_running``,
``num_requests_waiting``, ``kv_cache_usage_perc`` (a fraction 0-1, as vLLM
exports it), GPU utilization (NVML's busy fraction over the last tick, exported
as DCGM does in percent), and the counters ``request_success_total``,
``generation_tokens_total``, ``prompt_tokens_total``, ``num_preemptions_total``.
A pod still warming up has no series; a removed pod's series go stale at once.

Queries are parsed (:func:`parse_query`) into a small subset of PromQL:

* a metric name with or without the ``vllm:`` prefix, with any label matchers
  (they are assumed to select the simulated Deployment's pods), including the
  Google Managed Prometheus spelling ``prometheus.googleapis.com|vllm:NAME|gauge``;
* ``sum``, ``avg``, ``max``, ``min``, ``count``, optionally ``by (...)`` /
  ``without (...)``; a grouping by ``pod`` (or ``instance``) keeps one series
  per pod, any other grouping one series (every pod shares the label);
* ``rate``/``irate``/``increase`` of a counter and ``avg_over_time``/
  ``max_over_time``/``min_over_time`` of a gauge over ``[w]``, with
  Prometheus' window (left-open) and ``rate`` extrapolation;
* ``+ - * /`` between such terms and numbers, ``or``, and ``vector(N)``;
* ``kube_pod_info`` (kube-state-metrics): 1 per existing pod.

Anything else raises :class:`~planner.errors.PlannerInputError` naming the
query. Map such a query to one the simulator understands in FLEET.yaml::

    signals:
      "max(inferflow_inflight_requests)": "max(vllm:num_requests_running) + max(vllm:num_requests_waiting)"

The same mapping names what an HPA ``Pods``/``Object``/``External`` metric
is (``"vllm_num_requests_waiting": "num_requests_waiting"``).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from planner.errors import PlannerInputError

__all__ = [
    "COUNTERS",
    "GAUGES",
    "MetricStore",
    "Query",
    "metric_column",
    "parse_query",
]

GAUGES = ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc", "gpu_util_pct")
COUNTERS = ("request_success_total", "generation_tokens_total", "prompt_tokens_total", "num_preemptions_total")
COLUMNS = GAUGES + COUNTERS
POD_INFO = "kube_pod_info"
STALENESS_S = 300.0  # Prometheus' lookback delta

# Other spellings of the simulated series, as exporters and adapters name them.
_ALIASES = {
    "gpu_cache_usage_perc": "kv_cache_usage_perc",
    "dcgm_fi_dev_gpu_util": "gpu_util_pct",
    "gpu_utilization_percent": "gpu_util_pct",
    "gpu_utilization": "gpu_util_pct",
    "request_success": "request_success_total",
    "generation_tokens": "generation_tokens_total",
    "prompt_tokens": "prompt_tokens_total",
    "num_preemptions": "num_preemptions_total",
}


def metric_column(name: str) -> str | None:
    """The simulated series a metric name refers to, or ``None`` if it is not one.

    Accepts ``vllm:num_requests_waiting``, ``vllm_num_requests_waiting``,
    ``num_requests_waiting``, ``DCGM_FI_DEV_GPU_UTIL`` and the Google Managed
    Prometheus form ``prometheus.googleapis.com|vllm:num_requests_waiting|gauge``.
    """
    if "|" in name:
        parts = name.split("|")
        name = parts[1] if len(parts) >= 2 else name
    key = name.strip().lower()
    for prefix in ("vllm:", "vllm_"):
        if key.startswith(prefix):
            key = key[len(prefix) :]
            break
    if key.endswith("_total") and key[: -len("_total")] in _ALIASES:
        key = key[: -len("_total")]
    key = _ALIASES.get(key, key)
    if key in COLUMNS or key == POD_INFO:
        return key
    return None


class MetricStore:
    """Scrapes kept in time order: per scrape, the pods scraped and one row of values per pod."""

    def __init__(self) -> None:
        self.times_s: list[float] = []
        self.pods: list[np.ndarray] = []
        self.values: list[np.ndarray] = []  # shape (pods, len(COLUMNS))
        self.existing: list[np.ndarray] = []  # pods that exist (kube_pod_info)

    def record(self, now_s: float, pods: list[int], rows: np.ndarray, existing: list[int]) -> None:
        self.times_s.append(float(now_s))
        self.pods.append(np.asarray(pods, dtype=np.int64))
        self.values.append(np.asarray(rows, dtype=float).reshape(len(pods), len(COLUMNS)))
        self.existing.append(np.asarray(existing, dtype=np.int64))

    def _last_index(self, now_s: float) -> int:
        # Index of the latest scrape at or before now_s, -1 if none.
        lo, hi = 0, len(self.times_s)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.times_s[mid] <= now_s + 1e-9:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    def instant(self, column: str, now_s: float, alive: set[int] | None = None) -> dict[int, float]:
        """Latest sample per pod (within the staleness window) at ``now_s``: pod -> value."""
        k = self._last_index(now_s)
        if k < 0 or now_s - self.times_s[k] > STALENESS_S:
            return {}
        if column == POD_INFO:
            return {int(p): 1.0 for p in self.existing[k]}
        c = COLUMNS.index(column)
        out = {int(p): float(v) for p, v in zip(self.pods[k], self.values[k][:, c], strict=True)}
        if alive is not None:
            out = {p: v for p, v in out.items() if p in alive}
        return out

    def window(self, column: str, now_s: float, window_s: float) -> dict[int, list[tuple[float, float]]]:
        """Samples per pod in ``(now_s - window_s, now_s]``: pod -> [(t, value), ...]."""
        if column == POD_INFO:
            raise PlannerInputError("kube_pod_info cannot be used in a range function")
        c = COLUMNS.index(column)
        k = self._last_index(now_s)
        series: dict[int, list[tuple[float, float]]] = {}
        while k >= 0 and self.times_s[k] > now_s - window_s + 1e-9:
            for p, v in zip(self.pods[k], self.values[k][:, c], strict=True):
                series.setdefault(int(p), []).append((self.times_s[k], float(v)))
            k -= 1
        for samples in series.values():
            samples.reverse()
        return series


# ---- the query language subset ------------------------------------------------------------------

_TOKEN = re.compile(
    r"\s*(?:(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)"
    r"|(?P<duration>\[\s*\d+[smhd]\s*\])"
    r"|(?P<matchers>\{(?:[^}\"]|\"(?:[^\"\\]|\\.)*\")*\})"
    r"|(?P<name>[A-Za-z_:][A-Za-z0-9_:.|]*)"
    r"|(?P<op>[-+*/(),]))"
)
_AGGREGATIONS = ("sum", "avg", "max", "min", "count")
_RANGE_FUNCTIONS = ("rate", "irate", "increase", "avg_over_time", "max_over_time", "min_over_time")
_PER_POD_LABELS = {"pod", "instance", "pod_name", "kubernetes_pod_name"}
_UNIT_S = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}


@dataclass(frozen=True)
class Query:
    """A parsed query: ``text`` as written and its expression tree ``node``."""

    text: str
    node: tuple

    def evaluate(self, store: MetricStore, now_s: float) -> dict:
        """The result at ``now_s``: a dict of series key -> value (``()`` for one series)."""
        return _evaluate(self.node, store, now_s)

    def scalar(self, store: MetricStore, now_s: float) -> tuple[float | None, str | None]:
        """As KEDA's Prometheus scaler reads it: (value, error); empty -> (None, None)."""
        result = self.evaluate(store, now_s)
        if isinstance(result, float):
            return result, None
        if not result:
            return None, None
        if len(result) > 1:
            return None, f"prometheus query {self.text} returned multiple elements"
        return float(next(iter(result.values()))), None


def parse_query(text: str, signals: dict[str, str] | None = None) -> Query:
    """Parse ``text`` (after the FLEET ``signals`` mapping) or raise naming the query.

    Raises
    ------
    PlannerInputError
        The query uses something this subset does not model.
    """
    signals = signals or {}
    source = " ".join(text.split())
    mapped = signals.get(text, signals.get(source, signals.get(text.strip())))
    expression = mapped if mapped is not None else text
    try:
        parser = _Parser(expression)
        node = parser.expression()
        if parser.peek() is not None:
            raise _Unsupported(f"unexpected {parser.peek()[1]!r}")
    except _Unsupported as error:
        hint = (
            "; map it to a simulated signal in FLEET.yaml, e.g. signals: "
            f"{{'{source}': 'sum(vllm:num_requests_waiting)'}}"
        )
        raise PlannerInputError(f"query {source!r} cannot be simulated: {error}{hint}") from None
    return Query(source, node)


class _Unsupported(Exception):
    pass


class _Parser:
    def __init__(self, text: str):
        self.tokens: list[tuple[str, str]] = []
        position = 0
        text = text.strip()
        while position < len(text):
            match = _TOKEN.match(text, position)
            if match is None or match.end() == position:
                raise _Unsupported(f"cannot read {text[position : position + 20]!r}")
            kind = match.lastgroup
            assert kind is not None  # a non-empty match is one of _TOKEN's named groups
            self.tokens.append((kind, match.group(kind)))
            position = match.end()
            while position < len(text) and text[position].isspace():
                position += 1
        self.i = 0

    def peek(self):
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def take(self, value: str | None = None):
        token = self.peek()
        if token is None or (value is not None and token[1] != value):
            raise _Unsupported(f"expected {value!r}" if value else "unexpected end")
        self.i += 1
        return token

    def expression(self):
        node = self.additive()
        while (token := self.peek()) is not None and token[1].lower() == "or":
            self.take()
            node = ("or", node, self.additive())
        return node

    def additive(self):
        node = self.term()
        while (token := self.peek()) is not None and token[1] in "+-":
            self.take()
            node = ("binary", token[1], node, self.term())
        return node

    def term(self):
        node = self.factor()
        while (token := self.peek()) is not None and token[1] in "*/":
            self.take()
            node = ("binary", token[1], node, self.factor())
        return node

    def factor(self):
        token = self.take()
        kind, value = token
        if kind == "number":
            return ("number", float(value))
        if value == "(":
            node = self.expression()
            self.take(")")
            return node
        if kind != "name":
            raise _Unsupported(f"unexpected {value!r}")
        lowered = value.lower()
        if lowered in _AGGREGATIONS:
            grouping = self.grouping()
            self.take("(")
            inner = self.expression()
            self.take(")")
            if grouping is None:
                grouping = self.grouping()
            return ("aggregate", lowered, grouping, inner)
        if lowered in _RANGE_FUNCTIONS:
            self.take("(")
            selector = self.selector(self.take())
            duration = self.take()
            if duration[0] != "duration":
                raise _Unsupported(f"{lowered}() needs a range such as [1m]")
            self.take(")")
            window_s = float(duration[1].strip("[] ")[:-1]) * _UNIT_S[duration[1].strip("[] ")[-1]]
            return ("range", lowered, selector, window_s)
        if lowered == "vector":
            self.take("(")
            number = self.take()
            if number[0] != "number":
                raise _Unsupported("vector() needs a number")
            self.take(")")
            return ("vector", float(number[1]))
        if self.peek() is not None and self.peek()[1] == "(":
            raise _Unsupported(f"function {value}() is not modelled")
        return ("selector", self.selector(token))

    def grouping(self):
        token = self.peek()
        if token is None or token[1].lower() not in ("by", "without"):
            return None
        self.take()
        self.take("(")
        labels = []
        while self.peek() is not None and self.peek()[1] != ")":
            kind, value = self.take()
            if kind == "name":
                labels.append(value)
        self.take(")")
        per_pod = bool(_PER_POD_LABELS & set(labels))
        if token[1].lower() == "without":
            per_pod = not per_pod
        return "pod" if per_pod else "all"

    def selector(self, token) -> str:
        kind, value = token
        if kind != "name":
            raise _Unsupported(f"expected a metric name, got {value!r}")
        column = metric_column(value)
        if column is None:
            raise _Unsupported(f"metric {value} is not one the simulated vLLM pods export")
        if self.peek() is not None and self.peek()[0] == "matchers":
            self.take()
        return column


def _evaluate(node: tuple, store: MetricStore, now_s: float):
    kind = node[0]
    if kind == "number":
        return node[1]
    if kind == "selector":
        return {(p,): v for p, v in store.instant(node[1], now_s).items()}
    if kind == "range":
        _, function, column, window_s = node
        return {
            (p,): v
            for p, samples in store.window(column, now_s, window_s).items()
            if (v := _range_value(function, samples, now_s, window_s)) is not None
        }
    if kind == "aggregate":
        _, op, grouping, inner = node
        series = _evaluate(inner, store, now_s)
        if isinstance(series, float):
            raise PlannerInputError(f"{op}() of a number is not a vector")
        if grouping == "pod":
            return {key: _aggregate(op, [v]) for key, v in series.items()}
        if not series:
            return {}
        return {(): _aggregate(op, list(series.values()))}
    if kind == "vector":
        return {(): node[1]}
    if kind == "or":
        left = _evaluate(node[1], store, now_s)
        right = _evaluate(node[2], store, now_s)
        if isinstance(left, float) or isinstance(right, float):
            raise PlannerInputError("'or' needs vectors on both sides")
        # Every series of the left side, plus right-side series whose key the left lacks.
        return {**right, **left}
    if kind == "binary":
        _, op, left_node, right_node = node
        left = _evaluate(left_node, store, now_s)
        right = _evaluate(right_node, store, now_s)
        return _binary(op, left, right)
    raise AssertionError(kind)


def _aggregate(op: str, values: list[float]) -> float:
    if op == "sum":
        return float(sum(values))
    if op == "avg":
        return float(sum(values) / len(values))
    if op == "max":
        return float(max(values))
    if op == "min":
        return float(min(values))
    return float(len(values))


def _apply(op: str, a: float, b: float) -> float:
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if b == 0.0:
        return math.nan if a == 0.0 else math.copysign(math.inf, a)
    return a / b


def _binary(op: str, left, right):
    # Vector-vector matching is one-to-one on the series key; a series missing on one side drops out.
    if isinstance(left, float) and isinstance(right, float):
        return _apply(op, left, right)
    if isinstance(left, float):
        return {k: _apply(op, left, v) for k, v in right.items()}
    if isinstance(right, float):
        return {k: _apply(op, v, right) for k, v in left.items()}
    return {k: _apply(op, v, right[k]) for k, v in left.items() if k in right}


def _range_value(function: str, samples: list[tuple[float, float]], now_s: float, window_s: float):
    if function.endswith("_over_time"):
        values = [v for _, v in samples]
        if not values:
            return None
        if function == "avg_over_time":
            return sum(values) / len(values)
        return max(values) if function == "max_over_time" else min(values)
    if len(samples) < 2:
        return None
    if function == "irate":
        (t1, v1), (t2, v2) = samples[-2], samples[-1]
        delta = v2 - v1 if v2 >= v1 else v2
        return delta / (t2 - t1)
    return _extrapolated_rate(samples, now_s - window_s, now_s, function == "rate")


def _extrapolated_rate(samples, range_start_s: float, range_end_s: float, is_rate: bool) -> float:
    """Prometheus ``extrapolatedRate`` for a counter (resets handled, edges extrapolated)."""
    first_t, first_v = samples[0]
    last_t, last_v = samples[-1]
    result = last_v - first_v
    previous = first_v
    for _, value in samples[1:]:
        if value < previous:
            result += previous
        previous = value
    sampled_s = last_t - first_t
    to_start_s = first_t - range_start_s
    to_end_s = range_end_s - last_t
    average_gap_s = sampled_s / (len(samples) - 1)
    if result > 0 and first_v >= 0:
        to_zero_s = sampled_s * (first_v / result)
        if to_zero_s < to_start_s:
            to_start_s = to_zero_s
    threshold_s = average_gap_s * 1.1
    extrapolate_to_s = sampled_s
    extrapolate_to_s += to_start_s if to_start_s < threshold_s else average_gap_s / 2
    extrapolate_to_s += to_end_s if to_end_s < threshold_s else average_gap_s / 2
    result *= extrapolate_to_s / sampled_s
    if is_rate:
        result /= range_end_s - range_start_s
    return result
