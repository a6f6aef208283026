"""The ``metric_versions`` module records when vLLM added, renamed, hid and removed each autoscaling metric.

:data:`planner.vllm.promql.SIGNALS` says which names the planner reads today;
this module adds their history, so the book's table of metric names by
version is built from the same catalogue the planner queries with.

vLLM's policy: a metric deprecated in ``X.Y`` is hidden in ``X.Y+1`` (the
flag ``--show-hidden-metrics-for-version=X.Y`` brings it back) and removed in
``X.Y+2``. The versions below come from vLLM's source at release tags and the
pull requests named in each entry. "V0" means the metric was already exported
by the V0 engine, before the V1 engine became the default in 0.8, and the V1
engine kept it. The history runs to :data:`planner.vllm.release.CURRENT_VLLM_VERSION`:
every current name is registered in that release's ``loggers.py``, and the
removals were checked in the released wheels (the old inter-token histogram
is still registered, hidden, in 0.14.0 and gone from 0.15.0). No maths here:
a catalogue and table building.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from planner.markdown import link, markdown_table
from planner.vllm.promql import LEGACY_ONLY, SIGNALS, Signal, queries_for
from planner.vllm.release import CURRENT_VLLM_VERSION

__all__ = [
    "CURRENT_VLLM_VERSION",
    "METRIC_HISTORY",
    "MetricHistory",
    "MetricRow",
    "export_status",
    "exported_by_default",
    "history_releases",
    "metric_rows",
    "metric_table_markdown",
    "parse_version",
    "promql_markdown",
    "release_matrix_markdown",
]

_LOGGERS = "https://github.com/vllm-project/vllm/blob/{tag}/vllm/v1/metrics/loggers.py"
_V0_LIST = ("V0 list", "https://docs.vllm.ai/en/latest/design/metrics.html")
_POLICY = ("policy", "https://docs.vllm.ai/en/latest/usage/metrics.html")


def _pr(number: int) -> tuple[str, str]:
    return f"#{number}", f"https://github.com/vllm-project/vllm/pull/{number}"


def _loggers(tag: str) -> tuple[str, str]:
    return f"loggers.py {tag}", _LOGGERS.format(tag=tag)


@dataclass(frozen=True)
class MetricHistory:
    """The life of one vLLM metric family name.

    Attributes
    ----------
    name : str
        Family name as registered (counters without ``_total``).
    since : str
        First release that exports it, or ``"V0"``.
    deprecated : str
        Release whose help text marks it deprecated ('' if current).
    hidden : str
        First release that no longer exports it by default ('' if current).
    removed : str
        First release without it at all ('' if current or not yet known).
    replaced_by : str
        The name to use instead ('' if none).
    sources : tuple of (str, str)
        ``(title, url)`` of the evidence.
    kind : str
        Prometheus type, for names outside :data:`planner.vllm.promql.SIGNALS`.
    meaning : str
        What it measured, for names outside :data:`planner.vllm.promql.SIGNALS`.
    """

    name: str
    since: str
    sources: tuple[tuple[str, str], ...]
    deprecated: str = ""
    hidden: str = ""
    removed: str = ""
    replaced_by: str = ""
    kind: str = ""
    meaning: str = ""


# Evidence that a name is still registered in the current release.
_NOW = _loggers(f"v{CURRENT_VLLM_VERSION}")

METRIC_HISTORY: tuple[MetricHistory, ...] = (
    MetricHistory("vllm:kv_cache_usage_perc", "0.9.2", (_pr(18354), _loggers("v0.11.0"), _NOW)),
    MetricHistory(
        "vllm:gpu_cache_usage_perc",
        "V0",
        (_pr(18354), _loggers("v0.11.0"), _pr(29330)),
        deprecated="0.9.2",
        hidden="0.11",
        removed="0.12",
        replaced_by="vllm:kv_cache_usage_perc",
    ),
    MetricHistory("vllm:num_requests_running", "V0", (_V0_LIST, _loggers("v0.11.0"), _NOW)),
    MetricHistory("vllm:num_requests_waiting", "V0", (_V0_LIST, _loggers("v0.11.0"), _NOW)),
    MetricHistory("vllm:num_preemptions", "V0", (_V0_LIST, _loggers("v0.11.0"), _NOW)),
    MetricHistory("vllm:request_queue_time_seconds", "V0", (_V0_LIST, _loggers("v0.11.0"), _NOW)),
    MetricHistory("vllm:time_to_first_token_seconds", "V0", (_V0_LIST, _loggers("v0.11.0"), _NOW)),
    MetricHistory("vllm:inter_token_latency_seconds", "0.10", (_loggers("v0.11.0"), _pr(32661), _NOW)),
    MetricHistory(
        "vllm:time_per_output_token_seconds",
        "V0",
        (_loggers("v0.11.0"), _pr(29330), _pr(32661), _loggers("v0.15.0")),
        deprecated="0.11",
        hidden="0.12",
        removed="0.15",
        replaced_by="vllm:inter_token_latency_seconds",
    ),
    MetricHistory("vllm:e2e_request_latency_seconds", "V0", (_V0_LIST, _loggers("v0.11.0"), _NOW)),
    # Counted in prompt tokens: queries per newly scheduled request, hits found cached.
    MetricHistory("vllm:prefix_cache_queries", "0.9.2", (_pr(18354), _loggers("v0.11.0"), _NOW)),
    MetricHistory("vllm:prefix_cache_hits", "0.9.2", (_pr(18354), _loggers("v0.11.0"), _NOW)),
    MetricHistory(
        "vllm:gpu_prefix_cache_queries",
        "0.8",
        (_pr(12592), _pr(18354), _pr(24245), _pr(29330)),
        deprecated="0.9.2",
        hidden="0.11",
        removed="0.12",
        replaced_by="vllm:prefix_cache_queries",
    ),
    MetricHistory(
        "vllm:gpu_prefix_cache_hits",
        "0.8",
        (_pr(12592), _pr(18354), _pr(24245), _pr(29330)),
        deprecated="0.9.2",
        hidden="0.11",
        removed="0.12",
        replaced_by="vllm:prefix_cache_hits",
    ),
    MetricHistory(
        "vllm:num_requests_swapped",
        "V0",
        (_V0_LIST, _pr(15458), _pr(18837), _POLICY),
        deprecated="0.8",
        hidden="0.9",
        removed="0.10",
        kind="gauge",
        meaning="requests swapped out to CPU memory, V0 engine only [requests]",
    ),
    MetricHistory(
        "vllm:cpu_cache_usage_perc",
        "V0",
        (_V0_LIST, _pr(15458), _pr(18837), _POLICY),
        deprecated="0.8",
        hidden="0.9",
        removed="0.10",
        kind="gauge",
        meaning="fraction of CPU swap-space KV blocks in use, V0 engine only [0-1]",
    ),
)

_BY_NAME = {entry.name: entry for entry in METRIC_HISTORY}


def parse_version(text: str) -> tuple[int, ...]:
    """``"0.9.2"`` or ``"v0.9.2"`` -> ``(0, 9, 2)``; ``"V0"`` -> ``(0,)``, older than any numbered release.

    Raises
    ------
    ValueError
        Anything else.
    """
    if text == "V0":
        return (0,)
    text = text.removeprefix("v")
    if not re.fullmatch(r"\d+(\.\d+){1,2}", text):
        raise ValueError(f"not a vLLM release number: {text!r} (expected e.g. 0.11 or 0.9.2)")
    return tuple(int(part) for part in text.split("."))


def exported_by_default(name: str, version: str) -> bool:
    """Whether a vLLM server of ``version`` exports ``name`` without ``--show-hidden-metrics-for-version``."""
    entry = _BY_NAME[name]
    current = parse_version(version)
    if current < parse_version(entry.since):
        return False
    gone = entry.hidden or entry.removed
    return not gone or current < parse_version(gone)


def export_status(name: str, version: str) -> str:
    """What a vLLM server of ``version`` does with ``name``.

    Returns
    -------
    str
        ``"exported"`` (by default), ``"hidden"`` (deprecated and no longer
        exported by default, still in the code), ``"removed"`` or
        ``"not yet"`` (older than the name).
    """
    entry = _BY_NAME[name]
    current = parse_version(version)
    if current < parse_version(entry.since):
        return "not yet"
    if entry.removed and current >= parse_version(entry.removed):
        return "removed"
    if entry.hidden and current >= parse_version(entry.hidden):
        return "hidden"
    return "exported"


def history_releases() -> tuple[str, ...]:
    """The releases where some name appeared, was hidden or removed, then the current one, oldest first."""
    changes = {
        value
        for entry in METRIC_HISTORY
        for value in (entry.since, entry.hidden, entry.removed)
        if value and value != "V0"
    }
    return tuple(sorted(changes | {CURRENT_VLLM_VERSION}, key=parse_version))


def release_matrix_markdown(versions: tuple[str, ...] | None = None) -> str:
    """Which names each release exports by default, as a Markdown table (one row per name).

    By default one column per release of :func:`history_releases`, newest
    first, so the current release stays in view on a narrow screen.
    """
    versions = tuple(reversed(history_releases())) if versions is None else versions
    marks = {"exported": "yes", "hidden": "hidden", "removed": "", "not yet": ""}
    body = [(_code(entry.name), *(marks[export_status(entry.name, v)] for v in versions)) for entry in METRIC_HISTORY]
    return markdown_table(("metric", *versions), body)


@dataclass(frozen=True)
class MetricRow:
    """One line of the metric-names table."""

    name: str
    kind: str
    unit: str
    meaning: str
    since: str
    deprecated: str
    hidden: str
    removed: str
    replaced_by: str
    promql: tuple[str, ...]
    sources: tuple[tuple[str, str], ...]


def _unit_and_meaning(meaning: str) -> tuple[str, str]:
    match = re.fullmatch(r"(.*?)\s*\[(.+)\]", meaning)
    if not match:
        return "", meaning
    unit = "fraction (0-1)" if match.group(2) == "0-1" else match.group(2)
    return unit, match.group(1)


def _queries_naming(signal: Signal, name: str) -> tuple[str, ...]:
    # The planner writes every query with the names a scrape shows; here the
    # other signals keep their current names.
    names = {s.key: s.current for s in SIGNALS} | {signal.key: name}
    return tuple(q for q in queries_for(names).values() if name in q)


def metric_rows() -> tuple[MetricRow, ...]:
    """Every name the planner knows, current first, each with its history and the planner's PromQL.

    Raises
    ------
    KeyError
        A name in :data:`planner.vllm.promql.SIGNALS` or ``LEGACY_ONLY`` with no history entry.
    """
    rows = []
    for signal in SIGNALS:
        unit, meaning = _unit_and_meaning(signal.meaning)
        for name in (signal.current, *signal.deprecated):
            entry = _BY_NAME[name]
            rows.append(
                MetricRow(
                    name,
                    signal.kind,
                    unit,
                    meaning,
                    entry.since,
                    entry.deprecated,
                    entry.hidden,
                    entry.removed,
                    entry.replaced_by,
                    _queries_naming(signal, name),
                    entry.sources,
                )
            )
    for name in LEGACY_ONLY:
        entry = _BY_NAME[name]
        unit, meaning = _unit_and_meaning(entry.meaning)
        rows.append(
            MetricRow(
                name,
                entry.kind,
                unit,
                meaning,
                entry.since,
                entry.deprecated,
                entry.hidden,
                entry.removed,
                entry.replaced_by,
                (),
                entry.sources,
            )
        )
    return tuple(rows)


def _code(text: str) -> str:
    return f"`{text}`" if text else ""


def _life(row: MetricRow) -> str:
    steps = [
        f"{label} {value}"
        for label, value in (("deprecated", row.deprecated), ("hidden", row.hidden), ("removed", row.removed))
        if value
    ]
    return ", ".join(steps) or "current"


def metric_table_markdown(rows: tuple[MetricRow, ...] | None = None) -> str:
    """The names by version as a Markdown table: name (and its successor), type and unit, since, later, sources."""
    rows = metric_rows() if rows is None else rows
    body = []
    for row in rows:
        name = _code(row.name) + (f"<br>now {_code(row.replaced_by)}" if row.replaced_by else "")
        sources = ", ".join(link(title, url) for title, url in row.sources)
        body.append((name, f"{row.kind} [{row.unit}]", row.since, _life(row), sources))
    return markdown_table(("metric", "type [unit]", "since", "later", "sources"), body)


def promql_markdown(rows: tuple[MetricRow, ...] | None = None) -> str:
    """The PromQL the planner writes for each name it reads: the name, then its queries in a code block."""
    rows = metric_rows() if rows is None else rows
    parts = [f"{_code(row.name)}\n\n```text\n" + "\n".join(row.promql) + "\n```" for row in rows if row.promql]
    return "\n\n".join(parts)
