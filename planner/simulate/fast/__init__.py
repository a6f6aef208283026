"""The ``fast`` engine: the reference engine's model, compiled, for one configuration or a sweep.

It computes exactly what :mod:`planner.simulate.reference` computes (the
differential test in ``tests/simulate/fast/test_simulate_fast.py`` holds it to that:
identical scale events, replica trajectories, time series and per-request
latencies). A configuration runs in the compiled kernels
(:mod:`planner.simulate.fast.engine` and the modules it calls) when they cover
its autoscaler, with or without a node pool (``FleetSpec.nodes``, modelled in
:mod:`planner.simulate.fast.supply`); any other runs through :mod:`planner.simulate.fast.lockstep`,
the reference's own code with its pod sets indexed and its replicas served by the
compiled replica kernel, so the contract holds for every manifest the simulator accepts.
``Outcome.engine`` is ``"fast"`` either way; :func:`covers` says which path a configuration takes.

Configurations that differ only in their autoscaler are simulated as one
group (:mod:`planner.simulate.fast.compiled`): the fleet once, for as long as
their controllers write the same replica counts, then split where they part.
A sweep over thresholds and windows thus simulates far fewer fleet-days than
it has configurations, with each configuration's result what it gets alone.

**Where each function's twin is.** Every compiled function computes what a
Python function of the reference engine or of the HPA/KEDA port computes,
bit for bit, on arrays instead of objects, and a differential test holds it
to that (``tests/simulate/fast/test_simulate_fast_twins.py`` runs the step kernels beside
the reference's steps, tick by tick). ``engine.room_step`` has no twin: the
kernels' arrays are allocated ahead, and it checks that a tick fits them;
``_numeric.pairwise_sum`` is numpy's own pairwise sum. A KEDA ``cron``
trigger reads the clock, not the fleet, so its readings over the whole run
are computed before it (``compiled.cron_runs``, from
:func:`planner.autoscaler.cron_scaler.cron_reading_runs`); ``engine.cron_readings``
looks up the tick's, and ``decision.keda_poll`` and ``decision.keda_readings``
read it where a query's result would be. The ports of
Kubernetes' functions in ``decision`` (``get_metric_replicas``,
``stabilize_recommendation``, ``calculate_scale_up_limit_with_scaling_rules``,
``store_scale_event`` and the others) have the names of their twins in
``autoscaler.replica_calculator``, ``autoscaler.horizontal``,
``autoscaler.behavior`` and ``autoscaler.keda``.

=================================  ===================================================================
fast function                      its reference twin (in planner)
=================================  ===================================================================
``engine.run``                     ``simulate.reference.simulate``
``engine.control_step``            ``simulate.reference.control_step``
``engine.cron_readings``           ``autoscaler.keda.KedaController.cron_readings``
``engine.record_event``            ``simulate.reference.control_step``
``engine.fleet_step``              ``simulate.reference.fleet_step``
``engine.route_step``              ``simulate.reference.route_step``
``engine.serve_step``              ``simulate.reference.serve_step``
``engine.scrape_step``             ``simulate.reference.scrape_step``
``engine.record_step``             ``simulate.reference.record_step``
``engine.signal_step``             ``simulate.control.Control.signal``
``fleet.add_pod``                  ``simulate.fleet.Fleet.add_pod``
``fleet.scale_to``                 ``simulate.fleet.Fleet.scale_to``
``fleet.finish_terminations``      ``simulate.fleet.Fleet.finish_terminations``
``fleet.routable``                 ``simulate.fleet.Fleet.routable``
``fleet.route_arrivals``           ``simulate.fleet.Fleet.route_all``
``fleet.release_gateway``          ``simulate.fleet.Fleet.release_gateway``
``fleet.supply_step``              ``simulate.fleet.Fleet.supply_step``
``fleet.bind_pending``             ``simulate.supply.NodePool.bind_pending``
``fleet.supply_counts``            ``simulate.fleet.Fleet.supply_counts``
``supply.draw_duration_s``         ``simulate.supply.draw_duration_s``
``supply.add_node``                ``simulate.supply.NodePool.add_node``
``supply.free_node``               ``simulate.supply.NodePool._free_node``
``supply.preempt_placeholder``     ``simulate.supply.NodePool._preempt_placeholder``
``supply.bind_placeholders``       ``simulate.supply.NodePool._bind_placeholders``
``supply.add_placeholders``        ``simulate.supply.NodePool.add_placeholders``
``supply.waiting_for_nodes``       ``simulate.supply.NodePool._waiting_for_nodes``
``supply.upcoming_pods``           ``simulate.supply.NodePool._upcoming_pods``
``supply.buy``                     ``simulate.supply.NodePool._buy``
``supply.remove_empty``            ``simulate.supply.NodePool._remove_empty``
``supply.autoscale``               ``simulate.supply.NodePool.autoscale``
``supply.node_counts``             ``simulate.supply.NodePool.counts``
``compiled.fleet_pods``            ``simulate.fleet.Fleet``
``replica.advance_pod``            ``simulate.replica.advance_replica``
``replica.advance_replica``        ``simulate.replica.advance_replica``
``replica.ListReplica.advance``    ``simulate.replica.advance_replica``
``replica.kv_usage_frac``          ``simulate.replica.kv_usage_frac``
``metrics.compile_query``          ``simulate.metrics.parse_query``
``metrics.evaluate``               ``simulate.metrics.Query.evaluate``
``metrics.scalar``                 ``simulate.metrics.Query.scalar``
``metrics.last_index``             ``simulate.metrics.MetricStore._last_index``
``metrics.subquery_steps_ms``      ``simulate.promql_functions.subquery_steps_ms``
``metrics._fold_add``              ``simulate.metrics._apply_range`` (a subquery's points, one by one)
``metrics._fold_end``              ``simulate.metrics._apply_range``
``decision.decide``                ``simulate.control.Control.decide``
``decision.keda_poll``             ``autoscaler.keda.KedaController.poll``
``decision.keda_readings``         ``autoscaler.keda.KedaController.reconcile``
``decision.formula_milli``         ``autoscaler.keda._composite`` (``Formula.evaluate``)
``decision.reconcile_autoscaler``  ``autoscaler.horizontal.HorizontalController.reconcile_autoscaler``
``outcome.request_summary``        ``simulate.outcome.slo_met``
``compiled.cron_runs``             ``autoscaler.keda.KedaController.cron_readings``
``compiled.simulate_group``        ``simulate.reference.simulate``
``lockstep.simulate_many``         ``simulate.reference.simulate``
=================================  ===================================================================
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from planner.autoscaler.spec import Autoscaler
from planner.simulate.fast import lockstep
from planner.simulate.fast.allocator import free_large_arrays_to_the_system
from planner.simulate.fast.lockstep import Configuration
from planner.simulate.fleet import FleetSpec
from planner.simulate.outcome import Outcome
from planner.simulate.traffic import RequestTrace

if TYPE_CHECKING:
    from planner.simulate.fast.compiled import Prepared

__all__ = ["Configuration", "covers", "kernel_sources", "simulate", "simulate_many"]


def kernel_sources() -> list[Path]:
    """The files the compiled kernels are built from: this package, and the modules whose constants
    the kernels freeze in at compile time."""
    here = Path(__file__).parent
    autoscaler = here.parent.parent / "autoscaler"
    return [
        *sorted(here.glob("*.py")),
        here.parent / "replica.py",
        here.parent / "metrics.py",
        here.parent / "promql_functions.py",
        autoscaler / "behavior.py",
        autoscaler / "hpa_spec.py",
        autoscaler / "horizontal.py",
        autoscaler / "keda.py",
    ]


def _use_kernel_cache_keyed_on_sources() -> None:
    # numba checks a cached kernel against its own file only, so an edited kernel that another cached
    # kernel calls would run stale machine code. Unless the user chose a cache (NUMBA_CACHE_DIR), the
    # kernels cache into a folder named for a hash of their sources: any edit starts a fresh one.
    import numba

    config: Any = numba.config  # its settings are module attributes set from the environment, untyped
    if config.CACHE_DIR:
        return
    digest = hashlib.sha256()
    for source in kernel_sources():
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    folder = root / "planner" / "numba" / digest.hexdigest()[:16]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return  # numba's own default (beside the sources, or its user-wide folder)
    config.CACHE_DIR = str(folder)


_use_kernel_cache_keyed_on_sources()


def covers(autoscaler: Autoscaler, fleet_spec: FleetSpec | None = None) -> bool:
    """Whether the compiled kernels run this configuration (else the lockstep engine does)."""
    from planner.simulate.fast.compiled import NotCompilable, prepare

    try:
        prepare(autoscaler, fleet_spec or FleetSpec())
    except NotCompilable:
        return False
    return True


def simulate(
    trace: RequestTrace, autoscaler: Autoscaler, fleet_spec: FleetSpec | None = None, *, duration_s: float | None = None
) -> Outcome:
    """Replay ``trace`` through a fleet scaled by ``autoscaler`` (same contract as the reference engine).

    Parameters
    ----------
    trace : RequestTrace
    autoscaler : Autoscaler
    fleet_spec : FleetSpec, optional
    duration_s : float, optional
        Simulated time; default the last arrival plus :data:`planner.simulate.reference.DRAIN_TAIL_S`. [s]

    Returns
    -------
    Outcome
        With ``engine == "fast"``.
    """
    return simulate_many(trace, [Configuration(autoscaler, fleet_spec or FleetSpec())], duration_s=duration_s)[0]


def simulate_many(
    trace: RequestTrace,
    configurations: Sequence[Configuration],
    *,
    duration_s: float | None = None,
    on_tick: Callable[[int, int], None] | None = None,
    timeseries: bool = True,
    per_request: bool = True,
) -> list[Outcome]:
    """Replay ``trace`` once for each configuration.

    Parameters
    ----------
    trace : RequestTrace
    configurations : sequence of Configuration
        All must share ``tick_s``. Those that share a fleet (the same fleet
        parameters and initial replicas; the autoscalers may differ) are
        simulated together: the fleet once for as long as their controllers
        agree (:mod:`planner.simulate.fast.compiled`).
    duration_s : float, optional
        Simulated time for every configuration. [s]
    on_tick : callable, optional
        Progress: called as ``on_tick(done, total)``, in ticks, as configurations finish.
    timeseries : bool
        ``False`` leaves each Outcome's time series empty (a sweep needs only the scalars).
    per_request : bool
        ``False`` leaves each Outcome's per-request arrays (``arrival_s``,
        ``ttft_s``, ``latency_s``, ``slo_met``) empty, for the same reason.

    Returns
    -------
    list of Outcome
        One per configuration, in order.
    """
    from planner.simulate.fast.compiled import NotCompilable, fleet_key, prepare, simulate_group

    free_large_arrays_to_the_system()  # a sweep's threads free large arrays over and over
    window = lockstep.replay_window(trace, configurations, duration_s)
    if window is None:
        return []
    duration_s, n_ticks = window.duration_s, window.n_ticks
    total_ticks = len(configurations) * n_ticks
    outcomes: list[Outcome | None] = [None] * len(configurations)
    groups: dict[tuple, list[tuple[int, Prepared]]] = {}
    for index, config in enumerate(configurations):
        try:
            prepared = prepare(config.autoscaler, config.fleet)
        except NotCompilable:
            continue
        groups.setdefault(fleet_key(prepared), []).append((index, prepared))
    done = 0

    def count_done(configs: int) -> None:
        nonlocal done
        done += configs
        if on_tick is not None:
            on_tick(done * n_ticks, total_ticks)

    for members in groups.values():
        results = simulate_group(
            [prepared for _, prepared in members],
            *window.arrays,
            duration_s,
            timeseries=timeseries,
            per_request=per_request,
            on_done=count_done,
        )
        for (index, _), outcome in zip(members, results, strict=True):
            outcomes[index] = outcome
    fallback = [index for index, outcome in enumerate(outcomes) if outcome is None]
    if fallback:
        slow = lockstep.simulate_many(trace, [configurations[i] for i in fallback], duration_s=duration_s)
        for index, outcome in zip(fallback, slow, strict=True):
            outcomes[index] = outcome
    if on_tick is not None:
        on_tick(total_ticks, total_ticks)
    finished: list[Outcome] = []
    for outcome in outcomes:
        if outcome is None:  # cannot happen: the lockstep engine runs whatever the kernels did not
            raise RuntimeError("a configuration was not simulated")
        finished.append(outcome)
    return finished
