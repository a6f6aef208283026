"""The compiled tick loop: :mod:`planner.simulate.reference`'s six steps, for one configuration, in numba.

Each tick, in the reference's order: control (the HPA/KEDA decision kernel,
on the ticks it is due), fleet (create or delete pods, finish terminations,
release the gateway), route, serve (the replica kernel for every pod whose
server is up and holds work), scrape (the simulated Prometheus, on scrape
ticks) and record (one row of the time series). The kernels are
:mod:`planner.simulate.fast.fleet`, :mod:`planner.simulate.fast.replica`,
:mod:`planner.simulate.fast.metrics` and :mod:`planner.simulate.fast.decision`;
each is held to its Python counterpart bit for bit by its own differential
test, and this loop to the reference engine by ``tests/test_simulate_fast.py``.

:func:`run` returns 0, or a negative code when an array ran out of room or the
decision kernel met a branch it does not cover; :mod:`planner.simulate.fast`
then re-runs with more room, or in the lockstep engine.
"""

from __future__ import annotations

import math
from collections import namedtuple

import numpy as np
from numba import njit

from planner.simulate.fast import decision, fleet, metrics, replica
from planner.simulate.fast.fleet import GW_N, N_LIVE, N_TERM, N_UP
from planner.simulate.replica import WAITING

__all__ = ["OUT_OF_EVENTS", "OUT_OF_PODS", "OUT_OF_SAMPLES", "Store", "run"]

OUT_OF_PODS = -1
OUT_OF_SAMPLES = -2
OUT_OF_EVENTS = -3
OUT_OF_SCRATCH = -4  # cannot happen: the replica scratch holds every request of the trace
# decision.decide's own negative codes pass through unchanged (below -100).

Store = namedtuple("Store", ["scr_t", "scr_off", "smp_pod", "smp_val", "ex_off", "ex_pod", "count"])
"""The scrapes so far, in the layout :func:`planner.simulate.fast.metrics.evaluate` reads (see there)."""
# Store.count slots.
N_SCR, N_ROWS, N_EXIST = 0, 1, 2
# rec_f columns (floats) and rec_i columns (counts) of the time series.
F_T, F_DEMAND, F_CAPACITY, F_SIGNAL = range(4)
I_RUNNING, I_WAITING, I_REQUESTED, I_READY, I_LIVE = range(5)


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


@njit(cache=True, nogil=True)
def _evaluate_all(queries, n_queries, store, now_s, work, res_kind, res_n, res_keys, res_vals):
    # Every trigger's (or metric's) query at now_s, into the decision kernel's result rows.
    code, code_off, consts, consts_off = queries
    for m in range(n_queries):
        kind, n = metrics.evaluate(
            code[code_off[m]:code_off[m + 1]], consts[consts_off[m]:consts_off[m + 1]],
            store.scr_t, store.count[N_SCR], store.scr_off, store.smp_pod, store.smp_val,
            store.ex_off, store.ex_pod, now_s, work, res_keys[m], res_vals[m])
        res_kind[m] = kind
        res_n[m] = n


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
def run(req, pods, store, rng, tick_s, n_ticks, poll_due, reconcile_due, scrape_due, initial_replicas,
        warmup_kind, warmup_s, warmup_spread_s, pre_stop_s, grace_s, shutdown_timeout_s, router,
        step_table_s, max_num_seqs, kv_tokens, block_size_tokens, prefill_ms_per_token, capacity_tps,
        control, control_state, queries, n_queries, signal_query, signal_kind, signal_has_range,
        rec_f, rec_i, events, totals):
    """Simulate one configuration for ``n_ticks`` ticks of ``tick_s`` seconds, in place.

    Returns 0, or a negative code (see the module docstring). ``events`` rows
    are (t_s, from, to); ``totals`` gets [scale events, preemptions].
    """
    capacity = pods.ready_s.shape[0]
    endpoints = np.empty(capacity, dtype=np.int64)
    keys = np.empty((capacity, 4), dtype=np.int64)
    n_requests = req.arrival_s.shape[0]
    scratch = replica.new_scratch(max_num_seqs, max(n_requests, 1))
    completed = np.empty(n_requests + 1, dtype=np.int64)
    work = metrics.workspace_arrays(capacity)
    res_kind = np.zeros(max(n_queries, 1), dtype=np.int64)
    res_n = np.zeros(max(n_queries, 1), dtype=np.int64)
    res_keys = np.zeros((max(n_queries, 1), capacity + 1), dtype=np.int64)
    res_vals = np.zeros((max(n_queries, 1), capacity + 1))
    sig_kind = np.zeros(1, dtype=np.int64)
    sig_n = np.zeros(1, dtype=np.int64)
    sig_keys = np.zeros((1, capacity + 1), dtype=np.int64)
    sig_vals = np.zeros((1, capacity + 1))
    pod_ids = np.empty(capacity, dtype=np.int64)
    pod_ready = np.empty(capacity, dtype=np.bool_)
    pod_start_s = np.empty(capacity)
    pod_transition_s = np.empty(capacity)
    code, code_off, consts, consts_off = queries

    for _ in range(initial_replicas):
        if fleet.add_pod(pods, 0.0, True, rng, warmup_kind, warmup_s, warmup_spread_s) < 0:
            return OUT_OF_PODS
    spec_replicas = initial_replicas
    n_events = 0
    preemptions = 0
    next_arrival = 0
    cached_k = -2
    cached_stale = False
    cached_signal = math.nan
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
    for k in range(n_ticks):
        t0_s = k * tick_s
        t1_s = (k + 1) * tick_s

        # 1. control
        if poll_due[k] or reconcile_due[k]:
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
            _evaluate_all(queries, n_queries, store, t0_s, work, res_kind, res_n, res_keys, res_vals)
            last = metrics.last_index(scr_t, store_count[N_SCR], t0_s)
            stamp_s = scr_t[last] if last >= 0 else math.nan
            wanted = decision.decide(control, control_state, t0_s, poll_due[k], reconcile_due[k],
                                     spec_replicas, ready, pod_ids, pod_ready, pod_start_s,
                                     pod_transition_s, n_pods, res_kind, res_n, res_keys, res_vals, stamp_s)
            if wanted < 0:
                return wanted
            if wanted != spec_replicas:
                if n_events >= events.shape[0]:
                    return OUT_OF_EVENTS
                events[n_events, 0] = t0_s
                events[n_events, 1] = spec_replicas
                events[n_events, 2] = wanted
                n_events += 1
                spec_replicas = wanted

        # 2. fleet (each call hands over the whole state: skipped when there is nothing to do)
        if spec_replicas != count[N_LIVE] and fleet.scale_to(
                pods, spec_replicas, t0_s, rng, warmup_kind, warmup_s, warmup_spread_s, pre_stop_s, grace_s,
                shutdown_timeout_s, keys) < 0:
            return OUT_OF_PODS
        if count[N_TERM] > 0:
            fleet.finish_terminations(pods, req, t0_s)
        if count[GW_N] > 0:
            fleet.release_gateway(pods, req, t0_s, endpoints, router)

        # 3. route
        first = next_arrival
        while next_arrival < n_requests and arrival_s[next_arrival] < t1_s:
            next_arrival += 1
        if next_arrival > first:
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
                prefill_ms_per_token, scratch, completed)
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
        if scrape_due[k]:
            n_scr = store_count[N_SCR]
            if n_scr + 1 >= scr_t.shape[0]:
                return OUT_OF_SAMPLES
            rows = store_count[N_ROWS]
            exist = store_count[N_EXIST]
            if rows + count[N_UP] > smp_pod.shape[0] or exist + count[N_UP] > ex_pod.shape[0]:
                return OUT_OF_SAMPLES
            scr_t[n_scr] = t1_s
            for j in range(count[N_UP]):
                p = up[j]
                ex_pod[exist] = p
                exist += 1
                if not ready_s[p] <= t1_s:
                    continue
                smp_pod[rows] = p
                smp_val[rows, 0] = run_n[p]
                smp_val[rows, 1] = wq_n[p]
                smp_val[rows, 2] = replica.kv_usage_frac(p, run_b, run_n, input_tokens, generated,
                                                         block_size_tokens, kv_tokens)
                smp_val[rows, 3] = 100.0 * busy_frac[p]
                for c in range(4):
                    smp_val[rows, 4 + c] = counters[p, c]
                rows += 1
            scr_off[n_scr + 1] = rows
            ex_off[n_scr + 1] = exist
            store_count[N_SCR] = n_scr + 1
            store_count[N_ROWS] = rows
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
        if signal_query >= 0:
            if signal_has_range:
                recompute = True
            else:
                last = metrics.last_index(scr_t, store_count[N_SCR], t1_s)
                stale = last < 0 or t1_s - scr_t[last] > metrics.STALENESS_S
                recompute = last != cached_k or stale != cached_stale
                cached_k = last
                cached_stale = stale
            if recompute:
                m = signal_query
                kind, n = metrics.evaluate(
                    code[code_off[m]:code_off[m + 1]], consts[consts_off[m]:consts_off[m + 1]],
                    scr_t, store_count[N_SCR], scr_off, smp_pod, smp_val, ex_off, ex_pod, t1_s, work,
                    sig_keys[0], sig_vals[0])
                sig_kind[0] = kind
                sig_n[0] = n
                cached_signal = _signal(signal_kind, 0, sig_kind, sig_n, sig_vals)
        rec_f[k, F_T] = t1_s
        rec_f[k, F_DEMAND] = float(demand_tokens) / tick_s
        rec_f[k, F_CAPACITY] = ready_now * capacity_tps
        rec_f[k, F_SIGNAL] = cached_signal
        rec_i[k, I_RUNNING] = running
        rec_i[k, I_WAITING] = waiting
        rec_i[k, I_REQUESTED] = spec_replicas
        rec_i[k, I_READY] = ready_now
        rec_i[k, I_LIVE] = count[N_LIVE]

    if pods.count[N_TERM] > 0:
        fleet.finish_terminations(pods, req, n_ticks * tick_s)
    totals[0] = n_events
    totals[1] = preemptions
    return 0
