"""The chapter "Where the GPUs come from" as functions: a node pool from a cold start's phases, and tables of runs.

A fleet gets its node pool (:class:`~planner.simulate.supply.NodePoolSpec`)
from the phases of a cold start unless its FLEET.yaml already has one; every
closed-form number on the page then reads the phases back from that one fleet
(:func:`fleet_phases`), so the page and the simulator never disagree on them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.dynamics.cold_start import (
    CLUSTER_AUTOSCALER,
    NODE_AUTOSCALERS,
    ColdStartPhases,
    cluster_autoscaler_scale_up_s,
    karpenter_batch_close_s,
    time_to_ready_s,
)
from planner.errors import PlannerInputError, require_non_negative
from planner.simulate.fleet import FleetSpec
from planner.simulate.outcome import Outcome
from planner.simulate.supply import NodePoolSpec

__all__ = [
    "ReplicaColdStarts",
    "fleet_phases",
    "node_reaction_delay_s",
    "placeholder_usd_per_day",
    "replica_cold_starts",
    "scale_ups_while_loading",
    "supply_fleet",
    "supply_table",
    "supply_variants",
    "with_nodes",
    "with_scale_down_delay",
]

LONG_SCALE_DOWN_DELAY_S = 1800.0
"""The longer scale-down delay :func:`supply_variants` tries: 30 minutes. [s]"""


@dataclass(frozen=True)
class ReplicaColdStarts:
    """The next replica's time to ready, by where it lands.

    Attributes
    ----------
    new_node_s : float
        No free GPU: the node autoscaler's delay, a new node, the pull, the weights, the warmup. [s]
    free_gpu_s : float
        A free GPU on a node that has never run the image (a placeholder running a pause image). [s]
    cached_image_s : float
        A free GPU on a node that has the image (a placeholder running the serving image). [s]
    """

    new_node_s: float
    free_gpu_s: float
    cached_image_s: float


def supply_fleet(fleet: FleetSpec, phases: ColdStartPhases, *, node_autoscaler: str, gpus_per_node: int) -> FleetSpec:
    """``fleet`` with a node pool and pod phases from ``phases``, unless it has a node pool of its own.

    Parameters
    ----------
    fleet : FleetSpec
        From FLEET.yaml; its ``nodes:``, ``pod:`` and ``warmup_s``, when it has
        a ``nodes:`` section, are kept and ``phases`` is not used.
    phases : ColdStartPhases
    node_autoscaler : str
        ``cluster-autoscaler`` or ``karpenter``, with its default settings.
    gpus_per_node : int

    Raises
    ------
    PlannerInputError
        An unknown node autoscaler, or a pod that does not fit on a node; the
        message names the parameter or the fleet's file.
    """
    if fleet.nodes is not None:
        return fleet
    if node_autoscaler not in NODE_AUTOSCALERS:
        raise PlannerInputError(
            f"node_autoscaler: expected one of {', '.join(NODE_AUTOSCALERS)}, got {node_autoscaler!r}",
            parameter="node_autoscaler",
            expected=" or ".join(NODE_AUTOSCALERS),
            value=node_autoscaler,
        )
    if isinstance(gpus_per_node, bool) or not isinstance(gpus_per_node, int) or gpus_per_node < 1:
        raise PlannerInputError(f"gpus_per_node: expected a whole number >= 1, got {gpus_per_node!r}")
    nodes = NodePoolSpec(
        gpus_per_node=gpus_per_node,
        provision_s=phases.provision_s,
        node_init_s=phases.node_init_s,
        autoscaler=node_autoscaler,
    )
    try:
        return dataclasses.replace(
            fleet,
            nodes=nodes,
            image_pull_s=phases.image_pull_s,
            weights_load_s=phases.weights_load_s,
            warmup_s=phases.warmup_s,
        )
    except PlannerInputError as error:
        raise PlannerInputError(f"{fleet.source or 'fleet'}: {error}") from None


def _nodes(fleet: FleetSpec) -> NodePoolSpec:
    if fleet.nodes is None:
        raise PlannerInputError(f"{fleet.source or 'fleet'}: nodes: this fleet has no node pool")
    return fleet.nodes


def fleet_phases(fleet: FleetSpec) -> ColdStartPhases:
    """The cold-start phases a fleet with a node pool runs (its node pool's and its pods')."""
    nodes = _nodes(fleet)
    return ColdStartPhases(
        provision_s=nodes.provision_s,
        node_init_s=nodes.node_init_s,
        image_pull_s=fleet.image_pull_s,
        weights_load_s=fleet.weights_load_s,
        warmup_s=fleet.warmup_s,
    )


def node_reaction_delay_s(nodes: NodePoolSpec) -> float:
    """How long the node autoscaler waits before it asks for a node, for one pod pending at one of its scans.

    cluster-autoscaler: the GPU pod's 30 s buffer, to the next scan
    (:func:`~planner.dynamics.cold_start.cluster_autoscaler_scale_up_s`);
    Karpenter: its batch of one pod closing after the idle window
    (:func:`~planner.dynamics.cold_start.karpenter_batch_close_s`). A pod that
    becomes pending between two scans waits up to one scan interval more. [s]
    """
    if nodes.autoscaler == CLUSTER_AUTOSCALER:
        return cluster_autoscaler_scale_up_s(0.0, nodes.cluster_autoscaler)
    return karpenter_batch_close_s([0.0], nodes.karpenter)


def replica_cold_starts(fleet: FleetSpec) -> ReplicaColdStarts:
    """The next replica's time to ready on a new node, on a free GPU without the image, and with it."""
    phases = fleet_phases(fleet)
    delay_s = node_reaction_delay_s(_nodes(fleet))
    return ReplicaColdStarts(
        new_node_s=time_to_ready_s(phases, needs_node=True, image_cached=False, reaction_delay_s=delay_s),
        free_gpu_s=time_to_ready_s(phases, needs_node=False, image_cached=False),
        cached_image_s=time_to_ready_s(phases, needs_node=False, image_cached=True),
    )


def placeholder_usd_per_day(fleet: FleetSpec, placeholders: int) -> float:
    """What ``placeholders`` placeholder pods cost per day in the GPUs they hold. [$]

    Each holds ``gpus_per_replica`` GPUs, priced at the node's price per GPU;
    on nodes shared with other pods that is their share of the node, on nodes
    of their own the whole node.
    """
    if isinstance(placeholders, bool) or not isinstance(placeholders, int) or placeholders < 0:
        raise PlannerInputError(f"placeholders: expected a whole number >= 0, got {placeholders!r}")
    nodes = _nodes(fleet)
    usd_per_gpu_hour = nodes.node_price_usd_per_hour(fleet.usd_per_gpu_hour) / nodes.gpus_per_node
    return placeholders * fleet.gpus_per_replica * usd_per_gpu_hour * 24.0


def with_scale_down_delay(fleet: FleetSpec, delay_s: float) -> FleetSpec:
    """``fleet`` whose node autoscaler removes an empty node after ``delay_s``.

    cluster-autoscaler: ``--scale-down-unneeded-time`` and
    ``--scale-down-delay-after-add`` both set to ``delay_s`` (600 s each by
    default); Karpenter: the NodePool's ``consolidateAfter``.
    """
    delay_s = require_non_negative("delay_s", delay_s)
    nodes = _nodes(fleet)
    if nodes.autoscaler == CLUSTER_AUTOSCALER:
        settings = dataclasses.replace(
            nodes.cluster_autoscaler, scale_down_unneeded_s=delay_s, scale_down_delay_after_add_s=delay_s
        )
        nodes = dataclasses.replace(nodes, cluster_autoscaler=settings)
    else:
        nodes = dataclasses.replace(nodes, karpenter=dataclasses.replace(nodes.karpenter, consolidate_after_s=delay_s))
    return dataclasses.replace(fleet, nodes=nodes)


def with_nodes(fleet: FleetSpec, **changes) -> FleetSpec:
    """``fleet`` with fields of its node pool replaced by name (``max_nodes=4``, ``capacity_failure_frac=0.5``).

    Raises
    ------
    PlannerInputError
        For a fleet without a node pool, an unknown field or a bad value, naming it.
    """
    nodes = _nodes(fleet)
    known = {f.name for f in dataclasses.fields(NodePoolSpec)}
    unknown = sorted(set(changes) - known)
    if unknown:
        raise PlannerInputError(f"nodes.{unknown[0]}: not a node pool field (known: {', '.join(sorted(known))})")
    try:
        return dataclasses.replace(fleet, nodes=dataclasses.replace(nodes, **changes))
    except PlannerInputError as error:
        raise PlannerInputError(f"{fleet.source or 'fleet'}: {error}") from None


def supply_variants(
    fleet: FleetSpec,
    *,
    placeholders: int,
    quota_nodes: int,
    capacity_failure_frac: float,
    capacity_retry_s: float,
) -> dict[str, FleetSpec]:
    """The fleets the chapter replays, by label: its node pool as set, then one change at a time.

    In this order: ``no placeholder``, the fleet as set with no placeholder;
    ``placeholders`` placeholders; empty nodes removed at once; empty nodes
    kept :data:`LONG_SCALE_DOWN_DELAY_S`; a quota of ``quota_nodes`` nodes; node
    requests that fail with probability ``capacity_failure_frac`` and back off
    ``capacity_retry_s``.

    Raises
    ------
    PlannerInputError
        ``placeholders`` or ``quota_nodes`` below 1 or ``capacity_failure_frac``
        outside (0, 1), each a comparison with nothing to compare; a bad
        retry time. The message names the parameter.
    """
    if isinstance(placeholders, bool) or not isinstance(placeholders, int) or placeholders < 1:
        raise PlannerInputError(
            f"placeholders: expected a whole number >= 1 to compare with none, got {placeholders!r}",
            parameter="placeholders",
            expected="a whole number >= 1",
            value=placeholders,
        )
    if isinstance(quota_nodes, bool) or not isinstance(quota_nodes, int) or quota_nodes < 1:
        raise PlannerInputError(f"quota_nodes: expected a whole number >= 1, got {quota_nodes!r}")
    if not 0.0 < capacity_failure_frac < 1.0:
        raise PlannerInputError(
            f"capacity_failure_frac: expected a fraction above 0 and below 1, got {capacity_failure_frac!r}"
        )
    require_non_negative("capacity_retry_s", capacity_retry_s)
    base = dataclasses.replace(fleet, placeholders=0)
    _nodes(base)
    variants = {
        "no placeholder": base,
        f"{placeholders} placeholder{'s' if placeholders > 1 else ''}": dataclasses.replace(
            base, placeholders=placeholders
        ),
        "empty nodes removed at once": with_scale_down_delay(base, 0.0),
        f"empty nodes kept {LONG_SCALE_DOWN_DELAY_S / 60:g} min": with_scale_down_delay(base, LONG_SCALE_DOWN_DELAY_S),
    }
    variants[f"quota of {quota_nodes} node{'s' if quota_nodes > 1 else ''}"] = with_nodes(base, max_nodes=quota_nodes)
    failing = with_nodes(base, capacity_failure_frac=capacity_failure_frac, capacity_retry_s=capacity_retry_s)
    variants[f"{capacity_failure_frac:.0%} of node requests fail"] = failing
    return variants


def scale_ups_while_loading(outcome: Outcome, load_s: float) -> tuple[tuple[float, int, int], ...]:
    """The scale-ups from the run's first one until ``load_s`` after it: those decided while its pods load.

    Returns
    -------
    tuple of (float, int, int)
        ``(time_s, replicas before, replicas after)`` for each. [s]
    """
    load_s = require_non_negative("load_s", load_s)
    ups = [event for event in outcome.events if event[2] > event[1]]
    if not ups:
        return ()
    first_s = ups[0][0]
    return tuple((float(t), int(before), int(after)) for t, before, after in ups if t < first_s + load_s)


def supply_table(runs: Mapping[str, Outcome], gpus_per_node: int) -> pd.DataFrame:
    """One row per run on a node pool: how fast its pods got GPUs, what it served, what the nodes cost.

    Parameters
    ----------
    runs : mapping of str to Outcome
        Runs of fleets with a node pool of ``gpus_per_node`` GPUs per node.
    gpus_per_node : int

    Returns
    -------
    pandas.DataFrame
        Indexed by ``configuration``; columns ``next_replica_s`` (the first pod
        created in the run, creation to Ready) [s], ``ready_p50_s`` and
        ``ready_max_s`` over the pods created [s], ``pending_pod_s`` [s],
        ``slo_attainment_frac`` [fraction], ``peak_replicas`` (requested) and
        ``peak_ready_replicas``, ``peak_nodes``, ``node_hours`` [node-h],
        ``idle_gpu_hours`` (GPU time billed that no Deployment pod held: nodes
        starting or empty, placeholders, free GPUs) [GPU-h] and ``cost_usd`` [$].

    Raises
    ------
    PlannerInputError
        For a run without a node pool.
    """
    rows = []
    for label, run in runs.items():
        if run.supply is None:
            raise PlannerInputError(f"{label}: the run has no node pool (FLEET.yaml nodes:)")
        ready = run.supply.time_to_ready_s
        rows.append(
            {
                "configuration": label,
                "next_replica_s": float(ready[0]) if ready.size else np.nan,
                "ready_p50_s": float(np.percentile(ready, 50)) if ready.size else np.nan,
                "ready_max_s": float(ready.max()) if ready.size else np.nan,
                "pending_pod_s": run.supply.pending_pod_s,
                "slo_attainment_frac": run.slo_attainment_frac,
                "peak_replicas": run.peak_replicas,
                "peak_ready_replicas": int(run.timeseries["replicas_ready"].max()),
                "peak_nodes": run.supply.peak_nodes,
                "node_hours": run.supply.node_hours,
                "idle_gpu_hours": max(run.supply.node_hours * gpus_per_node - run.gpu_hours, 0.0),
                "cost_usd": run.cost_usd,
            }
        )
    return pd.DataFrame(rows).set_index("configuration")
