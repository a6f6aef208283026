"""The lab: several autoscaler configurations replayed on the same traffic and compared.

Each configuration is one manifest's HPA or ScaledObject; every run goes
through :func:`planner.simulate.reference.simulate` with the same trace and
fleet, so the differences between rows are the autoscaler's alone.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

import pandas as pd

from planner.autoscaler.defaults import DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S
from planner.autoscaler.spec import Autoscaler
from planner.errors import PlannerInputError
from planner.manifests.generate import POLLING_INTERVAL_S
from planner.simulate import simulate
from planner.simulate.fleet import FleetSpec
from planner.simulate.outcome import Outcome
from planner.simulate.replica import ReplicaSpec
from planner.simulate.traffic import RequestTrace

__all__ = [
    "SIGNAL_QUERIES",
    "configuration_table",
    "fleet_with",
    "run_configurations",
    "scaled_object_yaml",
]

SIGNAL_QUERIES: dict[str, str] = {
    "requests in flight": "sum(vllm:num_requests_running) + sum(vllm:num_requests_waiting)",
    "waiting requests": "sum(vllm:num_requests_waiting)",
    "KV cache use (sum)": "sum(vllm:kv_cache_usage_perc)",
    "KV cache use (avg)": "avg(vllm:kv_cache_usage_perc)",
    "completed requests/s": "sum(rate(vllm:request_success_total[1m]))",
    "GPU utilization (avg, %)": "avg(DCGM_FI_DEV_GPU_UTIL)",
}
"""The signals the lab offers, each as the PromQL a ScaledObject trigger would carry."""


def fleet_with(fleet: FleetSpec, **changes) -> FleetSpec:
    """A copy of ``fleet`` with fields of it, or of its ``replica``, replaced by name.

    Parameters
    ----------
    fleet : FleetSpec
    **changes
        Field names of :class:`FleetSpec` or :class:`~planner.simulate.replica.ReplicaSpec`
        (``warmup_s=180.0``, ``max_num_seqs=32``, ...).

    Raises
    ------
    PlannerInputError
        For a name that is neither.
    """
    fleet_fields = {f.name for f in dataclasses.fields(FleetSpec)} - {"replica"}
    replica_fields = {f.name for f in dataclasses.fields(ReplicaSpec)}
    unknown = sorted(set(changes) - fleet_fields - replica_fields)
    if unknown:
        raise PlannerInputError(
            f"fleet parameter {unknown[0]!r}: expected one of {', '.join(sorted(fleet_fields | replica_fields))}"
        )
    replica = dataclasses.replace(fleet.replica, **{k: v for k, v in changes.items() if k in replica_fields})
    return dataclasses.replace(fleet, replica=replica, **{k: v for k, v in changes.items() if k in fleet_fields})


def run_configurations(
    trace: RequestTrace, autoscalers: Mapping[str, Autoscaler], fleet: FleetSpec, *, duration_s: float | None = None
) -> dict[str, Outcome]:
    """Replay ``trace`` once per configuration, all on the same fleet.

    Parameters
    ----------
    trace : RequestTrace
    autoscalers : mapping of str to Autoscaler
        Label -> the configuration's autoscaler.
    fleet : FleetSpec
    duration_s : float, optional
        Simulated time. [s] Default: the simulator's (last arrival plus a drain tail).

    Returns
    -------
    dict of str to Outcome
        In the order given.
    """
    return {
        label: simulate(trace, autoscaler, fleet, duration_s=duration_s) for label, autoscaler in autoscalers.items()
    }


def configuration_table(runs: Mapping[str, Outcome], *, window_s: tuple[float, float] | None = None) -> pd.DataFrame:
    """One row per configuration: what it served, what it cost, how it moved.

    Parameters
    ----------
    runs : mapping of str to Outcome
    window_s : (float, float), optional
        Also report attainment for requests arriving in ``[start, end)``. [s]

    Returns
    -------
    pandas.DataFrame
        Indexed by ``configuration``; columns ``slo_attainment_frac``
        [fraction] (and ``window_attainment_frac``), ``cost_usd`` [$],
        ``gpu_hours`` [GPU-h], ``mean_replicas`` (live pods averaged over the
        run), ``peak_replicas``, ``scale_events``, ``flap_cycles``,
        ``peak_waiting`` [requests], ``cut_generations``.
    """
    rows = []
    for label, run in runs.items():
        row = {"configuration": label, "slo_attainment_frac": run.slo_attainment_frac}
        if window_s is not None:
            row["window_attainment_frac"] = run.attainment_between(*window_s)
        row |= {
            "cost_usd": run.cost_usd,
            "gpu_hours": run.gpu_hours,
            "mean_replicas": float(run.timeseries["replicas_live"].mean()),
            "peak_replicas": run.peak_replicas,
            "scale_events": run.scale_events,
            "flap_cycles": run.flap_cycles,
            "peak_waiting": run.peak_waiting,
            "cut_generations": run.cut_generations,
        }
        rows.append(row)
    return pd.DataFrame(rows).set_index("configuration")


def scaled_object_yaml(
    signal: str,
    target: float,
    *,
    min_replicas: int = 1,
    max_replicas: int = 16,
    polling_s: int = POLLING_INTERVAL_S,
    scale_down_window_s: int = int(DEFAULT_DOWNSCALE_STABILIZATION_WINDOW_S),
    name: str = "chat",
) -> str:
    """A KEDA ScaledObject with one Prometheus trigger on one of :data:`SIGNAL_QUERIES`, as YAML text.

    Parameters
    ----------
    signal : str
        A key of :data:`SIGNAL_QUERIES`.
    target : float
        The trigger's threshold, per replica (KEDA's default ``AverageValue``).
    min_replicas, max_replicas : int
    polling_s : int
        ``pollingInterval``. [s]
    scale_down_window_s : int
        The HPA's scale-down stabilization window. [s]
    name : str
        ``metadata.name`` and the scaled Deployment.
    """
    if signal not in SIGNAL_QUERIES:
        raise PlannerInputError(f"signal {signal!r}: expected one of {', '.join(SIGNAL_QUERIES)}")
    if not (math.isfinite(target) and target > 0):
        raise PlannerInputError(f"target: expected a number > 0, got {target!r}")
    if not 0 <= min_replicas <= max_replicas:
        raise PlannerInputError(f"min_replicas {min_replicas}, max_replicas {max_replicas}: expected 0 <= min <= max")
    return (
        "apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\n"
        f"metadata:\n  name: {name}\nspec:\n  scaleTargetRef:\n    name: {name}\n"
        f"  minReplicaCount: {min_replicas}\n  maxReplicaCount: {max_replicas}\n  pollingInterval: {polling_s}\n"
        "  advanced:\n    horizontalPodAutoscalerConfig:\n      behavior:\n        scaleDown:\n"
        f"          stabilizationWindowSeconds: {scale_down_window_s}\n"
        "  triggers:\n  - type: prometheus\n    metadata:\n      serverAddress: http://prometheus:9090\n"
        f"      query: '{SIGNAL_QUERIES[signal]}'\n      threshold: '{target:g}'\n"
    )
