"""The compiled engine's Python side: turn a configuration into arrays, run the loop, build the Outcome.

:func:`prepare` compiles what the kernels need from an autoscaler and a
fleet (the decision tables, the queries as code, the cadences as per-tick
flags) or raises :class:`NotCompilable`, and :func:`simulate_prepared` runs one
configuration through :func:`planner.simulate.fast.engine.run`, growing the
pod and sample arrays and re-running when they were too small. The Outcome is
built with the same functions as the reference engine's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from planner.simulate import metrics as py_metrics
from planner.simulate.control import Control
from planner.simulate.fast import decision, engine, fleet, metrics
from planner.simulate.fleet import ROUND_ROBIN, FleetSpec
from planner.simulate.outcome import Outcome, count_flaps, request_latencies, slo_met
from planner.simulate.reference import _check_cadence
from planner.simulate.replica import CUT, DONE, RequestState
from planner.step_time import output_throughput_tps

__all__ = ["NotCompilable", "Prepared", "prepare", "simulate_prepared"]

TIMESERIES_COLUMNS = ["t_s", "demand_tps", "ready_capacity_tps", "running", "waiting", "replicas_requested",
                      "replicas_ready", "replicas_live", "signal"]
_WARMUP_KINDS = {"fixed": fleet.WARMUP_FIXED, "uniform": fleet.WARMUP_UNIFORM,
                 "lognormal": fleet.WARMUP_LOGNORMAL}


class NotCompilable(Exception):
    """The configuration uses something the kernels do not cover; the lockstep engine runs it."""


@dataclass(frozen=True)
class Prepared:
    """One configuration, compiled: everything :func:`planner.simulate.fast.engine.run` takes but the state."""

    spec: FleetSpec
    control: Control
    compiled_control: object
    queries: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
    n_queries: int
    signal_query: int
    signal_kind: int
    signal_has_range: bool
    initial_replicas: int
    max_replicas: int


def prepare(autoscaler, spec: FleetSpec) -> Prepared:
    """Compile a configuration for the kernels.

    Raises
    ------
    PlannerInputError
        What the reference engine refuses (an uninterpretable query, a polling
        interval that is not whole ticks), with the same message.
    NotCompilable
        What the kernels do not cover.
    """
    control = Control(autoscaler, spec.signal_map, spec.hpa_sync_period_s)
    _check_cadence(control, spec)
    try:
        compiled_control = decision.compile_control(control)
        if control.keda is not None:
            ordered = list(control.queries.items())
            parsed = [query for _, query in ordered]
            signal_query = [index for index, _ in ordered].index(min(control.queries)) if ordered else -1
            signal_kind = 0
        else:
            parsed = [query for _, query in control.metric_queries]
            signal_query = 0 if parsed else -1
            signal_kind = 1 if control.metric_queries and control.metric_queries[0][0] == "Pods" else 2
        compiled = [metrics.compile_query(query) for query in parsed]
    except (decision.NotCompilable, metrics.NotCompilable) as error:
        raise NotCompilable(str(error)) from None
    queries = _concatenate(compiled)
    initial = spec.initial_replicas if spec.initial_replicas is not None else control.min_replicas
    has_range = bool(signal_query >= 0 and compiled[signal_query].has_range)
    return Prepared(spec, control, compiled_control, queries, len(compiled), signal_query, signal_kind, has_range,
                    int(initial), int(control.max_replicas))


def _concatenate(compiled) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    # One code array and one constants array with offsets, so the loop takes any number of queries.
    codes = [c.code for c in compiled]
    consts = [c.consts for c in compiled]
    code_off = np.zeros(len(codes) + 1, dtype=np.int64)
    consts_off = np.zeros(len(consts) + 1, dtype=np.int64)
    for m, (code, const) in enumerate(zip(codes, consts, strict=True)):
        code_off[m + 1] = code_off[m] + len(code)
        consts_off[m + 1] = consts_off[m] + len(const)
    width = codes[0].shape[1] if codes else 4
    code = np.concatenate(codes) if codes else np.zeros((0, width), dtype=np.int64)
    const = np.concatenate(consts) if consts else np.zeros(0)
    return np.ascontiguousarray(code), code_off, np.ascontiguousarray(const, dtype=float), consts_off


@lru_cache(maxsize=256)
def _cadence(tick_s: float, n_ticks: int, period_s: float) -> np.ndarray:
    # Control.is_due on every tick start: round(now / tick) % max(round(period / tick), 1) == 0.
    now_s = np.arange(n_ticks) * tick_s
    ticks = np.round(now_s / tick_s).astype(np.int64)
    every = max(round(period_s / tick_s), 1)
    flags = ticks % every == 0
    flags.setflags(write=False)
    return flags


def _due(prepared: Prepared, n_ticks: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    spec, control = prepared.spec, prepared.control
    reconcile = _cadence(spec.tick_s, n_ticks, control.sync_period_s)
    if control.keda is not None:
        poll = _cadence(spec.tick_s, n_ticks, control.polling_interval_s)
    else:
        poll = np.zeros(n_ticks, dtype=bool)
    scrape_every = round(spec.scrape_interval_s / spec.tick_s)
    scrape = (np.arange(n_ticks) + 1) % scrape_every == 0
    return poll, reconcile, scrape


def initial_capacity(prepared: Prepared) -> tuple[int, int]:
    """Room made at first: pods over the whole run, and scraped pods per scrape.

    A run that needs more stops early and is repeated with four times the room
    (the same seed gives the same run), so these only set how often that happens.
    """
    return (max(64, 4 * (prepared.max_replicas + prepared.initial_replicas)), prepared.max_replicas + 4)


def simulate_prepared(prepared: Prepared, arrival_s: np.ndarray, input_tokens: np.ndarray,
                      output_tokens: np.ndarray, duration_s: float, *, timeseries: bool = True) -> Outcome:
    """Run one compiled configuration over requests that arrive before ``duration_s``.

    ``timeseries=False`` leaves the Outcome's time series empty (a sweep keeps
    only the scalar results); every other field is computed as with it.
    """
    spec = prepared.spec
    dt = spec.tick_s
    n_ticks = math.ceil(duration_s / dt - 1e-9)
    poll, reconcile, scrape = _due(prepared, n_ticks)
    n_scrapes = int(np.count_nonzero(scrape))
    n_decisions = int(np.count_nonzero(poll | reconcile))
    pod_capacity, rows_per_scrape = initial_capacity(prepared)
    replica = spec.replica
    step_table_s = np.asarray(replica._step_table_s, dtype=float)
    capacity_tps = float(output_throughput_tps(replica.max_num_seqs, replica.fixed_ms, replica.per_sequence_ms))
    while True:
        req = fleet.new_requests(arrival_s, input_tokens, output_tokens)
        pods = fleet.new_pods(pod_capacity, replica.max_num_seqs)
        store = metrics_store(n_scrapes, n_scrapes * rows_per_scrape)
        rec_f = np.empty((n_ticks, 4))
        rec_i = np.empty((n_ticks, 5), dtype=np.int64)
        events = np.empty((n_decisions + 1, 3))
        totals = np.zeros(2, dtype=np.int64)
        state = decision.new_state(prepared.compiled_control)
        code = engine.run(
            req, pods, store, np.random.default_rng(spec.seed), dt, n_ticks, poll, reconcile, scrape,
            prepared.initial_replicas, _WARMUP_KINDS[spec.warmup_distribution], float(spec.warmup_s),
            float(spec.warmup_spread_s), float(spec.pre_stop_s), float(spec.termination_grace_period_s),
            float(spec.shutdown_timeout_s), fleet.ROUND_ROBIN if spec.router == ROUND_ROBIN else fleet.LEAST_LOADED,
            step_table_s, int(replica.max_num_seqs), int(replica.kv_tokens), int(replica.block_size_tokens),
            float(replica.prefill_ms_per_token), capacity_tps,
            decision.tables(prepared.compiled_control), state, prepared.queries, prepared.n_queries,
            prepared.signal_query, prepared.signal_kind, prepared.signal_has_range,
            rec_f, rec_i, events, totals)
        if code == engine.OUT_OF_PODS:
            pod_capacity *= 4
            continue
        if code == engine.OUT_OF_SAMPLES:
            rows_per_scrape *= 4
            pod_capacity = max(pod_capacity, rows_per_scrape)
            continue
        if code < 0:
            raise NotCompilable(f"the decision kernel returned {code}")
        break
    return _outcome(req, pods, spec, events[: totals[0]], int(totals[1]), rec_f, rec_i, n_ticks * dt, timeseries)


def metrics_store(n_scrapes: int, n_rows: int):
    """Empty store arrays for ``n_scrapes`` scrapes of ``n_rows`` pod samples in all."""
    return engine.Store(
        scr_t=np.zeros(n_scrapes + 2), scr_off=np.zeros(n_scrapes + 3, dtype=np.int64),
        smp_pod=np.zeros(n_rows, dtype=np.int64), smp_val=np.zeros((n_rows, len(py_metrics.COLUMNS))),
        ex_off=np.zeros(n_scrapes + 3, dtype=np.int64), ex_pod=np.zeros(n_rows, dtype=np.int64),
        count=np.zeros(3, dtype=np.int64),
    )


def _gpu_hours(pods, spec: FleetSpec, end_s: float) -> float:
    # Fleet.gpu_hours, pod by pod in creation order.
    total_s = 0.0
    n = int(pods.count[fleet.N_PODS])
    for requested, removed in zip(pods.requested_s[:n].tolist(), pods.removed_s[:n].tolist(), strict=True):
        removed = removed if not math.isnan(removed) else end_s
        total_s += max(min(removed, end_s) - requested, 0.0)
    return total_s * spec.gpus_per_replica / 3600.0


def _outcome(req, pods, spec: FleetSpec, events: np.ndarray, preemptions: int, rec_f: np.ndarray,
             rec_i: np.ndarray, end_s: float, timeseries: bool) -> Outcome:
    # The reference's _outcome, from the kernel's arrays.
    state = RequestState(req.arrival_s, req.input_tokens, req.output_tokens)
    for name in ("status", "replica", "admit_s", "first_token_s", "done_s", "generated", "prefill_left_s",
                 "preemptions"):
        setattr(state, name, getattr(req, name))
    event_list = tuple((float(t), int(a), int(b)) for t, a, b in events.tolist())
    ttft_s, itl_ms = request_latencies(state)
    met = slo_met(state, spec.ttft_slo_s, spec.itl_slo_ms)
    gpu_hours = _gpu_hours(pods, spec, end_s)
    changes, flaps = count_flaps(event_list)
    finite_ttft = ttft_s[np.isfinite(ttft_s)]
    finite_itl = itl_ms[np.isfinite(itl_ms)]
    if timeseries:
        series = pd.DataFrame({
            "t_s": rec_f[:, engine.F_T], "demand_tps": rec_f[:, engine.F_DEMAND],
            "ready_capacity_tps": rec_f[:, engine.F_CAPACITY], "running": rec_i[:, engine.I_RUNNING],
            "waiting": rec_i[:, engine.I_WAITING], "replicas_requested": rec_i[:, engine.I_REQUESTED],
            "replicas_ready": rec_i[:, engine.I_READY], "replicas_live": rec_i[:, engine.I_LIVE],
            "signal": rec_f[:, engine.F_SIGNAL],
        }, columns=TIMESERIES_COLUMNS)
    else:
        series = pd.DataFrame(columns=TIMESERIES_COLUMNS)
    n_rows = len(rec_i)
    return Outcome(
        engine="fast",
        requests=len(state),
        completed=int(np.count_nonzero(state.status == DONE)),
        slo_attainment_frac=float(met.mean()) if len(met) else math.nan,
        ttft_p50_s=float(np.percentile(finite_ttft, 50)) if finite_ttft.size else math.nan,
        ttft_p99_s=float(np.percentile(finite_ttft, 99)) if finite_ttft.size else math.nan,
        itl_mean_ms=float(finite_itl.mean()) if finite_itl.size else math.nan,
        gpu_hours=gpu_hours,
        cost_usd=gpu_hours * spec.usd_per_gpu_hour,
        scale_events=len(event_list),
        direction_changes=changes,
        flap_cycles=flaps,
        peak_replicas=int(max(rec_i[:, engine.I_LIVE].max(), 0)) if n_rows else 0,
        peak_waiting=int(rec_i[:, engine.I_WAITING].max()) if n_rows else 0,
        cut_generations=int(np.count_nonzero(state.status == CUT)),
        preemptions=preemptions,
        events=event_list,
        timeseries=series,
        arrival_s=state.arrival_s.copy(),
        ttft_s=ttft_s,
        latency_s=state.done_s - state.arrival_s,
        slo_met=met,
    )
