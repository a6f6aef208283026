"""The ``promql`` module knows vLLM's Prometheus metric names and writes queries for them.

vLLM renamed some metrics when its V1 engine replaced V0: KV usage is
``vllm:kv_cache_usage_perc`` (a fraction 0-1, despite the name; older builds
call it ``vllm:gpu_cache_usage_perc``), inter-token latency is
``vllm:inter_token_latency_seconds`` (older: ``vllm:time_per_output_token_seconds``),
and the swap metrics of V0's swapping preemption mode are gone. vLLM hides a
metric one minor version after deprecating it (``--show-hidden-metrics-for-version``
brings it back), so a query must use the name the running server exports.
This module has no maths: a catalogue of signals and string building.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["SIGNALS", "Signal", "queries_for", "selector"]


@dataclass(frozen=True)
class Signal:
    """One quantity an autoscaler or a dashboard reads from vLLM.

    Attributes
    ----------
    key : str
        Short name used in reports.
    kind : str
        Prometheus type of the current metric: gauge, counter or histogram.
    current : str
        Metric family name in current vLLM (counters without ``_total``).
    deprecated : tuple of str
        Older names of the same quantity.
    meaning : str
        What it measures, with its unit.
    required : bool
        Whether the planner's thresholds need it.
    """

    key: str
    kind: str
    current: str
    deprecated: tuple[str, ...]
    meaning: str
    required: bool


SIGNALS: tuple[Signal, ...] = (
    Signal(
        "kv_usage",
        "gauge",
        "vllm:kv_cache_usage_perc",
        ("vllm:gpu_cache_usage_perc",),
        "fraction of KV-cache blocks in use [0-1]",
        True,
    ),
    Signal("running", "gauge", "vllm:num_requests_running", (), "requests in the running batch [requests]", True),
    Signal("waiting", "gauge", "vllm:num_requests_waiting", (), "requests queued for a slot [requests]", True),
    Signal("preemptions", "counter", "vllm:num_preemptions", (), "preemptions since start [count]", True),
    Signal(
        "queue_time", "histogram", "vllm:request_queue_time_seconds", (), "time requests waited in the queue [s]", True
    ),
    Signal("ttft", "histogram", "vllm:time_to_first_token_seconds", (), "time to first token [s]", False),
    Signal(
        "itl",
        "histogram",
        "vllm:inter_token_latency_seconds",
        ("vllm:time_per_output_token_seconds",),
        "time between output tokens [s]",
        False,
    ),
    Signal("e2e", "histogram", "vllm:e2e_request_latency_seconds", (), "request latency [s]", False),
    Signal(
        "prefix_queries",
        "counter",
        "vllm:prefix_cache_queries",
        ("vllm:gpu_prefix_cache_queries",),
        "prompt tokens looked up in the prefix cache [tokens]",
        False,
    ),
    Signal(
        "prefix_hits",
        "counter",
        "vllm:prefix_cache_hits",
        ("vllm:gpu_prefix_cache_hits",),
        "prompt tokens found in the prefix cache [tokens]",
        False,
    ),
)

# Names that belong to V0's swapping preemption mode, gone from the V1 engine.
LEGACY_ONLY = ("vllm:num_requests_swapped", "vllm:cpu_cache_usage_perc")

_LABEL_VALUE = re.compile(r'^[^"\\\n]*$')


def selector(labels: dict[str, str] | None = None) -> str:
    """A PromQL label matcher such as ``{model_name="llama"}`` ('' without labels)."""
    if not labels:
        return ""
    for name, value in labels.items():
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or not _LABEL_VALUE.match(value):
            raise ValueError(f"label {name}={value!r} cannot be written into a PromQL matcher")
    return "{" + ",".join(f'{name}="{value}"' for name, value in labels.items()) + "}"


def queries_for(names: dict[str, str], labels: dict[str, str] | None = None, window: str = "5m") -> dict[str, str]:
    """PromQL for the autoscaling signals, using the metric names a server exports.

    Parameters
    ----------
    names : dict
        Signal key -> metric family name found in the scrape (current or
        deprecated spelling); signals absent from it get no query.
    labels : dict, optional
        Label matchers to add, e.g. ``{"model_name": "llama"}``.
    window : str
        Range for ``rate()``, a PromQL duration.

    Returns
    -------
    dict
        Query name -> PromQL expression.
    """
    match = selector(labels)
    queries: dict[str, str] = {}
    if "kv_usage" in names:
        kv = names["kv_usage"] + match
        queries["kv_usage_fleet_sum"] = f"sum({kv})"
        queries["kv_usage_per_pod_avg"] = f"avg({kv})"
    if "running" in names and "waiting" in names:
        queries["in_flight_sum"] = f"sum({names['running']}{match}) + sum({names['waiting']}{match})"
    if "waiting" in names:
        queries["waiting_sum"] = f"sum({names['waiting']}{match})"
    if "preemptions" in names:
        queries["preemptions_per_s"] = f"sum(rate({names['preemptions']}_total{match}[{window}]))"
    if "prefix_hits" in names and "prefix_queries" in names:
        queries["prefix_cache_hit_frac"] = (
            f"sum(rate({names['prefix_hits']}_total{match}[{window}])) / "
            f"sum(rate({names['prefix_queries']}_total{match}[{window}]))"
        )
    for key in ("queue_time", "ttft", "itl", "e2e"):
        if key in names:
            queries[f"{key}_p99_s"] = (
                f"histogram_quantile(0.99, sum by (le) (rate({names[key]}_bucket{match}[{window}])))"
            )
    return queries
