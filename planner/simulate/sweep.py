"""The ``sweep`` module searches autoscaler settings: a grid of configurations, each replayed, then the trade-off.

GRID.yaml maps each key below to a list of values (a single value is a list
of one); the sweep runs every combination (the Cartesian product, in key
order as listed here, last key fastest) through the ``fast`` engine and
returns the cost-attainment Pareto front and the cheapest configuration that
meets an attainment goal.

=========================  ==============================================================
key                        what it replaces (the manifest's value when the key is absent)
=========================  ==============================================================
``signal``                 the first trigger's ``query`` (ScaledObject) or the first
                           metric's name (HPA), e.g. ``sum(vllm:num_requests_waiting)``
``target``                 that trigger's ``threshold`` or that metric's target value
                           (same target type as the manifest's)
``min_replicas``           ``minReplicaCount`` / ``minReplicas``
``max_replicas``           ``maxReplicaCount`` / ``maxReplicas``
``polling_interval_s``     ``pollingInterval`` (ScaledObject only) [s]
``scale_up_window_s``      ``behavior.scaleUp.stabilizationWindowSeconds`` [s]
``scale_down_window_s``    ``behavior.scaleDown.stabilizationWindowSeconds`` [s]
``scale_up_policy``        ``behavior.scaleUp.policies``, written ``Pods:4:60`` (type,
                           value, periodSeconds); several joined by ``,``
``scale_down_policy``      ``behavior.scaleDown.policies``, same form
``select_policy``          ``selectPolicy`` of both directions: ``Max``, ``Min`` or ``Disabled``
``warmup_s``               FLEET ``warmup_s``: pod request to Ready (with ``nodes:``, the
                           compile and graph capture after the weights load) [s]
``placeholders``           FLEET ``placeholders``: pause pods holding warm GPUs (needs ``nodes:``)
``image_pull_s``           FLEET ``pod.image_pull_s`` (needs ``nodes:``) [s]
``provision_s``            FLEET ``nodes.provision_s`` [s]
``scale_down_unneeded_s``  FLEET ``nodes.cluster_autoscaler.scale_down_unneeded_s`` [s]
``consolidate_after_s``    FLEET ``nodes.karpenter.consolidate_after_s`` [s]
=========================  ==============================================================

Any other key is a :class:`~planner.errors.PlannerInputError` naming it.
A sweep is pure: the trace, the manifest's autoscaler and the fleet come in
as objects; chunks of configurations are evaluated by :func:`run_chunk`,
locally or on a Dask cluster (:mod:`planner.cli.sweep` runs them).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import math
import os
import sys
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import as_completed as as_completed_locally
from dataclasses import dataclass

import numpy as np
from tqdm import tqdm

from planner.autoscaler.behavior import (
    HorizontalPodAutoscalerBehavior,
    HPAScalingPolicy,
    HPAScalingRules,
)
from planner.autoscaler.hpa_spec import AVERAGE_VALUE, UTILIZATION, VALUE
from planner.autoscaler.keda import hpa_for_scaled_object
from planner.autoscaler.spec import Autoscaler
from planner.errors import PlannerInputError
from planner.simulate.control import Control
from planner.simulate.fast import Configuration, simulate_many
from planner.simulate.fleet import FleetSpec
from planner.simulate.oracle import regret_usd
from planner.simulate.traffic import RequestTrace

__all__ = [
    "FLEET_KEYS",
    "GRID_KEYS",
    "SweepPoint",
    "SweepResult",
    "apply_point",
    "cheapest_meeting",
    "chunk_points",
    "closest_to_goal",
    "expand_grid",
    "pareto_front",
    "run_chunk",
    "run_sweep",
    "summarize",
    "with_regret",
]

# Without a chunk size, the points are cut into this many chunks per worker thread (see chunk_points).
CHUNKS_PER_THREAD = 2
# Grid keys of the node pool: they need a fleet with ``nodes:`` (see planner.simulate.supply).
SUPPLY_KEYS = ("placeholders", "image_pull_s", "provision_s", "scale_down_unneeded_s", "consolidate_after_s")
GRID_KEYS = (
    "signal",
    "target",
    "min_replicas",
    "max_replicas",
    "polling_interval_s",
    "scale_up_window_s",
    "scale_down_window_s",
    "scale_up_policy",
    "scale_down_policy",
    "select_policy",
    "warmup_s",
    *SUPPLY_KEYS,
)
# Grid keys that change the simulated fleet (the warmup, the initial pods a minimum sets, the node
# pool): points that differ in them cannot share one, so chunk_points keeps them apart.
FLEET_KEYS = ("warmup_s", "min_replicas", *SUPPLY_KEYS)
RESULT_FIELDS = (
    "slo_attainment_frac",
    "cost_usd",
    "gpu_hours",
    "scale_events",
    "flap_cycles",
    "peak_replicas",
    "peak_waiting",
    "cut_generations",
)
SUPPLY_RESULT_FIELDS = ("node_hours", "time_to_ready_p95_s")
"""Figures a configuration has only with a node pool (``None`` without one)."""


@dataclass(frozen=True)
class SweepPoint:
    """One configuration of a sweep: its position in the grid and the values it sets."""

    index: int
    values: tuple[tuple[str, object], ...]

    def as_dict(self) -> dict:
        return dict(self.values)


@dataclass(frozen=True)
class SweepResult:
    """What one configuration achieved (units in the names).

    ``regret_usd``, when set (:func:`with_regret`), is its cost less the oracle's at its own attainment
    (:mod:`planner.simulate.oracle`).
    """

    index: int
    values: tuple[tuple[str, object], ...]
    slo_attainment_frac: float
    cost_usd: float
    gpu_hours: float
    scale_events: int
    flap_cycles: int
    peak_replicas: int
    peak_waiting: int
    cut_generations: int
    node_hours: float | None = None
    time_to_ready_p95_s: float | None = None
    regret_usd: float | None = None

    def as_dict(self) -> dict:
        supply = {name: getattr(self, name) for name in SUPPLY_RESULT_FIELDS if getattr(self, name) is not None}
        regret = {} if self.regret_usd is None else {"regret_usd": self.regret_usd}
        return {
            "index": self.index,
            **dict(self.values),
            **{name: getattr(self, name) for name in RESULT_FIELDS},
            **supply,
            **regret,
        }

    @classmethod
    def of(cls, index: int, values: tuple[tuple[str, object], ...], outcome) -> SweepResult:
        """A configuration's figures from its Outcome (the supply ones with a node pool)."""
        supply = outcome.supply
        p95_s = None
        if supply is not None and supply.time_to_ready_s.size:
            p95_s = float(np.percentile(supply.time_to_ready_s, 95))
        return cls(
            index=index,
            values=values,
            **{name: getattr(outcome, name) for name in RESULT_FIELDS},
            node_hours=None if supply is None else supply.node_hours,
            time_to_ready_p95_s=p95_s,
        )


def expand_grid(grid: Mapping, source: str = "grid") -> list[SweepPoint]:
    """Every combination of the grid's values, checked key by key.

    Parameters
    ----------
    grid : mapping
        GRID.yaml: key -> list of values (or one value).
    source : str
        Named in errors (the file).

    Raises
    ------
    PlannerInputError
        An unknown key, an empty list, or a value of the wrong kind, naming the key.
    """
    if not isinstance(grid, Mapping) or not grid:
        raise PlannerInputError(
            f"{source}: expected a mapping of grid keys to lists of values (keys: {', '.join(GRID_KEYS)})"
        )
    for key in grid:
        if key not in GRID_KEYS:
            raise PlannerInputError(f"{source}: unknown grid key {key!r} (known: {', '.join(GRID_KEYS)})")
    keys = [key for key in GRID_KEYS if key in grid]
    columns = []
    for key in keys:
        values = grid[key] if isinstance(grid[key], list) else [grid[key]]
        if not values:
            raise PlannerInputError(f"{source}: {key}: expected at least one value")
        columns.append([_checked(source, key, value) for value in values])
    return [SweepPoint(i, tuple(zip(keys, combo, strict=True))) for i, combo in enumerate(itertools.product(*columns))]


def _checked(source: str, key: str, value):
    where = f"{source}: {key}"
    if key == "signal":
        if not isinstance(value, str) or not value.strip():
            raise PlannerInputError(f"{where}: expected a query or metric name, got {value!r}")
        return value
    if key in ("scale_up_policy", "scale_down_policy"):
        _policies(where, value)
        return value
    if key == "select_policy":
        if value not in ("Max", "Min", "Disabled"):
            raise PlannerInputError(f"{where}: expected Max, Min or Disabled, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise PlannerInputError(f"{where}: expected a number, got {value!r}")
    if key in ("target", "polling_interval_s") and not value > 0:
        raise PlannerInputError(f"{where}: expected a number > 0, got {value!r}")
    if key in ("warmup_s", *SUPPLY_KEYS) and value < 0:
        raise PlannerInputError(f"{where}: expected a number >= 0, got {value!r}")
    if key in ("min_replicas", "max_replicas", "scale_up_window_s", "scale_down_window_s", "placeholders"):
        if value != int(value) or value < 0:
            raise PlannerInputError(f"{where}: expected a whole number >= 0, got {value!r}")
        if key.endswith("window_s") and value > 3600:
            raise PlannerInputError(f"{where}: expected at most 3600 (the API's limit), got {value!r}")
        return int(value)
    return float(value)


def _policies(where: str, text) -> tuple[HPAScalingPolicy, ...]:
    # "Pods:4:60,Percent:100:15" -> the behavior's policy list.
    if not isinstance(text, str) or not text.strip():
        raise PlannerInputError(f"{where}: expected policies like 'Pods:4:60,Percent:100:15', got {text!r}")
    policies = []
    for part in text.split(","):
        pieces = [p.strip() for p in part.split(":")]
        if (
            len(pieces) != 3
            or pieces[0] not in ("Pods", "Percent")
            or not pieces[1].isdigit()
            or not pieces[2].isdigit()
            or int(pieces[1]) < 1
            or not 1 <= int(pieces[2]) <= 1800
        ):
            raise PlannerInputError(
                f"{where}: {part.strip()!r} is not TYPE:VALUE:PERIOD with TYPE Pods or "
                f"Percent, VALUE >= 1 and PERIOD 1-1800 s"
            )
        policies.append(HPAScalingPolicy(pieces[0], int(pieces[1]), int(pieces[2])))
    return tuple(policies)


def apply_point(autoscaler: Autoscaler, fleet: FleetSpec, point: SweepPoint) -> Configuration:
    """The manifest's autoscaler and the fleet with the point's values put in.

    Raises
    ------
    PlannerInputError
        The combination is not a valid autoscaler (e.g. min above max), or the
        simulator cannot read its signal; the message names the grid point.
    """
    values = point.as_dict()
    try:
        if "warmup_s" in values:
            fleet = dataclasses.replace(fleet, warmup_s=values["warmup_s"])
        fleet = with_supply(fleet, values)
        behavior = _behavior(
            autoscaler.scaled_object.behavior if autoscaler.scaled_object is not None else autoscaler.hpa.behavior,
            values,
        )
        if autoscaler.scaled_object is not None:
            autoscaler = _scaled_object(autoscaler, values, behavior)
        else:
            autoscaler = _hpa(autoscaler, values, behavior)
        Control(autoscaler, fleet.signal_map, fleet.hpa_sync_period_s, fleet.start_epoch_s)
    except PlannerInputError as error:
        raise PlannerInputError(f"grid point {point.index} ({_shown(values)}): {error}") from None
    return Configuration(autoscaler, fleet)


def with_supply(fleet: FleetSpec, values: Mapping) -> FleetSpec:
    """The fleet with a grid point's node-pool and pod values (:data:`SUPPLY_KEYS`) applied."""
    given = [key for key in SUPPLY_KEYS if key in values]
    if not given:
        return fleet
    if fleet.nodes is None:
        raise PlannerInputError(f"{given[0]}: needs a fleet with a nodes: section")
    nodes = fleet.nodes
    if "provision_s" in values:
        nodes = dataclasses.replace(nodes, provision_s=values["provision_s"])
    if "scale_down_unneeded_s" in values:
        nodes = dataclasses.replace(
            nodes,
            cluster_autoscaler=dataclasses.replace(
                nodes.cluster_autoscaler, scale_down_unneeded_s=values["scale_down_unneeded_s"]
            ),
        )
    if "consolidate_after_s" in values:
        nodes = dataclasses.replace(
            nodes, karpenter=dataclasses.replace(nodes.karpenter, consolidate_after_s=values["consolidate_after_s"])
        )
    changes = {key: values[key] for key in ("placeholders", "image_pull_s") if key in values}
    return dataclasses.replace(fleet, nodes=nodes, **changes)


def _behavior(behavior, values: dict):
    keys = ("scale_up_window_s", "scale_down_window_s", "scale_up_policy", "scale_down_policy", "select_policy")
    if not any(key in values for key in keys):
        return behavior
    behavior = behavior or HorizontalPodAutoscalerBehavior()
    rules = {}
    for direction in ("up", "down"):
        current = getattr(behavior, f"scale_{direction}") or HPAScalingRules()
        changes = {}
        if f"scale_{direction}_window_s" in values:
            changes["stabilization_window_seconds"] = values[f"scale_{direction}_window_s"]
        if f"scale_{direction}_policy" in values:
            changes["policies"] = _policies(f"scale_{direction}_policy", values[f"scale_{direction}_policy"])
        if "select_policy" in values:
            changes["select_policy"] = values["select_policy"]
        rules[f"scale_{direction}"] = (
            dataclasses.replace(current, **changes) if changes else getattr(behavior, f"scale_{direction}")
        )
    return HorizontalPodAutoscalerBehavior(**rules)


def _scaled_object(autoscaler: Autoscaler, values: dict, behavior) -> Autoscaler:
    so = autoscaler.scaled_object
    assert so is not None  # only ScaledObjects are routed here
    triggers = list(so.triggers)
    if "signal" in values or "target" in values:
        first = triggers[0]
        if first.type == "cron":
            raise PlannerInputError(
                "signal and target replace the first trigger's query and threshold, and the first trigger is a "
                "cron trigger (its target is fixed at 1); list the metric trigger first"
            )
        triggers[0] = dataclasses.replace(
            first, query=values.get("signal", first.query), threshold=values.get("target", first.threshold)
        )
    changes = {"triggers": tuple(triggers), "behavior": behavior}
    if "min_replicas" in values:
        changes["min_replica_count"] = values["min_replicas"]
    if "max_replicas" in values:
        changes["max_replica_count"] = values["max_replicas"]
    if "polling_interval_s" in values:
        changes["polling_interval_s"] = values["polling_interval_s"]
    so = dataclasses.replace(so, **changes)
    return dataclasses.replace(autoscaler, scaled_object=so, hpa=hpa_for_scaled_object(so))


def _hpa(autoscaler: Autoscaler, values: dict, behavior) -> Autoscaler:
    if "polling_interval_s" in values:
        raise PlannerInputError("polling_interval_s applies to a ScaledObject, and the manifest holds an HPA")
    spec = autoscaler.hpa
    metrics = list(spec.metrics)
    if "signal" in values or "target" in values:
        metric = metrics[0]
        target = metric.target
        if "target" in values:
            t = values["target"]
            if target.type == AVERAGE_VALUE:
                target = dataclasses.replace(target, average_value_milli=round(t * 1000))
            elif target.type == VALUE:
                target = dataclasses.replace(target, value_milli=round(t * 1000))
            elif target.type == UTILIZATION:
                target = dataclasses.replace(target, average_utilization_pct=round(t))
        metrics[0] = dataclasses.replace(metric, name=values.get("signal", metric.name), target=target)
    changes = {"metrics": tuple(metrics), "behavior": behavior}
    if "min_replicas" in values:
        changes["min_replicas"] = values["min_replicas"]
    if "max_replicas" in values:
        changes["max_replicas"] = values["max_replicas"]
    spec = dataclasses.replace(spec, **changes)
    minimum = spec.min_replicas if spec.min_replicas is not None else 1
    if minimum > spec.max_replicas or spec.max_replicas < 1:
        raise PlannerInputError(
            f"minReplicas {minimum} must be <= maxReplicas {spec.max_replicas}, and maxReplicas >= 1"
        )
    return dataclasses.replace(autoscaler, hpa=spec)


def _shown(values: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in values.items())


def chunk_points(
    points: Sequence[SweepPoint], chunk_size: int | None = None, n_chunks: int | None = None
) -> list[tuple[SweepPoint, ...]]:
    """Chunks of points that keep configurations able to share a fleet together.

    The fast engine simulates configurations with the same fleet once for as
    long as their controllers agree (:func:`planner.simulate.fast.simulate_many`),
    so a chunk holds points with the same :data:`FLEET_KEYS` values, in grid
    order: consecutive runs of ``chunk_size`` points, or, without it, each
    such set cut into parts (about ``n_chunks`` in all, at least one per set)
    so that that many workers can run side by side.
    Chunk ``i`` is identified by its position.
    """
    if chunk_size is not None and chunk_size < 1:
        raise PlannerInputError(f"chunk_size: expected an integer >= 1, got {chunk_size!r}")
    if n_chunks is not None and n_chunks < 1:
        raise PlannerInputError(f"n_chunks: expected an integer >= 1, got {n_chunks!r}")
    sets: dict[tuple, list[SweepPoint]] = {}
    for point in points:
        values = point.as_dict()
        sets.setdefault(tuple(values.get(key) for key in FLEET_KEYS), []).append(point)
    chunks: list[tuple[SweepPoint, ...]] = []
    for members in sets.values():
        if chunk_size is not None:
            size = chunk_size
        else:
            parts = max(1, round((n_chunks or 1) * len(members) / len(points)))
            size = math.ceil(len(members) / parts)
        chunks.extend(tuple(members[i : i + size]) for i in range(0, len(members), size))
    return chunks


def run_chunk(
    trace: RequestTrace,
    autoscaler: Autoscaler,
    fleet: FleetSpec,
    points: Sequence[SweepPoint],
    duration_s: float | None = None,
    on_done: Callable[[int], None] | None = None,
) -> list[SweepResult]:
    """Simulate one chunk of grid points together (the unit of work sent to a Dask worker).

    Pure and deterministic: the same inputs give the same results bit for bit,
    wherever it runs. ``on_done``, if given, is called with the number of
    configurations each time some finish (a chunk of configurations sharing a
    fleet finishes them a few at a time).
    """
    configs = [apply_point(autoscaler, fleet, point) for point in points]
    reported = 0

    def progress(done_ticks: int, total_ticks: int) -> None:
        nonlocal reported
        finished = len(configs) * done_ticks // max(total_ticks, 1)
        if on_done is not None and finished > reported:
            on_done(finished - reported)
            reported = finished

    outcomes = simulate_many(
        trace, configs, duration_s=duration_s, timeseries=False, per_request=False, on_tick=progress
    )
    return [SweepResult.of(point.index, point.values, outcome) for point, outcome in zip(points, outcomes, strict=True)]


def pareto_front(results: Sequence[SweepResult]) -> list[SweepResult]:
    """The configurations no other one beats on both cost and attainment, cheapest first.

    A result is dominated when another costs no more and attains at least as
    much, and is strictly better in one of the two. Ties keep the lower index.
    """
    ordered = sorted(results, key=lambda r: (r.cost_usd, -_attained(r), r.index))
    front: list[SweepResult] = []
    best = -math.inf
    for result in ordered:
        if _attained(result) > best:
            front.append(result)
            best = _attained(result)
    return front


def cheapest_meeting(
    results: Sequence[SweepResult], attainment_goal_frac: float, max_flap_cycles: int | None = None
) -> SweepResult | None:
    """The cheapest configuration with attainment at least the goal (lower index on ties), or ``None``.

    With ``max_flap_cycles``, only configurations that flap at most that many
    times over the trace count: a setting that meets the goal by adding and
    removing pods all day is fragile (each cycle is a cold start the next
    burst may not wait for), so it is not offered as the cheapest.
    """
    if not 0.0 <= attainment_goal_frac <= 1.0:
        raise PlannerInputError(f"attainment goal: expected a fraction between 0 and 1, got {attainment_goal_frac!r}")
    if max_flap_cycles is not None and not (isinstance(max_flap_cycles, int) and max_flap_cycles >= 0):
        raise PlannerInputError(f"max flap cycles: expected an integer >= 0, got {max_flap_cycles!r}")
    meeting = [
        r
        for r in results
        if _attained(r) >= attainment_goal_frac and (max_flap_cycles is None or r.flap_cycles <= max_flap_cycles)
    ]
    return min(meeting, key=lambda r: (r.cost_usd, r.index)) if meeting else None


def closest_to_goal(results: Sequence[SweepResult], attainment_goal_frac: float) -> SweepResult:
    """What to offer when no configuration passes :func:`cheapest_meeting`.

    Among those meeting the goal, the one that flaps least (then the
    cheapest); when none meets it, the one with the highest attainment (then
    the cheapest). Lower index on ties.
    """
    if not results:
        raise PlannerInputError("sweep: no configurations to choose from")
    meeting = [r for r in results if _attained(r) >= attainment_goal_frac]
    if meeting:
        return min(meeting, key=lambda r: (r.flap_cycles, r.cost_usd, r.index))
    return min(results, key=lambda r: (-_attained(r), r.cost_usd, r.index))


def _attained(result: SweepResult) -> float:
    return -math.inf if math.isnan(result.slo_attainment_frac) else result.slo_attainment_frac


def summarize(
    results: Sequence[SweepResult],
    attainment_goal_frac: float,
    max_flap_cycles: int | None = None,
    oracle_cost_usd: float | None = None,
) -> dict:
    """JSON-ready: every result, the Pareto front and the cheapest meeting the goal (and the flap limit).

    With ``oracle_cost_usd`` (from :func:`with_regret`), also the oracle's cost at the goal. [$]
    """
    ordered = sorted(results, key=lambda r: r.index)
    best = cheapest_meeting(ordered, attainment_goal_frac, max_flap_cycles)
    return {
        "configurations": len(ordered),
        "attainment_goal_frac": attainment_goal_frac,
        "max_flap_cycles": max_flap_cycles,
        **({} if oracle_cost_usd is None else {"oracle_cost_usd": oracle_cost_usd}),
        "cheapest_meeting_goal": None if best is None else best.as_dict(),
        "pareto_front": [r.as_dict() for r in pareto_front(ordered)],
        "results": [r.as_dict() for r in ordered],
    }


def with_regret(
    trace: RequestTrace,
    autoscaler: Autoscaler,
    fleet: FleetSpec,
    points: Sequence[SweepPoint],
    results: Sequence[SweepResult],
    attainment_goal_frac: float,
    *,
    duration_s: float | None = None,
) -> tuple[float, list[SweepResult]]:
    """The oracle's cost at the goal, and the results with their regret (:func:`planner.simulate.oracle.regret_usd`).

    Each configuration is held against the oracle of its own fleet (a grid may change the cold start), so
    the oracle's cost at the goal is the least over the grid's fleets. [$]
    """
    by_index = {point.index: point for point in points}
    fleets = [apply_point(autoscaler, fleet, by_index[r.index]).fleet for r in results]
    costs = [r.cost_usd for r in results]
    attained = [r.slo_attainment_frac for r in results]
    oracle_usd, regret = regret_usd(trace, fleets, costs, attained, attainment_goal_frac, duration_s=duration_s)
    with_regrets = [
        dataclasses.replace(r, regret_usd=None if math.isnan(x) else float(x))
        for r, x in zip(results, regret, strict=True)
    ]
    return oracle_usd, with_regrets


def _same(value):
    # A task that returns its argument: the trace lives in the graph, so a lost copy is recomputed.
    return value


def run_sweep(
    trace: RequestTrace,
    autoscaler: Autoscaler,
    fleet: FleetSpec,
    points: Sequence[SweepPoint],
    *,
    duration_s: float | None = None,
    client=None,
    chunk_size: int | None = None,
    progress: bool = True,
    on_chunk: Callable[[int], None] | None = None,
    workers: int | None = None,
) -> list[SweepResult]:
    """Simulate every grid point, locally or on a Dask cluster, and return the results in grid order.

    Parameters
    ----------
    trace, autoscaler, fleet
        The trace, the manifest's autoscaler and the fleet the grid varies.
    points : sequence of SweepPoint
        From :func:`planner.simulate.sweep.expand_grid`.
    duration_s : float, optional
        Simulated time. [s]
    client : distributed.Client, optional
        Run the chunks on this cluster; ``None`` runs them here, on ``workers`` threads.
    chunk_size : int, optional
        Configurations simulated together in one task; default: as many chunks
        as :data:`CHUNKS_PER_THREAD` per worker thread (the cluster's, or
        ``workers``), each of points that can share a fleet
        (:func:`planner.simulate.sweep.chunk_points`).
    progress : bool
        Show a tqdm progress bar on stderr.
    on_chunk : callable, optional
        Called with the chunk number each time a chunk's results arrive.
    workers : int, optional
        Threads for a local sweep; default one per core.

    Returns
    -------
    list of SweepResult
        One per point, ordered by index; each chunk counted exactly once.
    """
    for point in points:
        apply_point(autoscaler, fleet, point)  # every combination checked before any work starts
    threads = workers or os.cpu_count() or 1
    if client is not None:
        threads = sum(client.nthreads().values()) or 1
    chunks = chunk_points(points, chunk_size, n_chunks=CHUNKS_PER_THREAD * threads)
    results: dict[int, list[SweepResult]] = {}
    with tqdm(total=len(points), unit="config", disable=not progress, file=sys.stderr, desc="sweep") as bar:
        if client is None:
            # The compiled kernels release the GIL, so chunks run side by side on this machine's cores.
            # A chunk reports its configurations as they finish; the bar counts each once.
            lock = threading.Lock()
            shown = [0] * len(chunks)

            def advance(number: int, configurations: int) -> None:
                with lock:
                    configurations = min(configurations, len(chunks[number]) - shown[number])
                    shown[number] += configurations
                    bar.update(configurations)

            with ThreadPoolExecutor(max_workers=max(1, min(threads, len(chunks)))) as pool:
                futures = {
                    pool.submit(
                        run_chunk, trace, autoscaler, fleet, chunk, duration_s, functools.partial(advance, number)
                    ): number
                    for number, chunk in enumerate(chunks)
                }
                for future in as_completed_locally(futures):
                    number = futures[future]
                    results[number] = future.result()
                    advance(number, len(chunks[number]))
                    if on_chunk is not None:
                        on_chunk(number)
        else:
            from distributed import as_completed

            prefix = f"planner-sweep-{uuid.uuid4().hex[:12]}"
            shared_trace = client.submit(_same, trace, key=f"{prefix}-trace")
            futures = {
                client.submit(
                    run_chunk, shared_trace, autoscaler, fleet, chunk, duration_s, key=f"{prefix}-chunk-{number}"
                ): number
                for number, chunk in enumerate(chunks)
            }
            for future in as_completed(futures):
                number = futures[future]
                if number not in results:
                    results[number] = future.result()
                    bar.update(len(chunks[number]))
                    if on_chunk is not None:
                        on_chunk(number)
                future.release()
            shared_trace.release()
    flat = sorted((result for number in sorted(results) for result in results[number]), key=lambda r: r.index)
    indices = [result.index for result in flat]
    if indices != sorted(point.index for point in points):
        raise RuntimeError(f"sweep lost or repeated configurations: expected {len(points)}, got {len(flat)}")
    return flat
