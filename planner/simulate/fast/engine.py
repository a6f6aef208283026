"""The compiled tick loop: :mod:`planner.simulate.reference`'s six steps, for a group of configurations.

Each tick, in the reference's order: control (the HPA/KEDA decision kernel,
on the ticks it is due), fleet (create or delete pods, finish terminations,
release the gateway), route, serve (the replica kernel for every pod whose
server is up and holds work), scrape (the simulated Prometheus, on scrape
ticks) and record (one row of the time series). The kernels are
:mod:`planner.simulate.fast.fleet`, :mod:`planner.simulate.fast.replica`,
:mod:`planner.simulate.fast.metrics` and :mod:`planner.simulate.fast.decision`;
each is held to its Python counterpart bit for bit by its own differential
test, and this loop to the reference engine by ``tests/test_simulate_fast.py``.

**A group shares one fleet.** The configurations handed to :func:`run` (its
*members*) share everything but their autoscalers: the trace, the fleet and
replica parameters. Two such configurations hold the same fleet for as long
as their controllers write the same replica counts, so the loop simulates
that fleet once and asks every member's controller for its decision on it.
When the decisions differ, :func:`run` stops right after the control step and
returns :data:`FORK` with each member's wanted count; the caller
(:mod:`planner.simulate.fast.compiled`) splits the members by it and
resumes each part from that point. A member's own state (its controller
history) is touched only while it is in the running group.

:func:`run` is resumable: where it stands between calls (tick, phase, the
replica count, next arrival, event and preemption counts) is in ``carry``.
It returns :data:`DONE`, :data:`FORK`, or a negative code when the pod or
sample arrays ran out of room; the latter is checked at a tick start before
anything of the tick is done, so the caller grows the arrays and calls again.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from planner.simulate.fast import decision, fleet, metrics, replica
from planner.simulate.fast.fleet import GW_N, N_LIVE, N_PODS, N_TERM, N_UP
from planner.simulate.replica import WAITING

__all__ = ["DONE", "FORK", "OUT_OF_PODS", "OUT_OF_SAMPLES", "Members", "Store", "run"]

DONE = 0
FORK = 1  # the members' decisions differ: wanted_out holds them, carry the point to resume from
OUT_OF_PODS = -1
OUT_OF_SAMPLES = -2
OUT_OF_SCRATCH = -4  # cannot happen: the replica scratch holds every request of the trace

Scratch = namedtuple("Scratch", [
    "endpoints", "keys", "replica", "completed", "work", "res_kind", "res_n", "res_keys", "res_vals", "own_kind",
    "own_n", "own_keys", "own_vals", "sig_k", "sig_stale", "sig_kind", "sig_n", "sig_keys", "sig_vals", "pod_ids",
    "pod_ready", "pod_start_s", "pod_transition_s",
])
"""Work arrays of one call of :func:`run` (contents meaningless between calls)."""

Store = namedtuple("Store", ["scr_t", "scr_off", "smp_pod", "smp_val", "ex_off", "ex_pod", "count"])
"""The scrapes so far, in the layout :func:`planner.simulate.fast.metrics.evaluate` reads (see there)."""
# Store.count slots.
N_SCR, N_ROWS, N_EXIST = 0, 1, 2
# rec_f columns (floats) and rec_i columns (counts) of the time series; the signal is per member.
F_T, F_DEMAND, F_CAPACITY = range(3)
I_RUNNING, I_WAITING, I_REQUESTED, I_READY, I_LIVE = range(5)
# carry slots: where a group stands between calls of run.
C_TICK, C_PHASE, C_WANTED, C_NEXT_ARRIVAL, C_SPEC, C_EVENTS, C_PREEMPTIONS, C_STARTED = range(8)
CARRY_SLOTS = 8
# C_PHASE: resume at the tick start, or right after the tick's control step with C_WANTED decided.
PHASE_TICK_START, PHASE_AFTER_CONTROL = 0, 1

Members = namedtuple("Members", [
    # The controls, packed (one row or slice per member; see compiled.pack_members).
    "config_i",  # int64 (members, 18): Config's integer and boolean fields, in CONFIG_INT order
    "config_f",  # float64 (members, 11): Config's float fields, in CONFIG_FLOAT order
    "table_i",  # int64: each member's metric (n, 7), policy (n, 3) and trigger (n, 3) tables, flattened
    "table_f",  # float64: each member's trig_activation
    "table_off",  # int64 (members, 8): offsets of metric, policy, trigger in table_i and of trig_activation
    #               in table_f; then the rows of trig_activation, metric, policy, trigger
    "state_i",  # int64: each member's count (4), rec_replicas, events (2, slots, 2), keda (rows, 5)
    "state_f",  # float64: each member's rec_t, event_t (2, slots), last_active_s (1)
    "state_off",  # int64 (members, 5): offsets in state_i and state_f, recommendation slots, event slots,
    #               keda rows
    # Cadence and queries.
    "poll_every", "reconcile_every",  # int64 (members,): ticks between KEDA polls (0: never) and reconciles
    "query_of",  # int64 (members, most queries): the group's query each of a member's queries is
    "n_query",  # int64 (members,)
    "identity",  # bool (members,): query_of[m, :n] is 0, 1, ..., n - 1 (read the group's results directly)
    "signal_query", "signal_kind",  # int64 (members,): the group query the signal column shows (-1: none), how
])
"""Every member's autoscaler, as :func:`run` reads it."""

CONFIG_INT = ("is_keda", "min_replicas", "max_replicas", "has_behavior", "up_select", "down_select",
              "n_up_policies", "up_longest_s", "down_longest_s", "keda_min_replicas", "has_idle", "idle_replicas",
              "has_fallback", "fallback_threshold", "fallback_replicas", "fallback_behavior", "scale_to_zero",
              "has_object_or_external")
CONFIG_FLOAT = ("tol_down", "tol_up", "legacy_window_s", "scale_up_limit_factor", "scale_up_limit_minimum",
                "up_window_s", "down_window_s", "cooldown_s", "initial_cooldown_s", "created_s")


@njit(cache=True, nogil=True, inline="always")
def _tables(members, m):
    # Member m's decision.Tables, as views into the packed arrays.
    ci = members.config_i[m]
    cf = members.config_f[m]
    config = decision.Config(
        is_keda=ci[0] != 0, min_replicas=ci[1], max_replicas=ci[2], tol_down=cf[0], tol_up=cf[1],
        has_behavior=ci[3] != 0, legacy_window_s=cf[2], scale_up_limit_factor=cf[3], scale_up_limit_minimum=cf[4],
        up_window_s=cf[5], down_window_s=cf[6], up_select=ci[4], down_select=ci[5], n_up_policies=ci[6],
        up_longest_s=ci[7], down_longest_s=ci[8], keda_min_replicas=ci[9], has_idle=ci[10] != 0,
        idle_replicas=ci[11], cooldown_s=cf[7], initial_cooldown_s=cf[8], created_s=cf[9],
        has_fallback=ci[12] != 0, fallback_threshold=ci[13], fallback_replicas=ci[14], fallback_behavior=ci[15],
        scale_to_zero=ci[16], has_object_or_external=ci[17] != 0,
    )
    off = members.table_off[m]
    n_metric, n_policy, n_trigger = off[5], off[6], off[7]
    table_i = members.table_i
    metric = table_i[off[0]:off[0] + 7 * n_metric].reshape((n_metric, 7))
    policy = table_i[off[1]:off[1] + 3 * n_policy].reshape((n_policy, 3))
    trigger = table_i[off[2]:off[2] + 3 * n_trigger].reshape((n_trigger, 3))
    activation = members.table_f[off[3]:off[3] + off[4]]
    return decision.Tables(config, metric, policy, activation, trigger)


@njit(cache=True, nogil=True, inline="always")
def _state(members, m):
    # Member m's decision.State, as views into the packed arrays (its history, updated in place).
    off = members.state_off[m]
    i0, f0, n_rec, n_events, n_keda = off[0], off[1], off[2], off[3], off[4]
    state_i = members.state_i
    state_f = members.state_f
    count = state_i[i0:i0 + 4]
    rec_replicas = state_i[i0 + 4:i0 + 4 + n_rec]
    e0 = i0 + 4 + n_rec
    events = state_i[e0:e0 + 4 * n_events].reshape((2, n_events, 2))
    k0 = e0 + 4 * n_events
    keda = state_i[k0:k0 + 5 * n_keda].reshape((n_keda, 5))
    rec_t = state_f[f0:f0 + n_rec]
    event_t = state_f[f0 + n_rec:f0 + n_rec + 2 * n_events].reshape((2, n_events))
    last_active_s = state_f[f0 + n_rec + 2 * n_events:f0 + n_rec + 2 * n_events + 1]
    return decision.State(count, rec_replicas, rec_t, events, event_t, keda, last_active_s)


@njit(cache=True, nogil=True, inline="always")
def _endpoints(live, n_live, ready_s, now_s, out):
    # Fleet.routable on the live list's arrays: Ready, not terminating, ascending.
    n = 0
    for j in range(n_live):
        p = live[j]
        if ready_s[p] <= now_s:
            out[n] = p
            n += 1
    return n


@njit(cache=True, nogil=True, inline="always")
def _route_least_loaded(i, endpoints, n_endpoints, run_n, wq_head, wq_tail, wq_n, replica_of, status, next_req):
    # Fleet.route for the least-loaded router with endpoints: lowest (running + waiting, pod), queue tail.
    p = endpoints[0]
    best = run_n[p] + wq_n[p]
    for j in range(1, n_endpoints):
        q = endpoints[j]
        load = run_n[q] + wq_n[q]
        if load < best:
            best = load
            p = q
    replica_of[i] = p
    status[i] = WAITING
    next_req[i] = -1
    if wq_tail[p] >= 0:
        next_req[wq_tail[p]] = i
    else:
        wq_head[p] = i
    wq_tail[p] = i
    wq_n[p] += 1


@njit(cache=True, nogil=True, inline="always")
def _pause(carry, k, phase, spec_replicas, n_events, preemptions, next_arrival):
    # Where the group stands, for the next call of run to resume from.
    carry[C_TICK] = k
    carry[C_PHASE] = phase
    carry[C_SPEC] = spec_replicas
    carry[C_EVENTS] = n_events
    carry[C_PREEMPTIONS] = preemptions
    carry[C_NEXT_ARRIVAL] = next_arrival


@njit(cache=True, nogil=True, inline="always")
def _evaluate_into(q, queries, store, now_s, work, out_kind, out_n, out_keys, out_vals):
    # Query q of the group at now_s, into row q of the result arrays.
    code, code_off, consts, consts_off = queries
    kind, n = metrics.evaluate(
        code[code_off[q]:code_off[q + 1]], consts[consts_off[q]:consts_off[q + 1]], store.scr_t,
        store.count[N_SCR], store.scr_off, store.smp_pod, store.smp_val, store.ex_off, store.ex_pod, now_s, work,
        out_keys[q], out_vals[q])
    out_kind[q] = kind
    out_n[q] = n


@njit(cache=True, nogil=True)
def _signal(signal_kind, m, res_kind, res_n, res_vals):
    # Control.signal from an evaluated query: KEDA reads it as its scaler does; an HPA metric is
    # the average over pods (Pods) or the sum of the series (Object, External).
    kind = res_kind[m]
    n = res_n[m]
    if kind == 0:
        return res_vals[m, 0]
    if n == 0:
        return math.nan
    if signal_kind == 0:  # KEDA: one series, or the "multiple elements" error
        return res_vals[m, 0] if n == 1 else math.nan
    total = 0.0
    for j in range(n):
        total += res_vals[m, j]
    return total / n if signal_kind == 1 else total


@njit(cache=True, nogil=True)
def run(req, pods, store, rng, tick_s, n_ticks, scrape_every, initial_replicas, pods_per_tick,
        warmup_kind, warmup_s, warmup_spread_s, pre_stop_s, grace_s, shutdown_timeout_s, router,
        step_table_s, max_num_seqs, kv_tokens, block_size_tokens, prefill_ms_per_token, capacity_tps,
        members, active, control_due, queries, query_has_range,
        rec_f, rec_i, events, carry, wanted_out, signal_out):
    """Simulate the group ``active`` from ``carry``'s tick until the end or until its decisions differ.

    Parameters
    ----------
    req, pods, store
        The fleet's state (:mod:`planner.simulate.fast.fleet`, :data:`Store`); updated.
    rng : numpy.random.Generator
        The fleet's generator (warmups and pod UIDs); advanced.
    tick_s : float
        Tick length. [s]
    n_ticks, scrape_every : int
        Ticks to simulate; ticks between scrapes.
    initial_replicas : int
        Ready pods at time 0.
    pods_per_tick : int
        Most pods one scale-up can add (the largest count any member can want).
    warmup_kind, warmup_s, warmup_spread_s, pre_stop_s, grace_s, shutdown_timeout_s, router
        The fleet's parameters (:class:`planner.simulate.fleet.FleetSpec`). [s]
    step_table_s, max_num_seqs, kv_tokens, block_size_tokens, prefill_ms_per_token
        The replica's (:class:`planner.simulate.fast.replica.CompiledReplica`).
    capacity_tps : float
        One Ready replica's output capacity, for the time series. [tokens/s]
    members : Members
        Every configuration of the group's chunk.
    active : numpy.ndarray of int64
        The members this call simulates (all hold the same fleet).
    control_due : numpy.ndarray of bool, (n_ticks,)
        Ticks on which any member's control may be due.
    queries : tuple of four arrays
        The group's distinct queries as code (code, code offsets, constants, constant offsets).
    query_has_range : numpy.ndarray of bool
        Per query: it uses a range function.
    rec_f, rec_i : numpy.ndarray
        Time series rows (float and count columns), one per tick; written.
    events : numpy.ndarray, (rows, 3)
        Scale events (t_s, from, to); ``carry[C_EVENTS]`` rows are held.
    carry : numpy.ndarray of int64, (CARRY_SLOTS,)
        Where the group stands; updated.
    wanted_out : numpy.ndarray of int64, (members,)
        On :data:`FORK`: each active member's decision (a negative decision-kernel code when it failed).
    signal_out : numpy.ndarray, (members, n_ticks) or (0, 0)
        Each member's signal column; not written when empty.

    Returns
    -------
    int
        :data:`DONE`, :data:`FORK`, :data:`OUT_OF_PODS` or :data:`OUT_OF_SAMPLES`.
    """
    capacity = pods.ready_s.shape[0]
    n_requests = req.arrival_s.shape[0]
    rows = max(queries[1].shape[0] - 1, 1)
    most_queries = max(members.query_of.shape[1], 1)
    scratch = Scratch(
        endpoints=np.empty(capacity, dtype=np.int64), keys=np.empty((capacity, 4), dtype=np.int64),
        replica=replica.new_scratch(max_num_seqs, max(n_requests, 1)),
        completed=np.empty(n_requests + 1, dtype=np.int64), work=metrics.workspace_arrays(capacity),
        res_kind=np.zeros(rows, dtype=np.int64), res_n=np.zeros(rows, dtype=np.int64),
        res_keys=np.zeros((rows, capacity + 1), dtype=np.int64), res_vals=np.zeros((rows, capacity + 1)),
        own_kind=np.zeros(most_queries, dtype=np.int64), own_n=np.zeros(most_queries, dtype=np.int64),
        own_keys=np.zeros((most_queries, capacity + 1), dtype=np.int64),
        own_vals=np.zeros((most_queries, capacity + 1)),
        sig_k=np.full(rows, -2, dtype=np.int64), sig_stale=np.zeros(rows, dtype=np.bool_),
        sig_kind=np.zeros(rows, dtype=np.int64), sig_n=np.zeros(rows, dtype=np.int64),
        sig_keys=np.zeros((rows, capacity + 1), dtype=np.int64), sig_vals=np.zeros((rows, capacity + 1)),
        pod_ids=np.empty(capacity, dtype=np.int64), pod_ready=np.empty(capacity, dtype=np.bool_),
        pod_start_s=np.empty(capacity), pod_transition_s=np.empty(capacity),
    )
    if carry[C_STARTED] == 0:
        if initial_replicas > capacity:
            return OUT_OF_PODS
        for _ in range(initial_replicas):
            fleet.add_pod(pods, 0.0, True, rng, warmup_kind, warmup_s, warmup_spread_s)
        carry[C_SPEC] = initial_replicas
        carry[C_STARTED] = 1
    return _loop(req, pods, store, rng, tick_s, n_ticks, scrape_every, pods_per_tick, warmup_kind, warmup_s,
                 warmup_spread_s, pre_stop_s, grace_s, shutdown_timeout_s, router, step_table_s, max_num_seqs,
                 kv_tokens, block_size_tokens, prefill_ms_per_token, capacity_tps, members, active, control_due,
                 queries, query_has_range, rec_f, rec_i, events, carry, wanted_out, signal_out, scratch)


# Without NRT: the loop takes every array it uses from its caller and allocates none, so numba emits no
# reference counting in it. With it, each array an inlined kernel is handed (about thirty per pod per
# tick) was counted up and down atomically: some 40 % of the loop's time on a busy day.
@njit(cache=True, nogil=True, _nrt=False)
def _loop(req, pods, store, rng, tick_s, n_ticks, scrape_every, pods_per_tick, warmup_kind, warmup_s,
          warmup_spread_s, pre_stop_s, grace_s, shutdown_timeout_s, router, step_table_s, max_num_seqs, kv_tokens,
          block_size_tokens, prefill_ms_per_token, capacity_tps, members, active, control_due, queries,
          query_has_range, rec_f, rec_i, events, carry, wanted_out, signal_out, scratch):
    # run's tick loop (see there), from carry's tick.
    (endpoints, keys, replica_scratch, completed, work, res_kind, res_n, res_keys, res_vals, own_kind, own_n,
     own_keys, own_vals, sig_k, sig_stale, sig_kind, sig_n, sig_keys, sig_vals, pod_ids, pod_ready, pod_start_s,
     pod_transition_s) = scratch
    n_requests = req.arrival_s.shape[0]
    n_queries = queries[1].shape[0] - 1
    record_signal = signal_out.shape[0] > 0
    n_active = active.shape[0]
    capacity = pods.ready_s.shape[0]
    spec_replicas = carry[C_SPEC]
    n_events = carry[C_EVENTS]
    preemptions = carry[C_PREEMPTIONS]
    next_arrival = carry[C_NEXT_ARRIVAL]
    resume_after_control = carry[C_PHASE] == PHASE_AFTER_CONTROL
    # The state's arrays as locals: reading a named tuple's field, or handing the whole tuple to a
    # function, costs reference counting on every array of it; the hot path below uses only these.
    requested_s, ready_s, stop_arr_s = pods.requested_s, pods.ready_s, pods.stop_s
    run_b, run_n, wq_head, wq_tail, wq_n = pods.run, pods.run_n, pods.wq_head, pods.wq_tail, pods.wq_n
    counters, busy_frac, last_done_s = pods.counters, pods.busy_frac, pods.last_done_s
    live, up, count = pods.live, pods.up, pods.count
    arrival_s, input_tokens, output_tokens = req.arrival_s, req.input_tokens, req.output_tokens
    status, replica_of, admit_s, first_token_s = req.status, req.replica, req.admit_s, req.first_token_s
    done_s, generated, prefill_left_s, preempted_n, next_req = (
        req.done_s, req.generated, req.prefill_left_s, req.preemptions, req.next_req)
    scr_t, scr_off, smp_pod, smp_val = store.scr_t, store.scr_off, store.smp_pod, store.smp_val
    ex_off, ex_pod, store_count = store.ex_off, store.ex_pod, store.count
    poll_every, reconcile_every = members.poll_every, members.reconcile_every
    query_of, n_query, identity = members.query_of, members.n_query, members.identity
    for k in range(carry[C_TICK], n_ticks):
        t0_s = k * tick_s
        t1_s = (k + 1) * tick_s
        scrape_due = (k + 1) % scrape_every == 0

        if resume_after_control:
            resume_after_control = False
            wanted = carry[C_WANTED]
        else:
            # Room for this tick, checked before any of it is done (the caller grows the arrays and resumes).
            if count[N_PODS] + pods_per_tick > capacity:
                _pause(carry, k, PHASE_TICK_START, spec_replicas, n_events, preemptions, next_arrival)
                return OUT_OF_PODS
            if scrape_due:
                need = count[N_UP] + pods_per_tick
                if (store_count[N_SCR] + 1 >= scr_t.shape[0] or store_count[N_ROWS] + need > smp_pod.shape[0]
                        or store_count[N_EXIST] + need > ex_pod.shape[0]):
                    _pause(carry, k, PHASE_TICK_START, spec_replicas, n_events, preemptions, next_arrival)
                    return OUT_OF_SAMPLES

            # 1. control: every active member's controller decides on the same fleet
            wanted = spec_replicas
            if control_due[k]:
                n_pods = 0
                ready = 0
                for j in range(count[N_LIVE]):
                    p = live[j]
                    is_ready = ready_s[p] <= t0_s
                    pod_ids[n_pods] = p
                    pod_ready[n_pods] = is_ready
                    pod_start_s[n_pods] = requested_s[p]
                    pod_transition_s[n_pods] = ready_s[p] if is_ready else requested_s[p]
                    n_pods += 1
                    if is_ready:
                        ready += 1
                for q in range(n_queries):
                    _evaluate_into(q, queries, store, t0_s, work, res_kind, res_n, res_keys, res_vals)
                last = metrics.last_index(scr_t, store_count[N_SCR], t0_s)
                stamp_s = scr_t[last] if last >= 0 else math.nan
                differ = False
                for a in range(n_active):
                    m = active[a]
                    poll = poll_every[m] > 0 and k % poll_every[m] == 0
                    reconcile = k % reconcile_every[m] == 0
                    if not (poll or reconcile):
                        decided = spec_replicas
                    else:
                        # The member's queries in its own order: the group's rows when they are that already.
                        m_kind, m_n, m_keys, m_vals = res_kind, res_n, res_keys, res_vals
                        if not identity[m]:
                            for slot in range(n_query[m]):
                                q = query_of[m, slot]
                                own_kind[slot] = res_kind[q]
                                own_n[slot] = res_n[q]
                                for j in range(max(res_n[q], 1)):
                                    own_keys[slot, j] = res_keys[q, j]
                                    own_vals[slot, j] = res_vals[q, j]
                            m_kind, m_n, m_keys, m_vals = own_kind, own_n, own_keys, own_vals
                        decided = decision.decide(_tables(members, m), _state(members, m), t0_s, poll, reconcile,
                                                  spec_replicas, ready, pod_ids, pod_ready, pod_start_s,
                                                  pod_transition_s, n_pods, m_kind, m_n, m_keys, m_vals, stamp_s)
                    wanted_out[m] = decided
                    if a == 0:
                        wanted = decided
                    elif decided != wanted:
                        differ = True
                if differ or wanted < 0:
                    _pause(carry, k, PHASE_AFTER_CONTROL, spec_replicas, n_events, preemptions, next_arrival)
                    return FORK

        if wanted != spec_replicas:
            events[n_events, 0] = t0_s
            events[n_events, 1] = spec_replicas
            events[n_events, 2] = wanted
            n_events += 1
            spec_replicas = wanted

        # 2. fleet (each call hands over the whole state: skipped when there is nothing to do)
        if spec_replicas != count[N_LIVE]:
            fleet.scale_to(pods, spec_replicas, t0_s, rng, warmup_kind, warmup_s, warmup_spread_s, pre_stop_s,
                           grace_s, shutdown_timeout_s, keys)
        if count[N_TERM] > 0:
            fleet.finish_terminations(pods, req, t0_s)
        if count[GW_N] > 0:
            fleet.release_gateway(pods, req, t0_s, endpoints, router)

        # 3. route (a request's per-run fields are set here, at its arrival: a resumed group finds
        # whatever an earlier run left in the entries of requests that had not arrived yet)
        first = next_arrival
        while next_arrival < n_requests and arrival_s[next_arrival] < t1_s:
            next_arrival += 1
        if next_arrival > first:
            for i in range(first, next_arrival):
                admit_s[i] = math.nan
                first_token_s[i] = math.nan
                done_s[i] = math.nan
                generated[i] = 0.0
                prefill_left_s[i] = 0.0
                preempted_n[i] = 0
            n_endpoints = _endpoints(live, count[N_LIVE], ready_s, t0_s, endpoints)
            if n_endpoints == 0 or router == fleet.ROUND_ROBIN:
                fleet.route_arrivals(pods, req, first, next_arrival, endpoints, n_endpoints, router)
            else:
                for i in range(first, next_arrival):
                    _route_least_loaded(i, endpoints, n_endpoints, run_n, wq_head, wq_tail, wq_n, replica_of,
                                        status, next_req)

        # 4. serve
        for j in range(count[N_UP]):
            p = up[j]
            if not ready_s[p] <= t0_s:
                continue
            if run_n[p] == 0 and wq_n[p] == 0:
                busy_frac[p] = 0.0  # an empty replica runs no step
                continue
            stop_s = stop_arr_s[p] if not math.isnan(stop_arr_s[p]) else math.inf
            busy_s, n_done, generated_tokens, prompt_tokens, preempted = replica.advance_replica(
                t0_s, tick_s, stop_s, p, run_b, run_n, wq_head, wq_tail, wq_n, next_req, arrival_s,
                input_tokens, output_tokens, status, admit_s, first_token_s, done_s, generated,
                prefill_left_s, preempted_n, step_table_s, max_num_seqs, kv_tokens, block_size_tokens,
                prefill_ms_per_token, replica_scratch, completed)
            if n_done < 0:
                return OUT_OF_SCRATCH
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

        # 5. scrape
        if scrape_due:
            n_scr = store_count[N_SCR]
            n_rows = store_count[N_ROWS]
            exist = store_count[N_EXIST]
            scr_t[n_scr] = t1_s
            for j in range(count[N_UP]):
                p = up[j]
                ex_pod[exist] = p
                exist += 1
                if not ready_s[p] <= t1_s:
                    continue
                smp_pod[n_rows] = p
                smp_val[n_rows, 0] = run_n[p]
                smp_val[n_rows, 1] = wq_n[p]
                smp_val[n_rows, 2] = replica.kv_usage_frac(p, run_b, run_n, input_tokens, generated,
                                                           block_size_tokens, kv_tokens)
                smp_val[n_rows, 3] = 100.0 * busy_frac[p]
                for c in range(4):
                    smp_val[n_rows, 4 + c] = counters[p, c]
                n_rows += 1
            scr_off[n_scr + 1] = n_rows
            ex_off[n_scr + 1] = exist
            store_count[N_SCR] = n_scr + 1
            store_count[N_ROWS] = n_rows
            store_count[N_EXIST] = exist

        # 6. record
        waiting = count[GW_N]
        running = 0
        for j in range(count[N_UP]):
            p = up[j]
            if ready_s[p] <= t1_s:
                waiting += wq_n[p]
                running += run_n[p]
        ready_now = _endpoints(live, count[N_LIVE], ready_s, t1_s, endpoints)
        demand_tokens = 0
        for i in range(first, next_arrival):
            demand_tokens += output_tokens[i]
        if record_signal:
            last = metrics.last_index(scr_t, store_count[N_SCR], t1_s)
            stale = last < 0 or t1_s - scr_t[last] > metrics.STALENESS_S
            for q in range(n_queries):
                # A query without a range function changes only with the scrape it reads.
                if query_has_range[q] or last != sig_k[q] or stale != sig_stale[q]:
                    sig_k[q] = last
                    sig_stale[q] = stale
                    _evaluate_into(q, queries, store, t1_s, work, sig_kind, sig_n, sig_keys, sig_vals)
            for a in range(n_active):
                m = active[a]
                q = members.signal_query[m]
                signal_out[m, k] = math.nan if q < 0 else _signal(members.signal_kind[m], q, sig_kind, sig_n,
                                                                  sig_vals)
        rec_f[k, F_T] = t1_s
        rec_f[k, F_DEMAND] = float(demand_tokens) / tick_s
        rec_f[k, F_CAPACITY] = ready_now * capacity_tps
        rec_i[k, I_RUNNING] = running
        rec_i[k, I_WAITING] = waiting
        rec_i[k, I_REQUESTED] = spec_replicas
        rec_i[k, I_READY] = ready_now
        rec_i[k, I_LIVE] = count[N_LIVE]

    if pods.count[N_TERM] > 0:
        fleet.finish_terminations(pods, req, n_ticks * tick_s)
    _pause(carry, n_ticks, PHASE_TICK_START, spec_replicas, n_events, preemptions, next_arrival)
    return DONE
