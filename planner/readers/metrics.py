"""Read a vLLM ``/metrics`` scrape and report which autoscaling signals it exports.

The text is parsed with ``prometheus_client``'s exposition-format parser.
For each signal of :data:`planner.vllm.promql.SIGNALS` the report says whether the
server exports the current name, only a deprecated one, or neither, and
:func:`planner.vllm.promql.queries_for` writes PromQL with the names found.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from planner.errors import PlannerInputError
from planner.vllm.promql import LEGACY_ONLY, SIGNALS, queries_for

__all__ = [
    "MetricsReport",
    "SignalStatus",
    "prefix_cache_hit_frac",
    "read_metrics_scrape",
    "report_from_text",
]


@dataclass(frozen=True)
class SignalStatus:
    """What a scrape says about one signal.

    Attributes
    ----------
    key : str
    status : str
        ``current``, ``deprecated`` (only an older name), ``both`` (older name
        still shown beside the current one) or ``missing``.
    name : str
        Metric family the queries use ('' when missing).
    current : str
        The current name.
    value : float or None
        Sum over series for a gauge or counter; None for histograms or when missing.
    """

    key: str
    status: str
    name: str
    current: str
    value: float | None


@dataclass(frozen=True)
class MetricsReport:
    """The vLLM signals found in one scrape, and queries that match them.

    ``cache_config`` holds the labels of ``vllm:cache_config_info`` (block
    size, ``num_gpu_blocks``, ``enable_prefix_caching``; in newer releases (0.25.1 has them) also
    ``kv_cache_size_tokens`` and ``kv_cache_max_concurrency``), empty when the
    scrape has none.
    """

    source: str
    model_names: tuple[str, ...]
    engine: str
    signals: tuple[SignalStatus, ...]
    legacy_metrics: tuple[str, ...]
    exported: frozenset[str] = frozenset()
    queries: dict[str, str] = field(default_factory=dict)
    cache_config: dict[str, str] = field(default_factory=dict)

    @property
    def missing_required(self) -> tuple[str, ...]:
        required = {s.key for s in SIGNALS if s.required}
        return tuple(s.key for s in self.signals if s.status == "missing" and s.key in required)

    def value(self, key: str) -> float | None:
        """The summed value of a gauge or counter signal (None when missing or a histogram)."""
        return next(s.value for s in self.signals if s.key == key)

    @property
    def prefix_cache_hit_frac(self) -> float | None:
        """Prompt tokens found in the prefix cache over prompt tokens looked up, since the server started.

        None when the scrape has no prefix-cache counters or no lookup yet.
        See :func:`prefix_cache_hit_frac` for the fraction over an interval. [fraction]
        """
        return prefix_cache_hit_frac(self)

    @property
    def deprecated_in_use(self) -> tuple[str, ...]:
        """Older names the queries must use because the current one is absent."""
        return tuple(s.name for s in self.signals if s.status == "deprecated")

    @property
    def deprecated_present(self) -> tuple[str, ...]:
        """Every older name the server still exports (with or without the current one)."""
        old = {s.key: s.deprecated for s in SIGNALS}
        return tuple(
            n for s in self.signals if s.status in ("deprecated", "both") for n in old[s.key] if n in self.exported
        )


def prefix_cache_hit_frac(after: MetricsReport, before: MetricsReport | None = None) -> float | None:
    """vLLM's prefix-cache hit fraction: cached prompt tokens over prompt tokens looked up. [fraction]

    vLLM (V1) adds every newly scheduled request's prompt length to
    ``vllm:prefix_cache_queries`` and the tokens it found cached, in whole
    blocks and never the last prompt token, to ``vllm:prefix_cache_hits``.
    One scrape gives the fraction since the server started; two scrapes of
    the same server give it over the interval between them, the figure
    ``rate(hits) / rate(queries)`` would show.

    Parameters
    ----------
    after : MetricsReport
        The (later) scrape.
    before : MetricsReport, optional
        An earlier scrape of the same server.

    Returns
    -------
    float or None
        The fraction, or None when the counters are missing or nothing was
        looked up (prefix caching off, or an idle server).

    Raises
    ------
    PlannerInputError
        When a counter went down between the scrapes (the server restarted).
    """
    queries, hits = after.value("prefix_queries"), after.value("prefix_hits")
    if queries is None or hits is None:
        return None
    if before is not None:
        earlier_queries, earlier_hits = before.value("prefix_queries"), before.value("prefix_hits")
        if earlier_queries is None or earlier_hits is None:
            return None
        if queries < earlier_queries or hits < earlier_hits:
            raise PlannerInputError(
                f"{after.source}: the prefix-cache counters are lower than in {before.source} "
                "(the server restarted between the scrapes); take both scrapes from one server run"
            )
        queries, hits = queries - earlier_queries, hits - earlier_hits
    if queries <= 0:
        return None
    return hits / queries


def read_metrics_scrape(path: str | Path, model_name: str | None = None) -> MetricsReport:
    """Read a saved ``curl .../metrics`` output; see :func:`report_from_text`."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise PlannerInputError(f"{path}: not a text file (expected Prometheus exposition text)") from None
    return report_from_text(text, source=str(path), model_name=model_name)


_EXPECTED = (
    "Expected the text a vLLM server serves at /metrics, lines like "
    "'vllm:num_requests_waiting{model_name=\"m\"} 3.0'; save it with curl http://POD:8000/metrics > scrape.txt"
)


def _reject_other_formats(text: str, source: str) -> None:
    """Name the format of a file that is plainly something else, rather than a parser error."""
    head = text.lstrip()[:200].lower()
    if not head:
        raise PlannerInputError(f"{source}: the file is empty. {_EXPECTED}")
    if head.startswith(("{", "[")):
        raise PlannerInputError(f"{source}: this is JSON, not a /metrics scrape. {_EXPECTED}")
    if head.startswith(("<!doctype", "<html", "<?xml", "<")):
        raise PlannerInputError(f"{source}: this is HTML or XML, not a /metrics scrape. {_EXPECTED}")


def _first_bad_line(text: str) -> tuple[int, str] | None:
    """The first line the exposition parser rejects on its own (1-based), if one does."""
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        try:
            list(text_string_to_metric_families(line + "\n"))
        except (ValueError, IndexError, TypeError):
            return number, line[:80]
    return None


def report_from_text(text: str, source: str = "<text>", model_name: str | None = None) -> MetricsReport:
    """Report the vLLM signals in a Prometheus text exposition.

    Parameters
    ----------
    text : str
        The scrape.
    source : str
        Named in errors.
    model_name : str, optional
        Value of the ``model_name`` label to put in the queries; by default the
        single model the scrape shows (none if it shows several).

    Raises
    ------
    PlannerInputError
        Text the parser rejects, or a scrape with no ``vllm:`` metric at all.
    """
    _reject_other_formats(text, source)
    try:
        families = {f.name: f for f in text_string_to_metric_families(text)}
    except (ValueError, IndexError, TypeError) as error:
        line = _first_bad_line(text)
        raise PlannerInputError(
            f"{source}: not Prometheus text exposition format"
            + (f" at line {line[0]} ({line[1]!r})" if line else "")
            + f": {error or 'the parser rejected it'}. {_EXPECTED}"
        ) from None
    vllm = {name: family for name, family in families.items() if name.startswith("vllm:")}
    if not vllm:
        raise PlannerInputError(
            f"{source}: no vllm: metrics found (is this the /metrics of a vLLM server? "
            f"{len(families)} other metric families were present)"
        )
    models = sorted({s.labels["model_name"] for f in vllm.values() for s in f.samples if "model_name" in s.labels})
    statuses = []
    names: dict[str, str] = {}
    for signal in SIGNALS:
        old = [n for n in signal.deprecated if n in vllm]
        if signal.current in vllm:
            status, name = ("both" if old else "current"), signal.current
        elif old:
            status, name = "deprecated", old[0]
        else:
            status, name = "missing", ""
        value = None
        if name and vllm[name].type in ("gauge", "counter"):
            value = sum(s.value for s in vllm[name].samples if not s.name.endswith("_created"))
        if name:
            names[signal.key] = name
        statuses.append(SignalStatus(signal.key, status, name, signal.current, value))
    chosen = model_name if model_name is not None else (models[0] if len(models) == 1 else None)
    labels = {"model_name": chosen} if chosen else None
    engine = (
        "V1 (kv_cache_usage_perc)"
        if "vllm:kv_cache_usage_perc" in vllm
        else ("V0 (gpu_cache_usage_perc)" if "vllm:gpu_cache_usage_perc" in vllm else "unknown")
    )
    try:
        queries = queries_for(names, labels)
    except ValueError as error:
        raise PlannerInputError(f"{source}: {error}") from None
    info = vllm.get("vllm:cache_config_info")
    cache_config = (
        {k: v for k, v in info.samples[0].labels.items() if k != "engine"} if info is not None and info.samples else {}
    )
    return MetricsReport(
        source=source,
        model_names=tuple(models),
        engine=engine,
        signals=tuple(statuses),
        legacy_metrics=tuple(n for n in LEGACY_ONLY if n in vllm),
        exported=frozenset(vllm),
        queries=queries,
        cache_config=cache_config,
    )
