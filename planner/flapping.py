"""Flapping: why one signal settles and another keeps adding and removing the same replica.

A trigger with KEDA's default ``AverageValue`` target asks for
``ceil(total / threshold)`` replicas, where ``total`` is the query's value
(:func:`planner.hpa.get_external_per_pod_metric_replicas`). Whether the
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
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from planner.errors import PlannerInputError
from planner.hpa import Tolerances, get_external_per_pod_metric_replicas
from planner.readers.manifest import Autoscaler
from planner.simulate.fleet import FleetSpec
from planner.simulate.reference import simulate
from planner.simulate.traffic import RequestTrace

__all__ = ["fixed_points", "pinned", "recommendation_curve"]


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
            f"target (a KEDA trigger's default); got a {metric.type} metric with a {target.type} target")
    return target.average_value_milli


def recommendation_curve(trace: RequestTrace, autoscaler: Autoscaler, fleet: FleetSpec, replica_counts, *,
                         from_s: float, to_s: float, duration_s: float | None = None) -> pd.DataFrame:
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
        run = simulate(trace, pinned(autoscaler, n), dataclasses.replace(fleet, initial_replicas=n),
                       duration_s=duration_s if duration_s is not None else to_s)
        ts = run.timeseries
        window = ts[(ts["t_s"] > from_s) & (ts["t_s"] <= to_s)]["signal"].dropna()
        signal = float(window.mean()) if len(window) else float("nan")
        if np.isnan(signal):
            raise PlannerInputError(f"{autoscaler.source}: no value of the trigger's query between "
                                    f"{from_s:g} and {to_s:g} s at {n} replicas")
        proposal = get_external_per_pod_metric_replicas(n, target_milli, [round(signal * 1000)], Tolerances())
        rows.append({"replicas": n, "query_value": signal,
                     "desired_replicas": int(min(max(proposal.replica_count, low), high))})
    return pd.DataFrame(rows)


def fixed_points(curve: pd.DataFrame) -> list[int]:
    """Replica counts at which the autoscaler asks for exactly the replicas it has."""
    return [int(n) for n, d in zip(curve["replicas"], curve["desired_replicas"], strict=True) if n == d]
