"""Flapping: why one signal settles and another keeps adding and removing the same replica.

A trigger with KEDA's default ``AverageValue`` target asks for
``ceil(total / threshold)`` replicas, where ``total`` is the query's value
(:func:`planner.autoscaler.replica_calculator.get_external_per_pod_metric_replicas`). Whether the
fleet can settle is a question about how that total depends on the replica
count ``n`` it is measured at:

* a total that does not depend on ``n`` (the KV cache the requests in flight
  occupy, summed over pods) gives the same answer at every ``n``, so the
  answer is a fixed point;
* a total that vanishes once ``n`` is large enough (the waiting queue), or
  that shrinks as ``1 / n`` (an ``avg`` over pods where a ``sum`` was meant),
  asks for fewer replicas than are needed as soon as they exist, then for
  more again once they are gone: no fixed point, a cycle.

:func:`recommendation_curve` measures that dependence with the simulator:
the fleet pinned at each ``n``, the trigger's query read over a window, the
controller's formula applied. Stabilization windows and rate policies
only delay a recommendation, so they do not move a fixed point; they are
left out of the curve (they are in the full runs the chapter compares).

A KV-cache trigger also needs a threshold the signal can reach. A replica's
batch limit (``--max-num-seqs``) caps how much of its cache it can fill
(:func:`full_batch_kv_usage_frac`); a saturated replica asks for more only
when that usage is more than the HPA's tolerance above the per-replica
threshold (:func:`highest_scaling_kv_threshold_frac`). Above that ceiling the
trigger never scales up, whatever the queue: a fleet that "holds steady"
because it never moves. A threshold carried from one cache size to another
keeps its meaning in tokens per pod (:func:`same_tokens_kv_threshold_frac`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from planner.autoscaler.defaults import DEFAULT_TOLERANCE
from planner.autoscaler.replica_calculator import Tolerances, get_external_per_pod_metric_replicas
from planner.autoscaler.spec import Autoscaler
from planner.errors import PlannerInputError, require_non_negative, require_positive
from planner.simulate import simulate
from planner.simulate.fleet import FleetSpec
from planner.simulate.sweep import SweepPoint, apply_point
from planner.simulate.traffic import RequestTrace

__all__ = [
    "fixed_points",
    "full_batch_kv_usage_frac",
    "highest_scaling_kv_threshold_frac",
    "mean_tokens_held",
    "pinned",
    "recommendation_curve",
    "same_tokens_kv_threshold_frac",
    "trigger_threshold",
    "with_threshold",
]


def pinned(autoscaler: Autoscaler, replicas: int) -> Autoscaler:
    """The same autoscaler with its minimum and maximum both set to ``replicas``."""
    hpa = dataclasses.replace(autoscaler.hpa, min_replicas=replicas, max_replicas=replicas)
    scaled_object = autoscaler.scaled_object
    if scaled_object is not None:
        scaled_object = dataclasses.replace(scaled_object, min_replica_count=replicas, max_replica_count=replicas)
    return dataclasses.replace(autoscaler, hpa=hpa, scaled_object=scaled_object)


def _per_replica_target_milli(autoscaler: Autoscaler) -> int:
    metric = autoscaler.hpa.metrics[0]
    target = metric.target
    if metric.type != "External" or target.average_value_milli is None:
        raise PlannerInputError(
            f"{autoscaler.source}: the fixed-point curve needs an External metric with an AverageValue "
            f"target (a KEDA trigger's default); got a {metric.type} metric with a {target.type} target"
        )
    return target.average_value_milli


def trigger_threshold(autoscaler: Autoscaler) -> float:
    """The per-replica threshold of the autoscaler's first trigger (its ``AverageValue`` target). [metric units]"""
    return _per_replica_target_milli(autoscaler) / 1000.0


def with_threshold(autoscaler: Autoscaler, fleet: FleetSpec, threshold: float) -> Autoscaler:
    """The same autoscaler with its first trigger's threshold replaced.

    The HPA holds the target in thousandths (a Kubernetes quantity's milli
    value), so ``threshold`` is kept to three decimals, as the cluster would.

    Parameters
    ----------
    autoscaler : Autoscaler
        A ScaledObject (or HPA) whose first metric has an ``AverageValue`` target.
    fleet : FleetSpec
        The fleet it will run on (its signal map must read the trigger's query).
    threshold : float
        New per-replica threshold. [metric units]
    """
    _per_replica_target_milli(autoscaler)
    return apply_point(autoscaler, fleet, SweepPoint(0, (("target", float(threshold)),))).autoscaler


def recommendation_curve(
    trace: RequestTrace,
    autoscaler: Autoscaler,
    fleet: FleetSpec,
    replica_counts,
    *,
    from_s: float,
    to_s: float,
    duration_s: float | None = None,
) -> pd.DataFrame:
    """The replicas the autoscaler's first trigger asks for, measured with the fleet pinned at each count.

    Parameters
    ----------
    trace : RequestTrace
    autoscaler : Autoscaler
        A ScaledObject (or HPA) whose first metric is External with an ``AverageValue`` target.
    fleet : FleetSpec
    replica_counts : iterable of int
        Fleet sizes to pin. [replicas]
    from_s, to_s : float
        Window over which the query's value is averaged (after the pinned fleet has settled). [s]
    duration_s : float, optional
        Simulated time of each pinned run. [s] Default ``to_s``.

    Returns
    -------
    pandas.DataFrame
        Columns ``replicas``, ``query_value`` (the query's mean over the
        window) and ``desired_replicas`` (the HPA's answer at that value and
        fleet size, clamped to the autoscaler's own minimum and maximum).
    """
    if not to_s > from_s:
        raise PlannerInputError(f"window {from_s:g}-{to_s:g} s: expected from_s < to_s")
    target_milli = _per_replica_target_milli(autoscaler)
    low, high = autoscaler.hpa.min_replicas or 1, autoscaler.hpa.max_replicas
    rows = []
    for n in replica_counts:
        n = int(n)
        if n < 1:
            raise PlannerInputError(f"replica count {n}: expected at least 1")
        run = simulate(
            trace,
            pinned(autoscaler, n),
            dataclasses.replace(fleet, initial_replicas=n),
            duration_s=duration_s if duration_s is not None else to_s,
        )
        ts = run.timeseries
        window = ts[(ts["t_s"] > from_s) & (ts["t_s"] <= to_s)]["signal"].dropna()
        signal = float(window.mean()) if len(window) else float("nan")
        if np.isnan(signal):
            raise PlannerInputError(
                f"{autoscaler.source}: no value of the trigger's query between "
                f"{from_s:g} and {to_s:g} s at {n} replicas"
            )
        proposal = get_external_per_pod_metric_replicas(n, target_milli, [round(signal * 1000)], Tolerances())
        rows.append(
            {"replicas": n, "query_value": signal, "desired_replicas": int(min(max(proposal.replica_count, low), high))}
        )
    return pd.DataFrame(rows)


def fixed_points(curve: pd.DataFrame) -> list[int]:
    """Replica counts at which the autoscaler asks for exactly the replicas it has."""
    return [int(n) for n, d in zip(curve["replicas"], curve["desired_replicas"], strict=True) if n == d]


def mean_tokens_held(input_tokens, output_tokens):
    """KV tokens a running request holds on average over its life: its prompt and half its output.

    The prompt's blocks are allocated at admission and each decode step adds
    one token, so over the decode the held count rises linearly from the
    prompt to prompt + output.

    Parameters
    ----------
    input_tokens, output_tokens : float or array_like
        Mean prompt and output lengths. [tokens]

    Returns
    -------
    float or numpy.ndarray
        [tokens]

    Examples
    --------
    >>> mean_tokens_held(100, 900)
    550.0
    """
    input_tokens = require_non_negative("input_tokens", input_tokens)
    output_tokens = require_non_negative("output_tokens", output_tokens)
    return input_tokens + output_tokens / 2.0


def full_batch_kv_usage_frac(max_num_seqs, tokens_held, kv_tokens):
    """KV-cache usage of one replica running a full batch: the most a KV trigger reads from it.

    Parameters
    ----------
    max_num_seqs : int or array_like
        vLLM ``--max-num-seqs``. [sequences]
    tokens_held : float or array_like
        Mean KV tokens per running request (:func:`mean_tokens_held`). [tokens]
    kv_tokens : int or array_like
        The replica's KV cache (vLLM's "GPU KV cache size" log line). [tokens]

    Returns
    -------
    float or numpy.ndarray
        ``min(1, max_num_seqs x tokens_held / kv_tokens)``; at 1 the cache,
        not the batch limit, is what binds. [fraction of 1]

    Examples
    --------
    >>> round(full_batch_kv_usage_frac(32, 550, 257_584), 4)
    0.0683
    """
    max_num_seqs = require_positive("max_num_seqs", max_num_seqs)
    tokens_held = require_non_negative("tokens_held", tokens_held)
    kv_tokens = require_positive("kv_tokens", kv_tokens)
    usage = np.minimum(1.0, max_num_seqs * tokens_held / kv_tokens)
    return float(usage) if np.ndim(usage) == 0 else usage


def highest_scaling_kv_threshold_frac(kv_usage_frac, tolerance_frac=DEFAULT_TOLERANCE):
    """The highest per-replica KV threshold at which a saturated replica still asks for more.

    A summed KV trigger with an ``AverageValue`` target proposes a change only
    when the usage ratio ``usage / (threshold x replicas)`` is more than the
    tolerance away from 1. A saturated replica reads at most
    :func:`full_batch_kv_usage_frac`, so any threshold above
    ``usage / (1 + tolerance)`` leaves it alone however long its queue grows.

    Parameters
    ----------
    kv_usage_frac : float or array_like
        KV usage of one replica with a full batch (:func:`full_batch_kv_usage_frac`). [fraction of 1]
    tolerance_frac : float
        The HPA's scale-up tolerance (``--horizontal-pod-autoscaler-tolerance``). [fraction]

    Returns
    -------
    float or numpy.ndarray
        [fraction of 1]

    Examples
    --------
    >>> round(highest_scaling_kv_threshold_frac(0.88), 4)
    0.8
    """
    kv_usage_frac = require_non_negative("kv_usage_frac", kv_usage_frac)
    tolerance_frac = require_non_negative("tolerance_frac", tolerance_frac)
    return kv_usage_frac / (1.0 + tolerance_frac)


def same_tokens_kv_threshold_frac(kv_target_frac, kv_tokens, other_kv_tokens):
    """The KV threshold on a cache of ``other_kv_tokens`` that stands for the same tokens per pod.

    ``vllm:kv_cache_usage_perc`` is a fraction of each pod's own cache, so a
    threshold means ``kv_target_frac x kv_tokens`` tokens; on another cache
    size the same trigger is ``kv_target_frac x kv_tokens / other_kv_tokens``.

    Parameters
    ----------
    kv_target_frac : float or array_like
        Per-replica KV threshold on the first cache. [fraction of 1]
    kv_tokens, other_kv_tokens : int or array_like
        The two caches. [tokens]

    Returns
    -------
    float or numpy.ndarray
        [fraction of 1]

    Examples
    --------
    >>> round(same_tokens_kv_threshold_frac(0.8, 20_000, 257_584), 4)
    0.0621
    """
    kv_target_frac = require_non_negative("kv_target_frac", kv_target_frac)
    kv_tokens = require_positive("kv_tokens", kv_tokens)
    other_kv_tokens = require_positive("other_kv_tokens", other_kv_tokens)
    return kv_target_frac * kv_tokens / other_kv_tokens
