"""The compiled tick loop: :mod:`planner.simulate.reference`'s six steps, for a group of configurations.

Each tick, in the reference's order, one step kernel each (the reference's
function of the same name is its twin; :func:`room_step` first checks the
tick fits the arrays):

1. :func:`control_step` - the HPA/KEDA decision kernel for every member, on
   the ticks its control is due, with its cron triggers' readings at that tick
   (:func:`cron_readings`; :func:`record_event` keeps the scale event);
2. :func:`fleet_step` - create or delete pods, finish terminations, with a
   node pool the supply step (:func:`planner.simulate.fast.fleet.supply_step`:
   pods bound to nodes, the node autoscaler), release the gateway;
3. :func:`route_step` - the tick's arrivals to the Service's endpoints;
4. :func:`serve_step` - the replica kernel for every pod whose server is up and holds work;
5. :func:`scrape_step` - the simulated Prometheus, on scrape ticks;
6. :func:`record_step` - one row of the time series, and :func:`signal_step`
   the members' signal column.

The kernels are inlined into the loop (``inline="always"``), so the split
costs nothing at run time. They call :mod:`planner.simulate.fast.fleet`,
:mod:`planner.simulate.fast.replica`, :mod:`planner.simulate.fast.metrics`
and :mod:`planner.simulate.fast.decision`; each is held to its Python
counterpart bit for bit by its own differential test, the step kernels to the
reference's steps by ``tests/simulate/fast/test_simulate_fast_twins.py``, and the loop to
the reference engine by ``tests/simulate/fast/test_simulate_fast.py``.

The kernels take a few named tuples, not loose scalars and arrays:
:class:`RunParams` (ticks, scrapes, the replica's capacity),
:class:`planner.simulate.fast.fleet.DeploymentParams` (warmup, drain, router),
:class:`planner.simulate.fast.replica.ReplicaParams`, the state
(:class:`planner.simulate.fast.fleet.Pods`, :class:`planner.simulate.fast.fleet.Requests`,
:class:`Store`; the node pool is ``Pods.pool``, a
:class:`planner.simulate.fast.supply.NodePool`, its parameters ``DeploymentParams.nodes``),
the :class:`Group` simulated, its :class:`Outputs` and the run's
:class:`Scratch`. Slot constants say what each slot holds: ``CARRY_*``
(``carry``), ``STORE_*`` (``Store.counts``), ``SERIES_*`` and ``SUPPLY_*``
(the time series' columns), ``fleet.PODS_*`` / ``fleet.GATEWAY_*``
(``Pods.count``) and ``supply.POOL_*`` (``NodePool.count``, ``NodePool.clock_s``).

**A group shares one fleet.** The configurations handed to :func:`run` (its
*members*) share everything but their autoscalers: the trace, the fleet and
replica parameters. Two such configurations hold the same fleet for as long
as their controllers write the same replica counts, so the loop simulates
that fleet once and asks every member's controller for its decision on it.
When the decisions differ, :func:`run` stops right after the control step and
returns :data:`FORK` with each member's wanted count (``Outputs.wanted``); the caller
(:mod:`planner.simulate.fast.compiled`) splits the members by it and
resumes each part from that point. A member's own state (its controller
history) is touched only while it is in the running group.

:func:`run` is resumable: where it stands between calls (tick, phase, the
replica count, next arrival, event and preemption counts) is in ``carry``.
It returns :data:`DONE`, :data:`FORK`, or a negative code when the pod, node
or sample arrays ran out of room; the latter is checked at a tick start before
anything of the tick is done, so the caller grows the arrays and calls again.
"""

from __future__ import annotations

import math
from collections import namedtuple
from typing import NamedTuple

import numpy as np
from numba import njit

from planner.simulate.fast import decision, fleet, metrics, replica
from planner.simulate.fast._numeric import NRT_OFF
from planner.simulate.fast.fleet import (
    GATEWAY_QUEUED,
    PODS_CREATED,
    PODS_LIVE,
    PODS_TERMINATING,
    PODS_UP,
)
from planner.simulate.fast.supply import POOL_CREATED

__all__ = [
    "DONE",
    "FORK",
    "OUT_OF_NODES",
    "OUT_OF_PODS",
    "OUT_OF_SAMPLES",
    "Group",
    "Members",
    "Outputs",
    "Queries",
    "RunParams",
    "Store",
    "run",
]

DONE = 0
FORK = 1  # the members' decisions differ: Outputs.wanted holds them, carry the point to resume from
OUT_OF_PODS = -1
OUT_OF_SAMPLES = -2
OUT_OF_NODES = -3
OUT_OF_SCRATCH = -4  # cannot happen: the replica scratch holds every request of the trace
NODES_MISSED = -5  # cannot happen: room_step checked that the tick's nodes fit the pool's arrays
_ROOM = 2  # room_step: the tick fits in the arrays

# Store.counts slots: scrapes taken, pod samples stored, existing-pod rows stored.
STORE_SCRAPES, STORE_SAMPLES, STORE_EXISTING = range(3)
# Columns of the time series: Outputs.series_values (floats) and Outputs.series_counts (counts); the
# signal column is per member (Outputs.signal); with a node pool, Outputs.supply_counts.
SERIES_T_S, SERIES_DEMAND_TPS, SERIES_CAPACITY_TPS = range(3)
SERIES_RUNNING, SERIES_WAITING, SERIES_REQUESTED, SERIES_READY, SERIES_LIVE = range(5)
SUPPLY_NODES_READY, SUPPLY_NODES_PROVISIONING, SUPPLY_PODS_PENDING, SUPPLY_PODS_LOADING = range(4)
# carry slots: where a group stands between calls of run.
(
    CARRY_TICK,
    CARRY_PHASE,
    CARRY_WANTED,
    CARRY_NEXT_ARRIVAL,
    CARRY_SPEC_REPLICAS,
    CARRY_EVENTS,
    CARRY_PREEMPTIONS,
    CARRY_STARTED,
) = range(8)
CARRY_SLOTS = 8
# CARRY_PHASE: resume at the tick start, or right after the tick's control step with CARRY_WANTED decided.
PHASE_TICK_START, PHASE_AFTER_CONTROL = 0, 1


class RunParams(NamedTuple):
    """The run's scalars: its ticks, its scrapes, the room a tick needs, the replica's capacity.

    Attributes
    ----------
    tick_s : float
        Tick length. [s]
    n_ticks, scrape_every : int
        Ticks to simulate; ticks between scrapes.
    initial_replicas : int
        Ready pods at time 0.
    pods_per_tick : int
        Most pods one scale-up can add (the largest count any member can want).
    capacity_tps : float
        One Ready replica's output capacity, for the time series. [tokens/s]
    """

    tick_s: float
    n_ticks: int
    scrape_every: int
    initial_replicas: int
    pods_per_tick: int
    capacity_tps: float


class Queries(NamedTuple):
    """The group's distinct queries as code (:func:`planner.simulate.fast.metrics.evaluate`), concatenated.

    Query ``q`` is ``code[code_offsets[q]:code_offsets[q + 1]]`` with constants
    ``constants[constant_offsets[q]:constant_offsets[q + 1]]``.
    """

    code: np.ndarray
    code_offsets: np.ndarray
    constants: np.ndarray
    constant_offsets: np.ndarray


class QueryResults(NamedTuple):
    """One row per query: the result's kind, its series count, their keys and values (see ``metrics.evaluate``)."""

    kind: np.ndarray
    n: np.ndarray
    keys: np.ndarray
    values: np.ndarray


class ControlPods(NamedTuple):
    """The live pods as the controller sees them at a control tick (first ``n`` entries of each)."""

    ids: np.ndarray
    ready: np.ndarray
    start_s: np.ndarray
    transition_s: np.ndarray


class Scratch(NamedTuple):
    """Work arrays of one call of :func:`run` (contents meaningless between calls)."""

    endpoints: np.ndarray  # the Service's endpoints (fleet.routable)
    deletion_keys: np.ndarray  # fleet.scale_to's sort keys
    replica: replica.ReplicaScratch
    completed: np.ndarray  # requests one replica finished in a tick
    query_work: tuple  # metrics.workspace_arrays
    group_results: QueryResults  # the group's queries at the control tick
    member_results: QueryResults  # a member's queries in its own order, when that is not the group's
    signal_results: QueryResults  # the group's queries at the last tick end, for the signal column
    signal_scrape: np.ndarray  # per query: the scrape signal_results were read from (-2: none yet)
    signal_stale: np.ndarray  # per query: whether that scrape was stale
    control_pods: ControlPods
    cron_state: np.ndarray  # a member's cron readings at the control tick, per slot (decision.CRON_*)
    cron_value: np.ndarray  # and their values [replicas]


class Store(NamedTuple):
    """The scrapes so far, in the layout :func:`planner.simulate.fast.metrics.evaluate` reads (see there).

    Attributes
    ----------
    scrape_time_s : numpy.ndarray of float64
        Each scrape's time. [s]
    scrape_rows : numpy.ndarray of int64
        Scrape ``k``'s samples are rows ``scrape_rows[k]`` to ``scrape_rows[k + 1]``.
    sample_pod, sample_values : numpy.ndarray
        Each sample's pod and its eight values (running, waiting, KV usage,
        busy percent, and the four counters).
    existing_rows, existing_pod : numpy.ndarray of int64
        The pods that existed at each scrape (Ready or not), in the same layout.
    counts : numpy.ndarray of int64
        :data:`STORE_SCRAPES`, :data:`STORE_SAMPLES`, :data:`STORE_EXISTING`.
    """

    scrape_time_s: np.ndarray
    scrape_rows: np.ndarray
    sample_pod: np.ndarray
    sample_values: np.ndarray
    existing_rows: np.ndarray
    existing_pod: np.ndarray
    counts: np.ndarray


Members = namedtuple(
    "Members",
    [
        # The controls, packed (one row or slice per member; see compiled.pack_members).
        "config_i",  # int64 (members, 20): Config's integer and boolean fields, in CONFIG_INT order
        "config_f",  # float64 (members, 12): Config's float fields, in CONFIG_FLOAT order
        "table_i",  # int64: each member's metric (n, 7), policy (n, 3), trigger (n, 3) and formula (n, 2)
        #             tables, flattened
        "table_f",  # float64: each member's trig_activation, then formula_consts
        "table_off",  # int64 (members, 11): offsets of metric, policy, trigger in table_i and of trig_activation
        #               in table_f; the rows of trig_activation, metric, policy, trigger; the offsets of
        #               formula in table_i and of formula_consts in table_f, and the formula's rows
        "state_i",  # int64: each member's count (4), rec_replicas, events (2, slots, 2), keda (rows, 5)
        "state_f",  # float64: each member's rec_t, event_t (2, slots), last_active_s (1), formula_stack
        "state_off",  # int64 (members, 6): offsets in state_i and state_f, recommendation slots, event slots,
        #               keda rows, formula_stack entries
        # Cadence and queries.
        "poll_every",
        "reconcile_every",  # int64 (members,): ticks between KEDA polls (0: never) and reconciles
        "query_of",  # int64 (members, most queries): the group's query each of a member's decision rows reads
        #              (its triggers or HPA metrics, in order; -1 for a cron trigger, which reads none)
        "n_query",  # int64 (members,): the member's decision rows
        "identity",  # bool (members,): query_of[m, i] is i or -1 for every row i (read the group's results directly)
        "signal_query",
        "signal_kind",  # int64 (members,): the group query the signal column shows (-1: none), how
        # Cron triggers, read ahead from the clock (compiled.cron_runs): runs of equal readings.
        "has_cron",  # bool (members,): the member has a cron trigger
        "cron_slots",  # int64 (members, most queries, 2): a slot's runs (start, stop) in the cron_run_* arrays;
        #                empty for a slot that reads its query
        "cron_run_tick",  # int64: each run's first tick
        "cron_run_state",  # int64: its decision.CRON_INACTIVE, CRON_ACTIVE or CRON_FAILED
        "cron_run_value",  # float64: its value [replicas]
    ],
)
"""Every member's autoscaler, as :func:`run` reads it."""


class Group(NamedTuple):
    """The configurations simulated together, and when and what their controllers read.

    Attributes
    ----------
    members : Members
        Every configuration of the group's chunk.
    active : numpy.ndarray of int64
        The members this call simulates (all hold the same fleet).
    control_due : numpy.ndarray of bool, (n_ticks,)
        Ticks on which any member's control may be due.
    queries : Queries
        The group's distinct queries.
    query_has_range : numpy.ndarray of bool
        Per query: it uses a range function.
    """

    members: Members
    active: np.ndarray
    control_due: np.ndarray
    queries: Queries
    query_has_range: np.ndarray


class Outputs(NamedTuple):
    """What :func:`run` writes for the caller.

    Attributes
    ----------
    series_values, series_counts : numpy.ndarray, (n_ticks, 3) and (n_ticks, 5)
        Time series rows (float and count columns, ``SERIES_*``), one per tick.
    events : numpy.ndarray, (rows, 3)
        Scale events (t_s, from, to); ``carry[CARRY_EVENTS]`` rows are held.
    wanted : numpy.ndarray of int64, (members,)
        On :data:`FORK`: each active member's decision (a negative decision-kernel code when it failed).
    signal : numpy.ndarray, (members, n_ticks) or (0, 0)
        Each member's signal column; not written when empty.
    supply_counts : numpy.ndarray of int64, (n_ticks, 4) or (0, 4)
        With a node pool, per tick: nodes ready and provisioning, pods Pending and loading
        (``SUPPLY_*`` columns); not written when empty (the default: no node pool).
    """

    series_values: np.ndarray
    series_counts: np.ndarray
    events: np.ndarray
    wanted: np.ndarray
    signal: np.ndarray
    supply_counts: np.ndarray = np.zeros((0, 4), dtype=np.int64)


CONFIG_INT = (
    "is_keda",
    "min_replicas",
    "max_replicas",
    "has_behavior",
    "up_select",
    "down_select",
    "n_up_policies",
    "up_longest_s",
    "down_longest_s",
    "keda_min_replicas",
    "has_idle",
    "idle_replicas",
    "has_fallback",
    "fallback_threshold",
    "fallback_replicas",
    "fallback_behavior",
    "scale_to_zero",
    "has_object_or_external",
    "has_formula",
    "formula_value_target",
)
CONFIG_FLOAT = (
    "tol_down",
    "tol_up",
    "legacy_window_s",
    "scale_up_limit_factor",
    "scale_up_limit_minimum",
    "up_window_s",
    "down_window_s",
    "cooldown_s",
    "initial_cooldown_s",
    "created_s",
    "formula_target",
    "activation_target",
)


@njit(cache=True, nogil=True, inline="always")
def _tables(members, m):
    # Member m's decision.Tables, as views into the packed arrays.
    ci = members.config_i[m]
    cf = members.config_f[m]
    config = decision.Config(
        is_keda=ci[0] != 0,
        min_replicas=ci[1],
        max_replicas=ci[2],
        tol_down=cf[0],
        tol_up=cf[1],
        has_behavior=ci[3] != 0,
        legacy_window_s=cf[2],
        scale_up_limit_factor=cf[3],
        scale_up_limit_minimum=cf[4],
        up_window_s=cf[5],
        down_window_s=cf[6],
        up_select=ci[4],
        down_select=ci[5],
        n_up_policies=ci[6],
        up_longest_s=ci[7],
        down_longest_s=ci[8],
        keda_min_replicas=ci[9],
        has_idle=ci[10] != 0,
        idle_replicas=ci[11],
        cooldown_s=cf[7],
        initial_cooldown_s=cf[8],
        created_s=cf[9],
        has_fallback=ci[12] != 0,
        fallback_threshold=ci[13],
        fallback_replicas=ci[14],
        fallback_behavior=ci[15],
        scale_to_zero=ci[16],
        has_object_or_external=ci[17] != 0,
        has_formula=ci[18] != 0,
        formula_value_target=ci[19] != 0,
        formula_target=cf[10],
        activation_target=cf[11],
    )
    offsets = members.table_off[m]
    n_metric, n_policy, n_trigger = offsets[5], offsets[6], offsets[7]
    table_i = members.table_i
    metric = table_i[offsets[0] : offsets[0] + 7 * n_metric].reshape((n_metric, 7))
    policy = table_i[offsets[1] : offsets[1] + 3 * n_policy].reshape((n_policy, 3))
    trigger = table_i[offsets[2] : offsets[2] + 3 * n_trigger].reshape((n_trigger, 3))
    activation = members.table_f[offsets[3] : offsets[3] + offsets[4]]
    n_formula = offsets[10]
    formula = table_i[offsets[8] : offsets[8] + 2 * n_formula].reshape((n_formula, 2))
    formula_consts = members.table_f[offsets[9] : offsets[9] + n_formula]
    return decision.Tables(config, metric, policy, activation, trigger, formula, formula_consts)


@njit(cache=True, nogil=True, inline="always")
def _state(members, m):
    # Member m's decision.State, as views into the packed arrays (its history, updated in place).
    offsets = members.state_off[m]
    int_start, float_start, n_rec, n_events, n_keda = offsets[0], offsets[1], offsets[2], offsets[3], offsets[4]
    state_i = members.state_i
    state_f = members.state_f
    count = state_i[int_start : int_start + 4]
    rec_replicas = state_i[int_start + 4 : int_start + 4 + n_rec]
    events_start = int_start + 4 + n_rec
    events = state_i[events_start : events_start + 4 * n_events].reshape((2, n_events, 2))
    keda_start = events_start + 4 * n_events
    keda = state_i[keda_start : keda_start + 5 * n_keda].reshape((n_keda, 5))
    rec_t = state_f[float_start : float_start + n_rec]
    event_t = state_f[float_start + n_rec : float_start + n_rec + 2 * n_events].reshape((2, n_events))
    last_active_start = float_start + n_rec + 2 * n_events
    last_active_s = state_f[last_active_start : last_active_start + 1]
    formula_stack = state_f[last_active_start + 1 : last_active_start + 1 + offsets[5]]
    return decision.State(count, rec_replicas, rec_t, events, event_t, keda, last_active_s, formula_stack)


@njit(cache=True, nogil=True, inline="always")
def _pause(carry, tick, phase, spec_replicas, n_events, preemptions, next_arrival):
    # Where the group stands, for the next call of run to resume from.
    carry[CARRY_TICK] = tick
    carry[CARRY_PHASE] = phase
    carry[CARRY_SPEC_REPLICAS] = spec_replicas
    carry[CARRY_EVENTS] = n_events
    carry[CARRY_PREEMPTIONS] = preemptions
    carry[CARRY_NEXT_ARRIVAL] = next_arrival


@njit(cache=True, nogil=True, inline="always")
def _evaluate_into(q, queries, store, now_s, work, results):
    # Query q of the group at now_s, into row q of results.
    kind, n = metrics.evaluate(
        queries.code[queries.code_offsets[q] : queries.code_offsets[q + 1]],
        queries.constants[queries.constant_offsets[q] : queries.constant_offsets[q + 1]],
        store.scrape_time_s,
        store.counts[STORE_SCRAPES],
        store.scrape_rows,
        store.sample_pod,
        store.sample_values,
        store.existing_rows,
        store.existing_pod,
        now_s,
        work,
        results.keys[q],
        results.values[q],
    )
    results.kind[q] = kind
    results.n[q] = n


@njit(cache=True, nogil=True)
def _signal(signal_kind, q, results):
    # Control.signal from query q's result: KEDA reads it as its scaler does; an HPA metric is
    # the average over pods (Pods) or the sum of the series (Object, External).
    kind = results.kind[q]
    n = results.n[q]
    values = results.values
    if kind == 0:
        return values[q, 0]
    if n == 0:
        return math.nan
    if signal_kind == 0:  # KEDA: one series, or the "multiple elements" error
        return values[q, 0] if n == 1 else math.nan
    total = 0.0
    for j in range(n):
        total += values[q, j]
    return total / n if signal_kind == 1 else total


# ---- the step kernels, in the order of a tick ----------------------------------------------------


@njit(cache=True, nogil=True, inline="always")
def room_step(pods, store, pods_per_tick, scrape_due, nodes):
    """Whether this tick fits the arrays, checked before any of it is done (the caller grows them, resumes).

    Returns ``_ROOM``, :data:`OUT_OF_PODS` (a scale-up of ``pods_per_tick``
    pods would not fit), :data:`OUT_OF_NODES` (with a node pool,
    ``nodes``: the nodes its autoscaler can buy this tick, one per pod and
    placeholder waiting, and the placeholders' warm nodes, would not fit) or
    :data:`OUT_OF_SAMPLES` (this tick's scrape, when ``scrape_due``, would not fit the store).
    """
    count = pods.count
    if count[PODS_CREATED] + pods_per_tick > pods.ready_s.shape[0]:
        return OUT_OF_PODS
    if nodes.enabled:
        pool = pods.pool
        if pool.count[POOL_CREATED] + pods_per_tick + 2 * nodes.placeholders > pool.requested_s.shape[0]:
            return OUT_OF_NODES
    if scrape_due:
        need = count[PODS_UP] + pods_per_tick
        stored = store.counts
        if (
            stored[STORE_SCRAPES] + 1 >= store.scrape_time_s.shape[0]
            or stored[STORE_SAMPLES] + need > store.sample_pod.shape[0]
            or stored[STORE_EXISTING] + need > store.existing_pod.shape[0]
        ):
            return OUT_OF_SAMPLES
    return _ROOM


@njit(cache=True, nogil=True, inline="always")
def _reorder_results(m, members, group_results, member_results):
    # Member m's queries in its own order, copied from the group's rows.
    for slot in range(members.n_query[m]):
        q = members.query_of[m, slot]
        if q < 0:
            continue  # a cron trigger: no query
        member_results.kind[slot] = group_results.kind[q]
        member_results.n[slot] = group_results.n[q]
        for j in range(max(group_results.n[q], 1)):
            member_results.keys[slot, j] = group_results.keys[q, j]
            member_results.values[slot, j] = group_results.values[q, j]


@njit(cache=True, nogil=True, inline="always")
def cron_readings(members, m, tick, cron_state, cron_value):
    """Member ``m``'s cron triggers at ``tick``, by slot (``KedaController.cron_readings`` at its tick start).

    Each reading is its run's (the last run starting at or before ``tick``;
    the first starts at tick 0); a slot without runs reads its query and gets
    ``CRON_NONE``.
    """
    runs = members.cron_slots
    first_tick = members.cron_run_tick
    for slot in range(members.n_query[m]):
        lo = runs[m, slot, 0]
        hi = runs[m, slot, 1]
        if lo == hi:
            cron_state[slot] = decision.CRON_NONE
            continue
        while hi - lo > 1:  # first_tick[lo] <= tick < first_tick[hi] (or hi the end)
            mid = (lo + hi) // 2
            if first_tick[mid] <= tick:
                lo = mid
            else:
                hi = mid
        cron_state[slot] = members.cron_run_state[lo]
        cron_value[slot] = members.cron_run_value[lo]


@njit(cache=True, nogil=True, inline="always")
def control_step(tick, start_s, spec_replicas, pods, store, group, wanted_out, scratch):
    """1. control: every active member's controller decides on the same fleet (reference ``control_step``).

    Parameters
    ----------
    tick : int
        The tick (its control is due when the tick is a multiple of a member's poll or reconcile period).
    start_s : float
        Its start. [s]
    spec_replicas : int
        ``spec.replicas`` before the step.
    pods, store, group, scratch
        The fleet, the scrapes, the group, the run's work arrays.
    wanted_out : numpy.ndarray of int64
        Each active member's decision; written.

    Returns
    -------
    wanted : int
        The first member's decision (``spec_replicas`` when nothing was due).
    agreed : bool
        Every member decided the same, and no decision failed (a negative code).
    """
    view = scratch.control_pods
    live, ready_s, requested_s = pods.live, pods.ready_s, pods.requested_s
    # Typed zeros: numba would also compile decide() for a literal 0 met before the loop's increments.
    n_pods = np.int64(0)
    ready = np.int64(0)
    for j in range(pods.count[PODS_LIVE]):
        p = live[j]
        is_ready = ready_s[p] <= start_s
        view.ids[n_pods] = p
        view.ready[n_pods] = is_ready
        view.start_s[n_pods] = requested_s[p]
        view.transition_s[n_pods] = ready_s[p] if is_ready else requested_s[p]
        n_pods += 1
        if is_ready:
            ready += 1
    queries = group.queries
    group_results = scratch.group_results
    for q in range(queries.code_offsets.shape[0] - 1):
        _evaluate_into(q, queries, store, start_s, scratch.query_work, group_results)
    last = metrics.last_index(store.scrape_time_s, store.counts[STORE_SCRAPES], start_s)
    stamp_s = store.scrape_time_s[last] if last >= 0 else math.nan
    members = group.members
    active = group.active
    wanted = spec_replicas
    differ = False
    for a in range(active.shape[0]):
        m = active[a]
        poll_every = members.poll_every[m]
        poll = poll_every > 0 and tick % poll_every == 0
        reconcile = tick % members.reconcile_every[m] == 0
        if not (poll or reconcile):
            decided = spec_replicas
        else:
            results = group_results  # the group's rows when they are the member's order already
            if not members.identity[m]:
                _reorder_results(m, members, group_results, scratch.member_results)
                results = scratch.member_results
            cron = members.has_cron[m]
            if cron:
                cron_readings(members, m, tick, scratch.cron_state, scratch.cron_value)
            decided = decision.decide(
                _tables(members, m),
                _state(members, m),
                start_s,
                poll,
                reconcile,
                spec_replicas,
                ready,
                view.ids,
                view.ready,
                view.start_s,
                view.transition_s,
                n_pods,
                results.kind,
                results.n,
                results.keys,
                results.values,
                stamp_s,
                scratch.cron_state,
                scratch.cron_value,
            )
            if cron:
                for slot in range(members.n_query[m]):  # the next member may have no cron trigger
                    scratch.cron_state[slot] = decision.CRON_NONE
        wanted_out[m] = decided
        if a == 0:
            wanted = decided
        elif decided != wanted:
            differ = True
    return wanted, not (differ or wanted < 0)


@njit(cache=True, nogil=True, inline="always")
def record_event(events, n_events, start_s, spec_replicas, wanted):
    """Row ``n_events`` of ``events``: (``start_s``, from, to), as the reference's ``control_step`` appends it.

    Returns the new number of events.
    """
    events[n_events, 0] = start_s
    events[n_events, 1] = spec_replicas
    events[n_events, 2] = wanted
    return n_events + 1


@njit(cache=True, nogil=True, inline="always")
def fleet_step(pods, req, rng, spec_replicas, start_s, deployment, scratch):
    """2. fleet: create or delete pods, finish terminations, with a node pool bind pods and run its
    autoscaler, release the gateway (reference ``fleet_step``).

    Scaling, terminations and the gateway each hand over the whole state, so
    each is skipped when there is nothing to do. Returns 0, or
    :data:`NODES_MISSED` when the node pool's arrays were too small (which
    :func:`room_step` rules out).
    """
    count = pods.count
    if spec_replicas != count[PODS_LIVE]:
        fleet.scale_to(pods, spec_replicas, start_s, rng, deployment, scratch.deletion_keys)
    if count[PODS_TERMINATING] > 0:
        fleet.finish_terminations(pods, req, start_s)
    if deployment.nodes.enabled and fleet.supply_step(pods, start_s, rng, deployment) < 0:
        return NODES_MISSED
    if count[GATEWAY_QUEUED] > 0:
        fleet.release_gateway(pods, req, start_s, scratch.endpoints, deployment.router)
    return 0


@njit(cache=True, nogil=True, inline="always")
def route_step(pods, req, next_arrival, start_s, end_s, router, endpoints):
    """3. route: requests arriving before ``end_s`` go to the Service's endpoints (reference ``route_step``).

    Returns the next request to arrive: the tick's arrivals are ``next_arrival``
    up to it. A request's per-run fields are set here, at its arrival: a
    resumed group finds whatever an earlier run left in the entries of
    requests that had not arrived yet.
    """
    first = next_arrival
    arrival_s = req.arrival_s
    n_requests = arrival_s.shape[0]
    while next_arrival < n_requests and arrival_s[next_arrival] < end_s:
        next_arrival += 1
    if next_arrival > first:
        for i in range(first, next_arrival):
            req.admit_s[i] = math.nan
            req.first_token_s[i] = math.nan
            req.done_s[i] = math.nan
            req.generated[i] = 0.0
            req.prefill_left_s[i] = 0.0
            req.preemptions[i] = 0
        n_endpoints = fleet.routable(pods, start_s, endpoints)
        fleet.route_arrivals(pods, req, first, next_arrival, endpoints, n_endpoints, router)
    return next_arrival


@njit(cache=True, nogil=True, inline="always")
def serve_step(pods, req, start_s, tick_s, replica_params, scratch):
    """4. serve: every pod whose server is up runs a tick of continuous batching (reference ``serve_step``).

    Updates each pod's counters, busy fraction and last completion. Returns
    the sequences preempted, or -1 when the replica scratch was too small.
    """
    up, ready_s, stop_at_s = pods.up, pods.ready_s, pods.stop_s
    run_n, wq_n = pods.run_n, pods.wq_n
    counters, busy_frac, last_done_s = pods.counters, pods.busy_frac, pods.last_done_s
    done_s = req.done_s
    completed = scratch.completed
    preemptions = 0
    for j in range(pods.count[PODS_UP]):
        p = up[j]
        if not ready_s[p] <= start_s:
            continue
        if run_n[p] == 0 and wq_n[p] == 0:
            busy_frac[p] = 0.0  # an empty replica runs no step
            pods.stall_debt_s[p] = 0.0  # and no decode is left to owe, or be owed, a stall
            continue
        stop_s = stop_at_s[p] if not math.isnan(stop_at_s[p]) else math.inf
        busy_s, n_done, generated_tokens, prompt_tokens, preempted = replica.advance_pod(
            start_s, tick_s, stop_s, p, pods, req, replica_params, scratch.replica, completed
        )
        if n_done < 0:
            return -1
        counters[p, 0] += n_done
        counters[p, 1] += generated_tokens
        counters[p, 2] += prompt_tokens
        counters[p, 3] += preempted
        busy_frac[p] = busy_s / tick_s
        preemptions += preempted
        for c in range(n_done):
            finished_s = done_s[completed[c]]
            if finished_s > last_done_s[p]:
                last_done_s[p] = finished_s
    return preemptions


@njit(cache=True, nogil=True, inline="always")
def scrape_step(pods, req, store, end_s, replica_params):
    """5. scrape at ``end_s`` (the reference's ``scrape_step``).

    Every pod not yet removed exists (``kube_pod_info``); every Ready one is sampled.
    """
    up, ready_s, run_n, wq_n = pods.up, pods.ready_s, pods.run_n, pods.wq_n
    busy_frac, counters = pods.busy_frac, pods.counters
    sample_pod, sample_values, existing_pod = store.sample_pod, store.sample_values, store.existing_pod
    stored = store.counts
    n_scrapes = stored[STORE_SCRAPES]
    n_samples = stored[STORE_SAMPLES]
    n_existing = stored[STORE_EXISTING]
    store.scrape_time_s[n_scrapes] = end_s
    for j in range(pods.count[PODS_UP]):
        p = up[j]
        existing_pod[n_existing] = p
        n_existing += 1
        if not ready_s[p] <= end_s:
            continue
        sample_pod[n_samples] = p
        sample_values[n_samples, 0] = run_n[p]
        sample_values[n_samples, 1] = wq_n[p]
        sample_values[n_samples, 2] = replica.kv_usage_frac(
            p,
            pods.run,
            run_n,
            req.input_tokens,
            req.generated,
            replica_params.block_size_tokens,
            replica_params.kv_tokens,
        )
        sample_values[n_samples, 3] = 100.0 * busy_frac[p]
        for c in range(4):
            sample_values[n_samples, 4 + c] = counters[p, c]
        n_samples += 1
    store.scrape_rows[n_scrapes + 1] = n_samples
    store.existing_rows[n_scrapes + 1] = n_existing
    stored[STORE_SCRAPES] = n_scrapes + 1
    stored[STORE_SAMPLES] = n_samples
    stored[STORE_EXISTING] = n_existing


@njit(cache=True, nogil=True, inline="always")
def signal_step(tick, end_s, store, group, signal_out, scratch):
    """6. record, the signal column: each active member's trigger or metric at ``end_s`` (``Control.signal``).

    A query is evaluated again only when it may have changed (a range
    function, another scrape, or the scrape gone stale).
    """
    last = metrics.last_index(store.scrape_time_s, store.counts[STORE_SCRAPES], end_s)
    stale = last < 0 or end_s - store.scrape_time_s[last] > metrics.STALENESS_S
    queries = group.queries
    results = scratch.signal_results
    signal_scrape, signal_stale = scratch.signal_scrape, scratch.signal_stale
    for q in range(queries.code_offsets.shape[0] - 1):
        # A query without a range function changes only with the scrape it reads.
        if group.query_has_range[q] or last != signal_scrape[q] or stale != signal_stale[q]:
            signal_scrape[q] = last
            signal_stale[q] = stale
            _evaluate_into(q, queries, store, end_s, scratch.query_work, results)
    members = group.members
    active = group.active
    for a in range(active.shape[0]):
        m = active[a]
        q = members.signal_query[m]
        signal_out[m, tick] = math.nan if q < 0 else _signal(members.signal_kind[m], q, results)


@njit(cache=True, nogil=True, inline="always")
def record_step(tick, end_s, first_arrival, next_arrival, spec_replicas, pods, req, run_params, outputs, endpoints):
    """6. record: row ``tick`` of the time series at ``end_s`` (the reference's ``record_step`` but the signal).

    Demand counts the output tokens of requests ``first_arrival`` to
    ``next_arrival - 1`` (the tick's arrivals). [tokens/s] With a node pool
    (``outputs.supply_counts`` not empty), also its row of nodes and pods by phase.
    """
    up, ready_s, run_n, wq_n = pods.up, pods.ready_s, pods.run_n, pods.wq_n
    count = pods.count
    waiting = count[GATEWAY_QUEUED]
    running = 0
    for j in range(count[PODS_UP]):
        p = up[j]
        if ready_s[p] <= end_s:
            waiting += wq_n[p]
            running += run_n[p]
    ready_now = fleet.routable(pods, end_s, endpoints)
    demand_tokens = 0
    output_tokens = req.output_tokens
    for i in range(first_arrival, next_arrival):
        demand_tokens += output_tokens[i]
    values, counts = outputs.series_values, outputs.series_counts
    values[tick, SERIES_T_S] = end_s
    values[tick, SERIES_DEMAND_TPS] = float(demand_tokens) / run_params.tick_s
    values[tick, SERIES_CAPACITY_TPS] = ready_now * run_params.capacity_tps
    counts[tick, SERIES_RUNNING] = running
    counts[tick, SERIES_WAITING] = waiting
    counts[tick, SERIES_REQUESTED] = spec_replicas
    counts[tick, SERIES_READY] = ready_now
    counts[tick, SERIES_LIVE] = count[PODS_LIVE]
    supply_counts = outputs.supply_counts
    if supply_counts.shape[0] > 0:
        nodes_ready, nodes_provisioning, pods_pending, pods_loading = fleet.supply_counts(pods, end_s)
        supply_counts[tick, SUPPLY_NODES_READY] = nodes_ready
        supply_counts[tick, SUPPLY_NODES_PROVISIONING] = nodes_provisioning
        supply_counts[tick, SUPPLY_PODS_PENDING] = pods_pending
        supply_counts[tick, SUPPLY_PODS_LOADING] = pods_loading


@njit(cache=True, nogil=True)
def run(req, pods, store, rng, run_params, deployment, replica_params, group, outputs, carry):
    """Simulate the group's active members from ``carry``'s tick until the end or until their decisions differ.

    Parameters
    ----------
    req, pods, store
        The fleet's state (:mod:`planner.simulate.fast.fleet`, :data:`Store`); updated.
    rng : numpy.random.Generator
        The fleet's generator (warmups and pod UIDs); advanced.
    run_params : RunParams
        Ticks, scrapes, initial replicas and the replica's capacity.
    deployment : planner.simulate.fast.fleet.DeploymentParams
        The fleet's parameters (:class:`planner.simulate.fleet.FleetSpec`).
    replica_params : planner.simulate.fast.replica.ReplicaParams
        The replica's.
    group : Group
        The members, which of them this call simulates, and their queries.
    outputs : Outputs
        The time series, the scale events, the members' decisions on :data:`FORK`, their signal columns; written.
    carry : numpy.ndarray of int64, (CARRY_SLOTS,)
        Where the group stands; updated.

    Returns
    -------
    int
        :data:`DONE`, :data:`FORK`, :data:`OUT_OF_PODS`, :data:`OUT_OF_NODES` or :data:`OUT_OF_SAMPLES`.
    """
    capacity = pods.ready_s.shape[0]
    scratch = new_scratch(capacity, req.arrival_s.shape[0], replica_params.max_num_seqs, group)
    if carry[CARRY_STARTED] == 0:
        if run_params.initial_replicas > capacity:
            return OUT_OF_PODS
        pool = pods.pool
        if deployment.nodes.enabled and pool.count[POOL_CREATED] + run_params.initial_replicas > pool.live.shape[0]:
            return OUT_OF_NODES  # each initial pod may need a warm node of its own
        for _ in range(run_params.initial_replicas):
            fleet.add_pod(pods, 0.0, np.bool_(True), rng, deployment)  # typed: one compiled add_pod
        carry[CARRY_SPEC_REPLICAS] = run_params.initial_replicas
        carry[CARRY_STARTED] = 1
    return _loop(req, pods, store, rng, run_params, deployment, replica_params, group, outputs, carry, scratch)


@njit(cache=True, nogil=True)
def new_scratch(capacity, n_requests, max_num_seqs, group):
    """The :class:`Scratch` of a run for ``capacity`` pods, ``n_requests`` requests and ``group``'s queries."""
    rows = max(group.queries.code_offsets.shape[0] - 1, 1)
    most_queries = max(group.members.query_of.shape[1], 1)
    return Scratch(
        endpoints=np.empty(capacity, dtype=np.int64),
        deletion_keys=np.empty((capacity, 4), dtype=np.int64),
        replica=replica.new_scratch(max_num_seqs, max(n_requests, 1)),
        completed=np.empty(n_requests + 1, dtype=np.int64),
        query_work=metrics.workspace_arrays(capacity),
        group_results=QueryResults(
            np.zeros(rows, dtype=np.int64),
            np.zeros(rows, dtype=np.int64),
            np.zeros((rows, capacity + 1), dtype=np.int64),
            np.zeros((rows, capacity + 1)),
        ),
        member_results=QueryResults(
            np.zeros(most_queries, dtype=np.int64),
            np.zeros(most_queries, dtype=np.int64),
            np.zeros((most_queries, capacity + 1), dtype=np.int64),
            np.zeros((most_queries, capacity + 1)),
        ),
        signal_results=QueryResults(
            np.zeros(rows, dtype=np.int64),
            np.zeros(rows, dtype=np.int64),
            np.zeros((rows, capacity + 1), dtype=np.int64),
            np.zeros((rows, capacity + 1)),
        ),
        signal_scrape=np.full(rows, -2, dtype=np.int64),
        signal_stale=np.zeros(rows, dtype=np.bool_),
        control_pods=ControlPods(
            np.empty(capacity, dtype=np.int64),
            np.empty(capacity, dtype=np.bool_),
            np.empty(capacity),
            np.empty(capacity),
        ),
        cron_state=np.full(most_queries, decision.CRON_NONE, dtype=np.int64),
        cron_value=np.zeros(most_queries),
    )


# Without NRT: the loop takes every array it uses from its caller and allocates none, so numba emits no
# reference counting in it (nor in the step kernels, inlined into it). With it, each array an inlined
# kernel is handed (about thirty per pod per tick) was counted up and down atomically: some 40 % of the
# loop's time on a busy day.
@njit(cache=True, nogil=True, **NRT_OFF)
def _loop(req, pods, store, rng, run_params, deployment, replica_params, group, outputs, carry, scratch):
    # run's tick loop (see there), from carry's tick: the reference's six steps, each a kernel above.
    tick_s = run_params.tick_s
    record_signal = outputs.signal.shape[0] > 0
    spec_replicas = carry[CARRY_SPEC_REPLICAS]
    n_events = carry[CARRY_EVENTS]
    preemptions = carry[CARRY_PREEMPTIONS]
    next_arrival = carry[CARRY_NEXT_ARRIVAL]
    resume_after_control = carry[CARRY_PHASE] == PHASE_AFTER_CONTROL
    for tick in range(carry[CARRY_TICK], run_params.n_ticks):
        start_s = tick * tick_s
        end_s = (tick + 1) * tick_s
        scrape_due = (tick + 1) % run_params.scrape_every == 0

        if resume_after_control:
            resume_after_control = False
            wanted = carry[CARRY_WANTED]
        else:
            room = room_step(pods, store, run_params.pods_per_tick, scrape_due, deployment.nodes)
            if room != _ROOM:
                _pause(carry, tick, PHASE_TICK_START, spec_replicas, n_events, preemptions, next_arrival)
                return room
            wanted = spec_replicas
            if group.control_due[tick]:
                wanted, agreed = control_step(tick, start_s, spec_replicas, pods, store, group, outputs.wanted, scratch)
                if not agreed:
                    _pause(carry, tick, PHASE_AFTER_CONTROL, spec_replicas, n_events, preemptions, next_arrival)
                    return FORK
        if wanted != spec_replicas:
            n_events = record_event(outputs.events, n_events, start_s, spec_replicas, wanted)
            spec_replicas = wanted

        if fleet_step(pods, req, rng, spec_replicas, start_s, deployment, scratch) < 0:
            return NODES_MISSED
        first_arrival = next_arrival
        next_arrival = route_step(pods, req, next_arrival, start_s, end_s, deployment.router, scratch.endpoints)
        preempted = serve_step(pods, req, start_s, tick_s, replica_params, scratch)
        if preempted < 0:
            return OUT_OF_SCRATCH
        preemptions += preempted
        if scrape_due:
            scrape_step(pods, req, store, end_s, replica_params)
        if record_signal:
            signal_step(tick, end_s, store, group, outputs.signal, scratch)
        record_step(
            tick, end_s, first_arrival, next_arrival, spec_replicas, pods, req, run_params, outputs, scratch.endpoints
        )

    if pods.count[PODS_TERMINATING] > 0:
        fleet.finish_terminations(pods, req, run_params.n_ticks * tick_s)
    _pause(carry, run_params.n_ticks, PHASE_TICK_START, spec_replicas, n_events, preemptions, next_arrival)
    return DONE
