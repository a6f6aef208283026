"""The ``metrics`` module is the simulated Prometheus: per-pod scrapes and the queries autoscalers send.

Every ``scrape_interval_s`` each pod whose vLLM server is up (Ready, or
terminating but not yet exited) is scraped: the gauges ``num_requests_running``,
``num_requests_waiting``, ``kv_cache_usage_perc`` (a fraction 0-1, as vLLM
exports it), GPU utilization (NVML's busy fraction over the last tick, exported
as DCGM does in percent), and the counters ``request_success_total``,
``generation_tokens_total``, ``prompt_tokens_total``, ``num_preemptions_total``.
A pod still warming up has no series; a removed pod's series go stale at once.
The store keeps the scrapes its queries can reach (:attr:`MetricStore.retention_s`:
a day's ``offset`` keeps a day, a plain ``rate`` minutes).

Queries are parsed (:func:`parse_query`) into a subset of PromQL:

* a metric name with or without the ``vllm:`` prefix, with any label matchers
  (they are assumed to select the simulated Deployment's pods), including the
  Google Managed Prometheus spelling ``prometheus.googleapis.com|vllm:NAME|gauge``;
  ``offset`` on a selector, a range or a subquery (never negative: that reads
  samples Prometheus has not scraped yet);
* ``sum``, ``avg``, ``max``, ``min``, ``count``, optionally ``by (...)`` /
  ``without (...)``; a grouping by ``pod`` (or ``instance``) keeps one series
  per pod, any other grouping one series (every pod shares the label), ``le``
  one per histogram bucket;
* ``rate``/``irate``/``increase`` of a counter and ``avg_over_time``/
  ``max_over_time``/``min_over_time`` of a gauge over ``[w]``, with
  Prometheus' window and ``rate`` extrapolation; ``predict_linear(v, t)``
  and ``holt_winters``/``double_exponential_smoothing(v, sf, tf)``; each over a
  range ``x[w]`` or a subquery ``expr[range:step]``;
* ``histogram_quantile(q, ...)`` over vLLM's ``_bucket`` series, which the
  simulated pods do not export: only a store given histograms
  (:meth:`MetricStore.record_histogram`) and a query parsed with
  ``histograms=True`` read them;
* ``+ - * /`` between such terms and numbers, ``or``, and ``vector(N)``;
* ``kube_pod_info`` (kube-state-metrics): 1 per existing pod.

**Which Prometheus.** :meth:`Query.evaluate` follows Prometheus 3 by default
(``prometheus_major=3``): ranges and subqueries are left-open, ``(t - w, t]``
(``promql/engine.go``, ``matrixIterSlice`` and the ``SubqueryExpr`` case of
``eval``), and ``holt_winters`` answers to its Prometheus 3 name too. The
arithmetic of ``rate``, ``sum`` and ``avg`` is the compiled engine's
(:mod:`planner.simulate.fast.metrics`, which this module's evaluation is held
to bit for bit): ``rate`` multiplies by extrapolated / sampled time and then
divides by the range where Prometheus forms that factor first (the last bit
or two), and it moves a counter's start to its zero point before the
extrapolation threshold is checked, as 2.x does (3.x checks first: they differ
only when the zero point lies between half a scrape gap and 1.1 gaps before the
first sample); ``sum`` and ``avg`` add in pod order with the interpreter's
``sum()`` (compensated from Python 3.12, as Prometheus 3 is) and ``avg`` divides
once. ``prometheus_major=2`` is Prometheus 2.42 exactly: closed ranges and
subqueries ``[t - w, t]``, and its arithmetic for every function
(:mod:`planner.simulate.promql_functions`); ``tests/vllm/test_promql_promtool.py``
holds it to 2.42's ``promtool``. The new forecast functions (``predict_linear``,
``holt_winters``, subqueries, ``offset``) compute as Prometheus does under both.
The instant selector's 5-minute lookback keeps a sample exactly 5 minutes old
(2.x; 3.x drops it), which the simulator, scraping every 15 s, never meets.

Anything else raises :class:`~planner.errors.PlannerInputError` naming the
query. Map such a query to one the simulator understands in FLEET.yaml::

    signals:
      "max(inferflow_inflight_requests)": "max(vllm:num_requests_running) + max(vllm:num_requests_waiting)"

The same mapping names what an HPA ``Pods``/``Object``/``External`` metric
is (``"vllm_num_requests_waiting": "num_requests_waiting"``).
"""

from __future__ import annotations

import bisect
import math
import re
from dataclasses import dataclass

import numpy as np

from planner.errors import PlannerInputError
from planner.simulate import promql_functions as F
from planner.vllm.promql import SIGNALS

__all__ = [
    "BASE_NODE_KINDS",
    "COUNTERS",
    "GAUGES",
    "HISTOGRAMS",
    "HISTORY_MARGIN_S",
    "MetricStore",
    "Query",
    "bucket_column",
    "depends_on_time",
    "metric_column",
    "node_kinds",
    "parse_query",
]

GAUGES = ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc", "gpu_util_pct")
COUNTERS = ("request_success_total", "generation_tokens_total", "prompt_tokens_total", "num_preemptions_total")
COLUMNS = GAUGES + COUNTERS
POD_INFO = "kube_pod_info"
STALENESS_S = 300.0  # Prometheus' lookback delta
HISTOGRAMS = tuple(
    name.split(":", 1)[1]
    for signal in SIGNALS
    if signal.kind == "histogram"
    for name in (signal.current, *signal.deprecated)
)
"""vLLM's histogram families (without ``vllm:``), whose ``_bucket`` series :func:`bucket_column` names."""
BUCKET_PREFIX = "bucket:"
HISTORY_MARGIN_S = 600.0
"""Scrapes kept beyond the oldest a query reaches, so a query evaluated a little late still finds them. [s]"""
_PRUNE_CHUNK = 2048  # scrapes dropped at once at least: indices move rarely, the cost is amortized

BASE_NODE_KINDS = frozenset({"number", "selector", "range", "vector", "aggregate", "or", "binary"})
"""The expression nodes of the subset the compiled engine mirrors (:mod:`planner.simulate.fast.metrics`);
``offset``, subqueries, ``predict_linear``, ``holt_winters`` and histograms make others."""

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


def bucket_column(name: str) -> str | None:
    """The histogram a ``_bucket`` series name refers to (``bucket:FAMILY``), or ``None``.

    Examples
    --------
    >>> bucket_column("vllm:time_to_first_token_seconds_bucket")
    'bucket:time_to_first_token_seconds'
    """
    key = name.strip().lower()
    if not key.startswith("vllm:") or not key.endswith("_bucket"):
        return None
    family = key[len("vllm:") : -len("_bucket")]
    return BUCKET_PREFIX + family if family in HISTOGRAMS else None


class _Histogram:
    """One histogram family's records: per record, the pods and their cumulative bucket counts."""

    def __init__(self, upper_bounds: np.ndarray) -> None:
        self.upper_bounds = upper_bounds
        self.times_s: list[float] = []
        self.pods: list[np.ndarray] = []
        self.counts: list[np.ndarray] = []  # shape (pods, buckets)


class MetricStore:
    """Scrapes kept in time order: per scrape, the pods scraped and one row of values per pod.

    Attributes
    ----------
    retention_s : float or None
        Scrapes older than the latest by more than this may be dropped (in chunks of
        2048); ``None`` keeps every scrape. Set from the queries' reach
        (:attr:`Query.history_s`) by :class:`planner.simulate.reference.RunState`. [s]
    """

    def __init__(self) -> None:
        self.times_s: list[float] = []
        self.pods: list[np.ndarray] = []
        self.values: list[np.ndarray] = []  # shape (pods, len(COLUMNS))
        self.existing: list[np.ndarray] = []  # pods that exist (kube_pod_info)
        self.retention_s: float | None = None
        self.histograms: dict[str, _Histogram] = {}
        # Subquery steps already evaluated: (node, major) -> {step ms: result}; see _subquery_point.
        self.subquery_points: dict[tuple, dict[int, dict]] = {}

    def record(self, now_s: float, pods: list[int], rows: np.ndarray, existing: list[int]) -> None:
        self.times_s.append(float(now_s))
        self.pods.append(np.asarray(pods, dtype=np.int64))
        self.values.append(np.asarray(rows, dtype=float).reshape(len(pods), len(COLUMNS)))
        self.existing.append(np.asarray(existing, dtype=np.int64))
        if self.retention_s is not None and len(self.times_s) > _PRUNE_CHUNK:
            cutoff_s = float(now_s) - self.retention_s
            if self.times_s[_PRUNE_CHUNK - 1] < cutoff_s:
                keep = bisect.bisect_left(self.times_s, cutoff_s)
                del self.times_s[:keep], self.pods[:keep], self.values[:keep], self.existing[:keep]

    def record_histogram(
        self, name: str, now_s: float, pods: list[int], upper_bounds, cumulative_counts: np.ndarray
    ) -> None:
        """Record one scrape of a vLLM histogram: per pod, the cumulative count of each ``le`` bucket.

        ``upper_bounds`` must end with ``inf`` and stay the same for a family; the
        simulated pods export no histograms, so only tests and replayed scrapes call this.
        """
        column = bucket_column(name)
        if column is None:
            raise PlannerInputError(f"{name}: not a vLLM histogram's _bucket series")
        bounds = np.asarray(upper_bounds, dtype=float)
        family = self.histograms.setdefault(column, _Histogram(bounds))
        if not np.array_equal(family.upper_bounds, bounds) or not math.isinf(bounds[-1]):
            raise PlannerInputError(f"{name}: the le buckets must end with +Inf and stay the same")
        family.times_s.append(float(now_s))
        family.pods.append(np.asarray(pods, dtype=np.int64))
        family.counts.append(np.asarray(cumulative_counts, dtype=float).reshape(len(pods), len(bounds)))

    @property
    def sealed_s(self) -> float:
        """Time up to which nothing more can be recorded: the oldest of each record stream's latest. [s]"""
        latest = [self.times_s[-1]] if self.times_s else []
        latest += [h.times_s[-1] for h in self.histograms.values() if h.times_s]
        return min(latest) if latest else -math.inf

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

    def window(
        self, column: str, now_s: float, window_s: float, closed: bool = False
    ) -> dict[int, list[tuple[float, float]]]:
        """Samples per pod in ``(now_s - window_s, now_s]`` (``closed``: ``[now_s - window_s, now_s]``).

        Returns pod -> [(t, value), ...], oldest first.
        """
        if column == POD_INFO:
            raise PlannerInputError("kube_pod_info cannot be used in a range function")
        c = COLUMNS.index(column)
        k = self._last_index(now_s)
        series: dict[int, list[tuple[float, float]]] = {}
        while k >= 0 and (
            self.times_s[k] >= now_s - window_s - 1e-9 if closed else self.times_s[k] > now_s - window_s + 1e-9
        ):
            for p, v in zip(self.pods[k], self.values[k][:, c], strict=True):
                series.setdefault(int(p), []).append((self.times_s[k], float(v)))
            k -= 1
        for samples in series.values():
            samples.reverse()
        return series

    def bucket_instant(self, column: str, now_s: float) -> dict[tuple, float]:
        """A histogram's buckets at ``now_s`` (latest record within the lookback): (pod, le) -> count."""
        family = self.histograms.get(column)
        if family is None:
            return {}
        k = bisect.bisect_right(family.times_s, now_s + 1e-9) - 1
        if k < 0 or now_s - family.times_s[k] > STALENESS_S:
            return {}
        return {
            (int(p), float(le)): float(family.counts[k][i, j])
            for i, p in enumerate(family.pods[k])
            for j, le in enumerate(family.upper_bounds)
        }

    def bucket_window(
        self, column: str, now_s: float, window_s: float, closed: bool = False
    ) -> dict[tuple, list[tuple[float, float]]]:
        """A histogram's bucket samples in the window, as :meth:`window`: (pod, le) -> [(t, count), ...]."""
        family = self.histograms.get(column)
        series: dict[tuple, list[tuple[float, float]]] = {}
        if family is None:
            return series
        for k, t_s in enumerate(family.times_s):
            inside = t_s >= now_s - window_s - 1e-9 if closed else t_s > now_s - window_s + 1e-9
            if not inside or t_s > now_s + 1e-9:
                continue
            for i, p in enumerate(family.pods[k]):
                for j, le in enumerate(family.upper_bounds):
                    series.setdefault((int(p), float(le)), []).append((t_s, float(family.counts[k][i, j])))
        return series


# ---- the query language subset ------------------------------------------------------------------

_DURATION = r"(?:\d+(?:ms|[smhdwy]))+"
_TOKEN = re.compile(
    r"\s*(?:(?P<subquery>\[\s*" + _DURATION + r"\s*:\s*(?:" + _DURATION + r")?\s*\])"
    r"|(?P<duration>\[\s*" + _DURATION + r"\s*\])"
    r"|(?P<bare_duration>" + _DURATION + r")(?![A-Za-z0-9_:.])"
    r"|(?P<number>\d+(?:\.\d*)?(?:[eE][+-]?\d+)?)"
    r"|(?P<matchers>\{(?:[^}\"]|\"(?:[^\"\\]|\\.)*\")*\})"
    r"|(?P<name>[A-Za-z_:][A-Za-z0-9_:.|]*)"
    r"|(?P<op>[-+*/(),]))"
)
_AGGREGATIONS = ("sum", "avg", "max", "min", "count")
_RANGE_FUNCTIONS = ("rate", "irate", "increase", "avg_over_time", "max_over_time", "min_over_time")
# Range functions with number arguments after the range: how many.
_FORECAST_FUNCTIONS = {"predict_linear": 1, "holt_winters": 2, "double_exponential_smoothing": 2}
_PER_POD_LABELS = {"pod", "instance", "pod_name", "kubernetes_pod_name"}
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000, "y": 31_536_000_000}
_UNIT_ORDER = ("y", "w", "d", "h", "m", "s", "ms")


def _duration_s(text: str) -> float:
    """A PromQL duration (``5m``, ``1h30m``, ``[23h55m]``) in seconds; units largest first, each once."""
    parts = re.findall(r"(\d+)(ms|[smhdwy])", text)
    units = [unit for _, unit in parts]
    if [_UNIT_ORDER.index(u) for u in units] != sorted({_UNIT_ORDER.index(u) for u in units}):
        raise _Unsupported(f"duration {text.strip('[] ')!r}: units must go from the largest to the smallest, once each")
    return sum(int(n) * _UNIT_MS[unit] for n, unit in parts) / 1000


@dataclass(frozen=True)
class Query:
    """A parsed query: ``text`` as written and its expression tree ``node``."""

    text: str
    node: tuple

    def evaluate(self, store: MetricStore, now_s: float, prometheus_major: int = 3) -> dict:
        """The result at ``now_s``: a dict of series key -> value (``()`` for one series).

        ``prometheus_major`` 3 (the simulator's) or 2 (Prometheus 2.42 exactly); see the module docstring.
        Keys are ``(pod,)``, ``()``, or for histogram buckets ``(pod or None, le)``.
        """
        return _evaluate(self.node, store, now_s, _major(prometheus_major))

    def scalar(self, store: MetricStore, now_s: float, prometheus_major: int = 3) -> tuple[float | None, str | None]:
        """As KEDA's Prometheus scaler reads it: (value, error); empty -> (None, None)."""
        # (The simulator's own reading keeps evaluate's two-argument call, which stand-in queries override.)
        result = self.evaluate(store, now_s) if prometheus_major == 3 else self.evaluate(store, now_s, prometheus_major)
        if isinstance(result, float):
            return result, None
        if not result:
            return None, None
        if len(result) > 1:
            return None, f"prometheus query {self.text} returned multiple elements"
        return float(next(iter(result.values()))), None

    @property
    def history_s(self) -> float:
        """How far back from the evaluation time the query reads samples: offsets, ranges and lookback. [s]"""
        return _history_s(self.node)


def parse_query(text: str, signals: dict[str, str] | None = None, *, histograms: bool = False) -> Query:
    """Parse ``text`` (after the FLEET ``signals`` mapping) or raise naming the query.

    ``histograms`` admits vLLM's ``_bucket`` series (for a store given them with
    :meth:`MetricStore.record_histogram`; the simulated pods export none).

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
        parser = _Parser(expression, histograms)
        node = parser.instant_operand(parser.expression())
        if parser.peek() is not None:
            raise _Unsupported(f"unexpected {parser.peek()[1]!r}")
    except _Unsupported as error:
        hint = (
            "; map it to a simulated signal in FLEET.yaml, e.g. signals: "
            f"{{'{source}': 'sum(vllm:num_requests_waiting)'}}"
        )
        raise PlannerInputError(f"query {source!r} cannot be simulated: {error}{hint}") from None
    return Query(source, node)


def node_kinds(node: tuple) -> frozenset[str]:
    """Every expression-node kind in a parsed query's tree (compare with :data:`BASE_NODE_KINDS`)."""
    kinds = {node[0]}
    for child in node[1:]:
        if isinstance(child, tuple) and child and isinstance(child[0], str):
            kinds |= node_kinds(child)
    return frozenset(kinds)


def depends_on_time(node: tuple) -> bool:
    """Whether the query's value can change between two scrapes (a range, an offset, a subquery)."""
    return bool(node_kinds(node) - {"number", "selector", "vector", "aggregate", "or", "binary", "aggregate_by"})


class _Unsupported(Exception):
    pass


class _Parser:
    def __init__(self, text: str, histograms: bool = False):
        self.histograms = histograms
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

    @staticmethod
    def instant_operand(node):
        # Range vectors (x[5m], expr[30m:1m]) are only a range function's argument.
        if node[0] in ("matrix", "subquery"):
            raise _Unsupported("a range vector (x[5m] or a subquery) is only the argument of a range function")
        return node

    def expression(self):
        node = self.additive()
        while (token := self.peek()) is not None and token[1].lower() == "or":
            self.take()
            node = ("or", self.instant_operand(node), self.instant_operand(self.additive()))
        return node

    def additive(self):
        node = self.term()
        while (token := self.peek()) is not None and token[1] in "+-":
            self.take()
            node = ("binary", token[1], self.instant_operand(node), self.instant_operand(self.term()))
        return node

    def term(self):
        node = self.factor()
        while (token := self.peek()) is not None and token[1] in "*/":
            self.take()
            node = ("binary", token[1], self.instant_operand(node), self.instant_operand(self.factor()))
        return node

    def factor(self):
        node = self.primary()
        token = self.peek()
        if token is not None and token[0] == "subquery":
            self.take()
            range_text, step_text = token[1].strip("[] ").split(":")
            if not step_text.strip():
                raise _Unsupported("a subquery needs its step written ([30m:1m]): the default is the server's")
            range_s, step_s = _duration_s(range_text), _duration_s(step_text)
            if range_s <= 0 or step_s <= 0:
                raise _Unsupported("a subquery's range and step must be positive")
            node = ("subquery", self.instant_operand(node), range_s, step_s, self.offset())
        return node

    def primary(self):
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
            inner = self.instant_operand(self.expression())
            self.take(")")
            if grouping is None:
                grouping = self.grouping()
            labels, without = grouping if grouping is not None else ((), False)
            if "bucket" in _columns(inner):
                # Over histogram buckets the grouping keeps pods and/or le as written.
                keep_le = ("le" in labels) != without
                keep_pod = bool(_PER_POD_LABELS & set(labels)) != without
                return ("aggregate_by", lowered, keep_pod, keep_le, inner)
            if grouping is None:
                return ("aggregate", lowered, None, inner)
            per_pod = bool(_PER_POD_LABELS & set(labels))
            if without:
                per_pod = not per_pod
            return ("aggregate", lowered, "pod" if per_pod else "all", inner)
        if lowered in _RANGE_FUNCTIONS or lowered in _FORECAST_FUNCTIONS:
            self.take("(")
            argument = self.factor()
            if argument[0] not in ("matrix", "subquery"):
                raise _Unsupported(f"{lowered}() needs a range such as [1m]")
            params = []
            for _ in range(_FORECAST_FUNCTIONS.get(lowered, 0)):
                self.take(",")
                params.append(self.signed_number(lowered))
            self.take(")")
            if lowered in ("holt_winters", "double_exponential_smoothing"):
                for name, factor in zip(("smoothing", "trend"), params, strict=True):
                    if not 0 < factor < 1:
                        raise _Unsupported(f"{lowered}(): the {name} factor must be in (0, 1), got {factor:g}")
            if lowered in _RANGE_FUNCTIONS and argument[0] == "matrix" and argument[3] == 0.0:
                column = argument[1]
                if not column.startswith(BUCKET_PREFIX):
                    return ("range", lowered, column, argument[2])
            return ("frange", lowered, argument, tuple(params))
        if lowered == "histogram_quantile":
            self.take("(")
            q = self.signed_number(lowered)
            self.take(",")
            inner = self.instant_operand(self.expression())
            self.take(")")
            return ("histogram_quantile", q, inner)
        if lowered == "vector":
            self.take("(")
            number = self.take()
            if number[0] != "number":
                raise _Unsupported("vector() needs a number")
            self.take(")")
            return ("vector", float(number[1]))
        if self.peek() is not None and self.peek()[1] == "(":
            raise _Unsupported(f"function {value}() is not modelled")
        column = self.selector(token)
        after = self.peek()
        if after is not None and after[0] == "duration":
            self.take()
            return ("matrix", column, _duration_s(after[1]), self.offset())
        offset_s = self.offset()
        if offset_s == 0.0 and not column.startswith(BUCKET_PREFIX):
            return ("selector", column)
        return ("instant", column, offset_s)

    def signed_number(self, function: str) -> float:
        sign = 1.0
        if self.peek() is not None and self.peek()[1] == "-":
            self.take()
            sign = -1.0
        token = self.take()
        if token[0] != "number":
            raise _Unsupported(f"{function}() takes a number here, got {token[1]!r}")
        return sign * float(token[1])

    def offset(self) -> float:
        token = self.peek()
        if token is None or token[1].lower() != "offset":
            return 0.0
        self.take()
        duration = self.take()
        if duration[1] == "-":
            raise _Unsupported(
                "a negative offset reads samples after the evaluation time, which Prometheus has not scraped yet"
            )
        if duration[0] != "bare_duration":
            raise _Unsupported(f"offset needs a duration such as 1d, got {duration[1]!r}")
        return _duration_s(duration[1])

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
        return tuple(labels), token[1].lower() == "without"

    def selector(self, token) -> str:
        kind, value = token
        if kind != "name":
            raise _Unsupported(f"expected a metric name, got {value!r}")
        column = metric_column(value)
        if column is None and self.histograms:
            column = bucket_column(value)
        if column is None:
            raise _Unsupported(f"metric {value} is not one the simulated vLLM pods export")
        if self.peek() is not None and self.peek()[0] == "matchers":
            self.take()
        return column


def _columns(node: tuple) -> set[str]:
    # "bucket" when the tree reads a histogram's buckets, else the plain columns it reads.
    found: set[str] = set()
    kind = node[0]
    if kind in ("selector", "instant", "matrix") or (kind == "range"):
        column = node[2] if kind == "range" else node[1]
        found.add("bucket" if column.startswith(BUCKET_PREFIX) else column)
    for child in node[1:]:
        if isinstance(child, tuple) and child and isinstance(child[0], str):
            found |= _columns(child)
    return found


def _history_s(node: tuple) -> float:
    kind = node[0]
    if kind == "selector":
        return STALENESS_S
    if kind == "instant":
        return node[2] + STALENESS_S
    if kind == "range":
        return node[3]
    if kind == "matrix":
        return node[3] + node[2]
    if kind == "subquery":
        return node[4] + node[2] + node[3] + _history_s(node[1])
    children = [
        _history_s(child) for child in node[1:] if isinstance(child, tuple) and child and isinstance(child[0], str)
    ]
    return max(children, default=0.0)


def _major(prometheus_major: int) -> int:
    if prometheus_major not in (2, 3):
        raise PlannerInputError(f"prometheus_major: expected 2 or 3, got {prometheus_major!r}")
    return int(prometheus_major)


def _ms(t_s: float) -> int:
    return round(t_s * 1000)


def _evaluate(node: tuple, store: MetricStore, now_s: float, major: int = 3):
    kind = node[0]
    if kind == "number":
        return node[1]
    if kind == "selector":
        return {(p,): v for p, v in store.instant(node[1], now_s).items()}
    if kind == "range":
        _, function, column, window_s = node
        if major == 2:
            return _range_function(function, ("matrix", column, window_s, 0.0), (), store, now_s, major)
        return {
            (p,): v
            for p, samples in store.window(column, now_s, window_s).items()
            if (v := _range_value(function, samples, now_s, window_s)) is not None
        }
    if kind == "aggregate":
        _, op, grouping, inner = node
        series = _evaluate(inner, store, now_s, major)
        if isinstance(series, float):
            raise PlannerInputError(f"{op}() of a number is not a vector")
        if grouping == "pod":
            return {key: _aggregate(op, [v], major) for key, v in series.items()}
        if not series:
            return {}
        return {(): _aggregate(op, list(series.values()), major)}
    if kind == "vector":
        return {(): node[1]}
    if kind == "or":
        left = _evaluate(node[1], store, now_s, major)
        right = _evaluate(node[2], store, now_s, major)
        if isinstance(left, float) or isinstance(right, float):
            raise PlannerInputError("'or' needs vectors on both sides")
        # Every series of the left side, plus right-side series whose key the left lacks.
        return {**right, **left}
    if kind == "binary":
        _, op, left_node, right_node = node
        left = _evaluate(left_node, store, now_s, major)
        right = _evaluate(right_node, store, now_s, major)
        return _binary(op, left, right)
    if kind == "instant":
        _, column, offset_s = node
        at_s = now_s - offset_s
        if column.startswith(BUCKET_PREFIX):
            return store.bucket_instant(column, at_s)
        return {(p,): v for p, v in store.instant(column, at_s).items()}
    if kind == "frange":
        _, function, source, params = node
        return _range_function(function, source, params, store, now_s, major)
    if kind == "aggregate_by":
        return _aggregate_by(node, store, now_s, major)
    if kind == "histogram_quantile":
        _, q, inner = node
        series = _evaluate(inner, store, now_s, major)
        groups: dict[tuple, list[tuple[float, float]]] = {}
        for key, value in series.items():
            if len(key) == 2:  # a bucket: (pod or None, le); series without le are dropped, as Prometheus does
                groups.setdefault(() if key[0] is None else (key[0],), []).append((key[1], value))
        return {key: F.bucket_quantile(q, buckets, major=major) for key, buckets in groups.items()}
    raise AssertionError(kind)


def _aggregate(op: str, values: list[float], major: int = 3) -> float:
    if major == 2 and op in ("sum", "avg"):
        return F.go_sum(values) if op == "sum" else F.go_avg(values)
    if op == "sum":
        return float(sum(values))
    if op == "avg":
        return float(sum(values) / len(values))
    if op == "max":
        return float(max(values))
    if op == "min":
        return float(min(values))
    return float(len(values))


def _aggregate_by(node: tuple, store: MetricStore, now_s: float, major: int) -> dict:
    # An aggregation over histogram buckets: groups by pod and/or le as the grouping keeps them.
    _, op, keep_pod, keep_le, inner = node
    series = _evaluate(inner, store, now_s, major)
    if isinstance(series, float):
        raise PlannerInputError(f"{op}() of a number is not a vector")
    groups: dict[tuple, list[float]] = {}
    for key, value in series.items():
        pod = key[0] if keep_pod and key else None
        group: tuple = (pod, key[1]) if keep_le and len(key) == 2 else (() if pod is None else (pod,))
        groups.setdefault(group, []).append(value)
    return {group: _aggregate(op, values, major) for group, values in groups.items()}


def _range_function(function: str, source: tuple, params: tuple, store: MetricStore, now_s: float, major: int):
    # A range function over a range x[w] offset d or a subquery expr[r:s] offset d, per series.
    if source[0] == "matrix":
        _, column, range_s, offset_s = source
        end_s = now_s - offset_s
        if column.startswith(BUCKET_PREFIX):
            series = store.bucket_window(column, end_s, range_s, closed=major == 2)
        else:
            series = {(p,): s for p, s in store.window(column, end_s, range_s, closed=major == 2).items()}
    else:
        range_s, offset_s = source[2], source[4]
        end_s = now_s - offset_s
        series = _subquery_series(source, store, now_s, major)
    eval_ms = _ms(now_s)
    out = {}
    for key, samples in series.items():
        value = _apply_range(function, samples, end_s, range_s, eval_ms, params, major)
        if value is not None:
            out[key] = value
    return out


def _apply_range(function, samples, end_s, range_s, eval_ms, params, major):
    if major == 3 and function in _RANGE_FUNCTIONS:
        # The simulator's own arithmetic for the functions the compiled engine mirrors.
        return _range_value(function, samples, end_s, range_s)
    times_ms = [_ms(t) for t, _ in samples]
    values = [v for _, v in samples]
    if not values:
        return None
    if function in ("rate", "increase"):
        end_ms = _ms(end_s)
        start_ms = end_ms - _ms(range_s)
        return F.extrapolated_rate(times_ms, values, start_ms, end_ms, range_s, is_rate=function == "rate", major=major)
    if function == "irate":
        if len(values) < 2:
            return None
        v1, v2 = values[-2], values[-1]
        delta = v2 - v1 if not v2 < v1 else v2
        return delta / (float(times_ms[-1] - times_ms[-2]) / 1000)
    if function == "avg_over_time":
        return F.avg_over_time(values, major=major)
    if function in ("max_over_time", "min_over_time"):
        best = values[0]
        for value in values:
            if (value > best if function == "max_over_time" else value < best) or math.isnan(best):
                best = value
        return best
    if function == "predict_linear":
        return F.predict_linear(times_ms, values, eval_ms, params[0])
    return F.double_exponential_smoothing(values, params[0], params[1])


def _subquery_series(source: tuple, store: MetricStore, now_s: float, major: int) -> dict:
    # expr[range:step] offset d: the inner expression at every step, as series of (step time, value).
    _, inner, range_s, step_s, offset_s = source
    steps = F.subquery_steps_ms(_ms(now_s), _ms(range_s), _ms(step_s), _ms(offset_s), major=major)
    points = store.subquery_points.setdefault((inner, major), {})
    while points and next(iter(points)) < steps.start:
        del points[next(iter(points))]  # steps older than any this subquery can reach again
    series: dict[tuple, list[tuple[float, float]]] = {}
    for step_ms in steps:
        result = points.get(step_ms)
        if result is None:
            evaluated = _evaluate(inner, store, step_ms / 1000, major)
            if isinstance(evaluated, float):
                raise PlannerInputError("a subquery needs an instant vector, not a number")
            result = evaluated
            # Nothing recorded later can change a step at or before the last record of every stream.
            if step_ms / 1000 <= store.sealed_s:
                points[step_ms] = result
        for key, value in result.items():
            series.setdefault(key, []).append((step_ms / 1000, value))
    return series


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
