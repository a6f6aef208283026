"""The ``oracle`` module bounds from below what any autoscaler can cost on a trace: the oracle.

Two bounds, each a lower bound on the simulator's own cost (:mod:`planner.simulate.reference`,
and the ``fast`` engine, which computes the same) for every autoscaler, every setting and every
initial fleet, among runs that reach an attainment goal on the same trace and fleet:

* **instant** (bound a): replicas appear the moment they are wanted and go the moment they are
  not, with perfect foresight of the traffic;
* **cold start** (bound b): perfect foresight, but a pod is billed from its request, at least its
  shortest possible cold start before it is Ready (replicas are requested ahead of need).

How they are computed, and why each is a lower bound
----------------------------------------------------
Write ``S(t)`` for the pods serving at time ``t`` and ``N(t) >= S(t)`` for the pods billed; the
run's GPU-seconds are ``gpus_per_replica x integral of N``. A request that meets its objective
(:mod:`planner.simulate.outcome`: a first token within ``ttft_slo_s``, not cut, and with an ITL
objective a finish within it) leaves these traces in every run, whatever the autoscaler:

1. It is admitted (``admit_s``) no earlier than its arrival ``a`` and, since its first token comes
   at least its prefill ``p`` plus one step at batch 1 (``s1 = step(1)``) later, no later than
   ``L = a + ttft_slo_s - p - s1`` (a microsecond later, for float error). A request with ``L < a``
   can never meet its objective; nor can one of two tokens or more whose ITL objective is below ``s1``.
2. From admission to its last token it is **held** by one pod, running or (preempted) waiting at
   the head of that pod's queue. A pod holds at most ``max_num_seqs`` such requests at every instant
   (it admits a new request only into a free slot, and only when no preempted one waits ahead of
   it). Holding it for its prefill and ``output_tokens`` steps takes at least ``d = p + o x s1``.
3. While it runs it keeps its prompt's KV blocks, ``F = blocks(input_tokens)``; the running batch of
   one pod holds at most ``kv_tokens`` of them at every instant (admission and preemption keep the
   engine's count, which is at least this, under the cache), but a single prompt larger than the
   cache, which runs alone: count ``min(F, kv_tokens)``.
4. It needs ``o`` tokens. One pod serving one tick of ``dt`` seconds emits at most
   ``kappa x dt`` tokens (:func:`token_capacity_tps`, proved there from the engine's tick).
5. A request may instead still be unfinished when the run ends (it meets a TTFT-only objective):
   then it is held from ``L`` at the latest to the end, and it has made its first token.

So with weights ``(h, t, k) >= 0`` summing to 1, every billed second pays at most 1 of
``h x held/max_num_seqs + t x tokens/kappa + k x KV/kv_tokens``; each met request needs at least
``c = min(h d/m + t o/kappa + k F d/kv, h (end - L)/m + t/kappa + k F (p + s1)/kv)`` of it (the
second term: unfinished at the end), and the sum of ``c`` over the met requests is a lower bound
on the serving pod-seconds. A goal allows ``K`` requests to miss; the cheapest run lets the ``K``
largest ``c`` miss, so the bound sums the others. Each weight gives a valid bound; the oracle takes
the largest of a few (with an ITL objective every met request finishes, so weights without held
time are among them). That is bound (a).

For bound (b), time is cut into windows of :data:`ORACLE_WINDOW_S` (whole ticks, as ``kappa`` counts
whole ticks). In window ``J``,
``integral_J N >= V_J``, the same sum over requests arriving in ``J`` with the end of the window in
place of the end of the run (a request may carry its work into the next window; then it is held to
this window's end). And the pod that admits a met request existed through
``[L - w, a + d)``: serving at its admission, it was requested at least its cold start ``w``
before (or it was up at time 0, billed from 0), and it is billed until the request finishes. So
``integral_J N >= C_J``, the whole ticks in ``J`` that such intervals cover, and the window costs at
least ``max(V_J, C_J)``. This keeps one replica through every lull shorter than a cold start, as a fleet
must that has to answer the next request in time. With ``K`` misses, a window where ``V_J`` is the
larger loses at most the charges of the requests missed there, and one where ``C_J`` is, at most the
seconds uncovered; an uncovered second needs every request covering it missed, so, counting how
many requests cover each second, ``K`` misses uncover at most the least-covered seconds whose counts
sum to the ``K`` largest numbers of seconds one request covers. Bound (b) is the larger of (a) and
this sum.

The least peak: a window of ``T`` seconds whose pod-seconds exceed ``(k - 1) T`` has ``k`` pods
serving at some moment, so ``k`` is forced when bringing every window under that takes more misses
than the goal allows.

Node pools
----------
With ``nodes:``, nodes are billed. A node holds ``pods_per_node`` pods, so its seconds are at least
the pods' over ``pods_per_node``; and a node serving at ``t`` was requested at least
``provision + node_init + image_pull + weights_load + warmup`` (its shortest draws) before, unless
it was up at time 0: the first pod Ready on a new node pulled the image there. Bound (b) uses that
node cold start for the intervals above, and prices node-seconds at the node's price
(``usd_per_node_hour / pods_per_node`` per pod-hour). It leaves out the node autoscaler's reaction
time (nothing is billed while pods are Pending), empty nodes kept before removal, placeholders,
capacity failures and the packing of pods onto nodes beyond ``pods_per_node``: each only adds cost.

What the bounds leave out (why they are below any run, often well below)
-------------------------------------------------------------------------
* the step time: every token is priced at the best batch the engine's tick can credit, and every
  held second at batch 1;
* burstiness within a window, and the cold start of any replica beyond the first (a burst that
  needs a second replica for a minute costs that minute, not a cold start);
* the margin a controller needs to see load before it acts (targets, stabilization windows,
  scrape and polling delays): perfect foresight has none.

One exception to the engine's accounting is handled, not ignored: a pod that finishes draining
inside a tick is billed to that moment, yet its last tick is counted whole by ``kappa``. When the
fleet can drain (``pre_stop_s`` or ``shutdown_timeout_s`` above 0), a pod's uncounted part of a tick
is paid by its cold start if that is at least a tick (initial pods: by not counting tokens of the
first tick); the windows then count held time and KV only, and with a shorter cold start tokens are
not counted at all.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from planner.dynamics.cold_start import pods_per_node
from planner.errors import PlannerInputError
from planner.simulate.fleet import FleetSpec
from planner.simulate.reference import DRAIN_TAIL_S
from planner.simulate.replica import ReplicaSpec
from planner.simulate.traffic import RequestTrace

__all__ = [
    "ORACLE_WINDOW_S",
    "OracleBound",
    "OracleCost",
    "OracleCurve",
    "how_computed_text",
    "missed_at",
    "oracle_bound",
    "oracle_curve",
    "regret_usd",
    "shortest_cold_start_s",
    "token_capacity_tps",
]

ORACLE_WINDOW_S = 900.0
"""Length of the windows bound (b) is summed over (rounded to whole ticks). [s]

Shorter windows follow the traffic's shape more closely but lose more of the work a request can
carry past a window's end; 15 minutes keeps that loss to a few per cent on the Azure traces.
"""
# Slack on the TTFT comparison (the outcome's own is 1e-9 s) and on float sums of times. [s]
_TIME_TOL_S = 1e-6
# Relative slack on kappa: the engine's float arithmetic reaches the bound exactly.
_KAPPA_TOL_FRAC = 1e-9
# Weights (held, tokens, KV) tried; each gives a valid bound and the largest is kept. A small weight on
# held time prices the option of leaving a request unfinished at a window's end.
_HELD_WEIGHTS = (0.02, 0.05, 0.1, 0.2, 0.35, 0.5)
_SECONDS_PER_HOUR = 3600.0


def token_capacity_tps(replica: ReplicaSpec) -> float:
    """Most output tokens one pod can emit per second of a tick, in the simulator's own accounting. [tokens/s]

    The engine (:func:`planner.simulate.replica.advance_replica`) fixes one step time per tick,
    ``step(b)`` for the batch ``b = round(A / B)`` of ``_tick_batch`` (clamped to 1 to
    ``max_num_seqs``), where ``A`` sums the estimated busy time of each sequence in the tick
    (running ones at ``step(L)``, ``L`` the running batch; queued ones from their arrival) and ``B``
    is the largest. Every sequence then emits one token per ``step(b)`` while in the batch, and at
    most ``max_num_seqs`` are in it at once. Over a tick of ``span`` seconds:

    * if ``b <= L`` (or nothing ran at the tick start), no sequence runs longer than estimated, so
      tokens ``<= A / step(b) <= (b + 1/2) span / step(b)``;
    * if ``b > L``, the ``L`` running sequences run slower than estimated: one whose estimate is
      ``x`` emits at most ``min(x / step(L), span / step(b))``; with ``A <= (b + 1/2) span`` that is
      at most ``(b + 1/2 + L (b - L) per_sequence_ms / (fixed_ms + per_sequence_ms b)) span / step(b)``,
      largest at ``L (b - L) = floor(b^2 / 4)``;
    * and never more than ``max_num_seqs x span / step(b)`` (the slots), which also covers a
      clamped ``b = max_num_seqs``.

    The capacity is the largest of these over ``b``: a little above
    ``max_num_seqs / step(max_num_seqs)``, the replica's true full-batch rate, because the tick's
    averaged batch can undercount a batch that changes within the tick.

    Parameters
    ----------
    replica : ReplicaSpec

    Returns
    -------
    float
        [tokens/s]
    """
    f, p, m = replica.fixed_ms, replica.per_sequence_ms, replica.max_num_seqs
    batch = np.arange(1, m + 1, dtype=float)
    step_ms = f + p * batch
    counted = np.minimum(m, batch + 0.5 + p * np.floor(batch * batch / 4.0) / step_ms)
    return float(np.max(counted / (step_ms / 1000.0)))


def shortest_cold_start_s(fleet: FleetSpec) -> tuple[float, float | None]:
    """A pod's and (with a node pool) a new node's shortest request-to-Ready time. [s]

    The pod's: the least warmup the fleet's draw can give (``fixed``: ``warmup_s``; ``uniform``:
    ``warmup_s - warmup_spread_s``, not below 0; ``lognormal`` with a spread: 0), plus
    ``weights_load_s`` with a node pool (the image may be on the node already). The node's: its
    least provisioning draw, ``node_init_s``, the image pull (a new node has no image) and the
    pod's.

    Returns
    -------
    (float, float or None)
        Pod, node (``None`` without ``nodes:``). [s]
    """
    warmup_s = _least_draw_s(fleet.warmup_distribution, fleet.warmup_s, fleet.warmup_spread_s)
    nodes = fleet.nodes
    if nodes is None:
        return warmup_s, None
    pod_s = fleet.weights_load_s + warmup_s
    provision_s = _least_draw_s(nodes.provision_distribution, nodes.provision_s, nodes.provision_spread_s)
    return pod_s, provision_s + nodes.node_init_s + fleet.image_pull_s + pod_s


def _least_draw_s(distribution: str, median_s: float, spread_s: float) -> float:
    # The infimum of planner.simulate.supply.draw_duration_s's draws.
    if distribution == "uniform":
        return max(median_s - spread_s, 0.0)
    if distribution == "lognormal" and spread_s > 0 and median_s > 0:
        return 0.0
    return float(median_s)


@dataclass(frozen=True)
class OracleCost:
    """One bound at one goal.

    Attributes
    ----------
    gpu_hours : float
        GPU-hours of the pods (inf when no run can reach the goal). [GPU-h]
    cost_usd : float
        Their price, per node with a node pool. [$]
    peak_replicas : int
        Replicas that some moment must have at least.
    """

    gpu_hours: float
    cost_usd: float
    peak_replicas: int

    def summary(self) -> dict:
        return {"gpu_hours": self.gpu_hours, "cost_usd": self.cost_usd, "peak_replicas": self.peak_replicas}


@dataclass(frozen=True)
class OracleBound:
    """The oracle at one attainment goal.

    Attributes
    ----------
    attainment_goal_frac : float
        [fraction]
    requests : int
        Requests in the simulated window.
    missed_requests : int
        Most requests that may miss their objective at the goal.
    impossible_requests : int
        Requests no run can serve in time (their prefill and one step exceed the TTFT objective,
        or one step the ITL objective).
    instant, cold_start : OracleCost
        Bounds (a) and (b).
    cold_start_s : float
        The pod's shortest cold start bound (b) uses. [s]
    node_cold_start_s : float or None
        A new node's, with a node pool. [s]
    token_capacity_tps : float
        Most tokens a pod emits per second of a tick (:func:`token_capacity_tps`). [tokens/s]
    tokens_counted : bool
        Whether bound (a) counts tokens (not when pods can drain inside a tick and start in less than one).
    window_s : float
        Bound (b)'s window. [s]
    profile_t_s, profile_replicas : numpy.ndarray
        Bound (b)'s windows with every request met: start of each, and the replicas it needs on
        average. [s], [replicas]
    """

    attainment_goal_frac: float
    requests: int
    missed_requests: int
    impossible_requests: int
    instant: OracleCost
    cold_start: OracleCost
    cold_start_s: float
    node_cold_start_s: float | None = None
    token_capacity_tps: float = math.nan
    tokens_counted: bool = True
    window_s: float = ORACLE_WINDOW_S
    profile_t_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    profile_replicas: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def reachable(self) -> bool:
        """Whether some run could meet the goal at all."""
        return self.missed_requests >= self.impossible_requests

    def summary(self) -> dict:
        """The scalar results, for JSON (inf becomes null there)."""
        return {
            "attainment_goal_frac": self.attainment_goal_frac,
            "requests": self.requests,
            "missed_requests": self.missed_requests,
            "impossible_requests": self.impossible_requests,
            "reachable": self.reachable,
            "instant": self.instant.summary(),
            "cold_start": self.cold_start.summary()
            | {"cold_start_s": self.cold_start_s}
            | ({} if self.node_cold_start_s is None else {"node_cold_start_s": self.node_cold_start_s}),
        }


@dataclass(frozen=True)
class OracleCurve:
    """The oracle at many attainments: both bounds as functions of the requests allowed to miss.

    Attributes
    ----------
    requests : int
    impossible_requests : int
    missed_requests : numpy.ndarray of int
        Ascending numbers of requests allowed to miss.
    instant_gpu_hours, instant_cost_usd, cold_start_gpu_hours, cold_start_cost_usd : numpy.ndarray
        The bounds there (inf where fewer may miss than must). [GPU-h], [$]
    """

    requests: int
    impossible_requests: int
    missed_requests: np.ndarray
    instant_gpu_hours: np.ndarray
    instant_cost_usd: np.ndarray
    cold_start_gpu_hours: np.ndarray
    cold_start_cost_usd: np.ndarray

    @property
    def attainment_frac(self) -> np.ndarray:
        """The attainment each entry stands for. [fraction]"""
        return 1.0 - self.missed_requests / self.requests

    def _position(self, attainment_frac: float) -> int:
        # Fewer met requests never raise the bound, so the nearest entry allowing at least as many misses
        # is a valid (lower) answer.
        allowed = missed_at(attainment_frac, self.requests)
        position = int(np.searchsorted(self.missed_requests, allowed, side="left"))
        if position >= len(self.missed_requests):
            raise PlannerInputError(
                f"oracle: attainment {attainment_frac!r} allows {allowed} misses, more than this curve covers "
                f"({int(self.missed_requests[-1])})"
            )
        return position

    def cold_start_cost_usd_at(self, attainment_frac: float) -> float:
        """Bound (b) at an attainment. [$]"""
        return float(self.cold_start_cost_usd[self._position(attainment_frac)])

    def instant_cost_usd_at(self, attainment_frac: float) -> float:
        """Bound (a) at an attainment. [$]"""
        return float(self.instant_cost_usd[self._position(attainment_frac)])


def missed_at(attainment_goal_frac: float, requests: int) -> int:
    """The most requests that may miss when ``attainment_goal_frac`` of ``requests`` must meet the objective."""
    if not (math.isfinite(attainment_goal_frac) and 0.0 <= attainment_goal_frac <= 1.0):
        raise PlannerInputError(f"attainment goal: expected a fraction between 0 and 1, got {attainment_goal_frac!r}")
    # Rounded towards more misses, so float error can only lower the bound.
    return min(requests, math.floor((1.0 - attainment_goal_frac) * requests + 1e-6))


@dataclass(frozen=True)
class _Requests:
    """The requests that some run could serve in time, and what each needs (units in the names)."""

    arrival_s: np.ndarray
    latest_admit_s: np.ndarray
    prefill_s: np.ndarray
    output_tokens: np.ndarray
    held_s: np.ndarray
    kv_tokens: np.ndarray
    requests: int
    impossible: int
    end_s: float


@dataclass(frozen=True)
class _Setting:
    """What the bounds read from the fleet."""

    slots: int
    kv_tokens: int
    step_1_s: float
    kappa_tps: float
    ttft_slo_s: float
    must_finish: bool
    tick_s: float
    tokens: str  # "all", "after_first_tick" or "none"
    window_tokens: bool


def _setting(fleet: FleetSpec) -> _Setting:
    spec = fleet.replica
    pod_cold_start_s, _ = shortest_cold_start_s(fleet)
    drains = fleet.pre_stop_s > 0 or fleet.shutdown_timeout_s > 0
    if not drains:
        tokens = "all"
    elif pod_cold_start_s >= fleet.tick_s:
        tokens = "after_first_tick"
    else:
        tokens = "none"
    return _Setting(
        slots=spec.max_num_seqs,
        kv_tokens=spec.kv_tokens,
        step_1_s=spec.step_s(1),
        kappa_tps=token_capacity_tps(spec) * (1.0 + _KAPPA_TOL_FRAC),
        ttft_slo_s=fleet.ttft_slo_s,
        must_finish=fleet.itl_slo_ms is not None,
        tick_s=fleet.tick_s,
        tokens=tokens,
        window_tokens=not drains,
    )


def _requests(trace: RequestTrace, fleet: FleetSpec, duration_s: float | None) -> _Requests:
    if len(trace) == 0:
        raise PlannerInputError(f"{trace.source or 'trace'}: the trace has no requests")
    if duration_s is None:
        duration_s = math.ceil(trace.duration_s) + DRAIN_TAIL_S
    if not (math.isfinite(duration_s) and duration_s > 0):
        raise PlannerInputError(f"duration_s: expected a finite number > 0, got {duration_s!r}")
    tick_s = fleet.tick_s
    end_s = math.ceil(duration_s / tick_s - 1e-9) * tick_s  # the engines' last tick end
    arrival_s = np.asarray(trace.arrival_s, dtype=float)
    keep = arrival_s < duration_s
    arrival_s = arrival_s[keep]
    if len(arrival_s) == 0:
        where = trace.source or "the trace"
        raise PlannerInputError(f"duration_s: no request of {where} arrives before {duration_s:g} s")
    input_tokens = np.asarray(trace.input_tokens)[keep].astype(float)
    output_tokens = np.asarray(trace.output_tokens)[keep].astype(float)
    spec = fleet.replica
    step_1_s = spec.step_s(1)
    prefill_s = input_tokens * spec.prefill_ms_per_token / 1000.0
    latest_admit_s = arrival_s + fleet.ttft_slo_s + _TIME_TOL_S - prefill_s - step_1_s
    possible = latest_admit_s >= arrival_s
    if fleet.itl_slo_ms is not None and step_1_s * 1000.0 > fleet.itl_slo_ms + _TIME_TOL_S:
        possible &= output_tokens < 2
    block = spec.block_size_tokens
    kv_tokens = np.minimum(np.ceil(input_tokens / block) * block, spec.kv_tokens)
    return _Requests(
        arrival_s=arrival_s[possible],
        latest_admit_s=latest_admit_s[possible],
        prefill_s=prefill_s[possible],
        output_tokens=output_tokens[possible],
        held_s=(prefill_s + output_tokens * step_1_s)[possible],
        kv_tokens=kv_tokens[possible],
        requests=len(arrival_s),
        impossible=int(np.count_nonzero(~possible)),
        end_s=float(end_s),
    )


@dataclass(frozen=True)
class _Parts:
    """Each request's least use of held time, tokens and KV, finished by ``until_s`` or not (in resource units).

    A weight's charge is a linear mix of these (:meth:`charges`); computed once per set of window ends.
    """

    finished: np.ndarray  # (3, n): held/slots, tokens/kappa, KV/kv_tokens, if it finishes [s]
    unfinished: np.ndarray  # (3, n): the same if it is still held at until_s [s]
    may_stay: np.ndarray  # bool (n,): whether it may be unfinished then and still meet its objective
    _known: dict = field(default_factory=dict, compare=False, repr=False)

    def charges(self, weights: tuple[float, float, float]) -> np.ndarray:
        """Each request's least use of the weighted resource (computed once per weight). [s]"""
        if weights not in self._known:
            finished = _mix(weights, self.finished)
            self._known[weights] = np.where(
                self.may_stay, np.minimum(finished, _mix(weights, self.unfinished)), finished
            )
        return self._known[weights]


def _mix(weights: tuple[float, float, float], rows: np.ndarray) -> np.ndarray:
    total = np.zeros(rows.shape[1])
    for weight, row in zip(weights, rows, strict=True):
        if weight:
            total += weight * row
    return total


def _parts(req: _Requests, s: _Setting, until_s: np.ndarray) -> _Parts:
    tokens = req.output_tokens
    first = np.ones_like(tokens)
    if s.tokens == "after_first_tick":
        # Tokens of the first tick are not counted (initial pods may drain inside a tick): at most
        # one per step from the arrival to the tick's end.
        early = np.maximum(s.tick_s - req.arrival_s, 0.0) / s.step_1_s
        tokens = np.maximum(tokens - early, 0.0)
        first = np.maximum(first - early, 0.0)
    finished = np.stack([req.held_s / s.slots, tokens / s.kappa_tps, req.kv_tokens * req.held_s / s.kv_tokens])
    to_first_s = req.prefill_s + s.step_1_s
    has_first = (req.arrival_s + s.ttft_slo_s + _TIME_TOL_S <= until_s) | (until_s >= req.end_s)
    held_s = np.maximum(until_s - req.latest_admit_s, 0.0)
    held_s = np.where(has_first, np.maximum(held_s, to_first_s), held_s)
    unfinished = np.stack(
        [
            held_s / s.slots,
            np.where(has_first, first / s.kappa_tps, 0.0),
            np.where(has_first, req.kv_tokens * to_first_s / s.kv_tokens, 0.0),
        ]
    )
    return _Parts(finished, unfinished, ~(s.must_finish & (until_s >= req.end_s)))


def _weights(s: _Setting, windowed: bool) -> list[tuple[float, float, float]]:
    tokens = s.window_tokens if windowed else s.tokens != "none"
    # Without weight on held time, leaving requests unfinished would cost nearly nothing; with an ITL
    # objective every met request finishes, and then the pure weights are the sharpest.
    held_weights = ((0.0,) if s.must_finish and not windowed else ()) + _HELD_WEIGHTS
    weights = [(1.0, 0.0, 0.0)]
    for held in held_weights:
        weights.append((held, 0.0, 1.0 - held))
        if tokens:
            weights.append((held, 1.0 - held, 0.0))
    return weights


@dataclass(frozen=True)
class _Coverage:
    """Whole ticks ("slots") inside each request's interval of a surely existing pod."""

    first_slot: np.ndarray
    last_slot: np.ndarray
    count: np.ndarray  # requests covering each slot
    slot_s: float

    @property
    def empty(self) -> bool:
        return not bool(np.any(self.count))


def _coverage(req: _Requests, cold_start_s: float, slot_s: float) -> _Coverage:
    # The pod that admits a met request existed from cold_start_s before its latest admission (or from 0)
    # until the request's earliest finish (or the end).
    start_s = np.maximum(req.latest_admit_s - cold_start_s, 0.0)
    stop_s = np.minimum(req.arrival_s + req.held_s, req.end_s)
    n_slots = round(req.end_s / slot_s)
    # Only slots wholly inside: rounding inwards can only lose coverage.
    first = np.minimum(np.ceil(start_s / slot_s), n_slots).astype(np.int64)
    last = np.minimum(np.floor(stop_s / slot_s), n_slots).astype(np.int64)
    last = np.maximum(last, first)
    diff = np.bincount(first, minlength=n_slots + 1) - np.bincount(last, minlength=n_slots + 1)
    return _Coverage(first, last, np.cumsum(diff)[:n_slots], slot_s)


@dataclass(frozen=True)
class _Windows:
    """Bound (b)'s windows: each request's window and the window ends its charges are counted to."""

    length_s: float
    count: int
    of_request: np.ndarray
    span_s: np.ndarray
    parts: _Parts


def _windows(req: _Requests, s: _Setting, window_s: float) -> _Windows:
    slots = max(1, round(window_s / s.tick_s))
    n_slots = round(req.end_s / s.tick_s)
    slots = min(slots, n_slots)
    length_s = slots * s.tick_s
    count = -(-n_slots // slots)
    window = np.minimum((req.arrival_s // length_s).astype(np.int64), count - 1)
    start_s = np.arange(count) * length_s
    span_s = np.minimum(start_s + length_s, req.end_s) - start_s
    until_s = np.minimum((window + 1) * length_s, req.end_s)
    return _Windows(length_s, count, window, span_s, _parts(req, s, until_s))


def _windowed_seconds(
    windows: _Windows,
    weights: tuple[float, float, float],
    cover: _Coverage,
    scale: float,
    missed: np.ndarray,
) -> np.ndarray:
    """Sum over windows of max(volume, coverage), less what ``missed`` misses can take away. [s]"""
    window_slots = round(windows.length_s / cover.slot_s)
    n_slots = len(cover.count)
    n_windows = windows.count
    window = windows.of_request
    charge = windows.parts.charges(weights) * scale
    volume = np.bincount(window, weights=charge, minlength=n_windows)
    covered = cover.count > 0
    slot_window = np.arange(n_slots) // window_slots
    coverage = np.bincount(slot_window, weights=covered, minlength=n_windows) * cover.slot_s
    by_volume = volume >= coverage
    base = float(np.maximum(volume, coverage).sum())
    # In a window where volume is the larger, misses take away at most their charges; elsewhere at most
    # the coverage they uncover (see the module docstring).
    most = int(missed.max(initial=0))  # no more misses than this are asked about
    lost_volume = _largest_first_sums(charge[by_volume[window]], most)
    counted = covered & ~by_volume[slot_window]
    cum_counted = np.concatenate([[0], np.cumsum(counted)])
    reach = cum_counted[cover.last_slot] - cum_counted[cover.first_slot]
    budget = _largest_first_sums(reach, most)
    cheapest = np.cumsum(np.sort(cover.count[counted]))
    k = np.minimum(missed, len(lost_volume) - 1)
    uncovered = np.searchsorted(cheapest, budget[np.minimum(missed, len(budget) - 1)], side="right")
    return np.maximum(base - lost_volume[k] - uncovered * cover.slot_s, 0.0)


def _largest_first_sums(values: np.ndarray, count: int) -> np.ndarray:
    """0, then the running sums of the ``count`` largest ``values``, largest first.

    The first ``count + 1`` entries of the running sums of all the values sorted in descending order, bit
    for bit (the same values, added in the same order), found by partitioning when ``count`` is a small
    share of them: at a goal of 99 % only the largest 1 % are needed.
    """
    count = min(count, len(values))
    if 0 < count < len(values) // 4:
        values = np.partition(values, len(values) - count)[len(values) - count :]
    running = np.cumsum(np.sort(values)[::-1])[:count]
    return np.concatenate([np.zeros(1, dtype=running.dtype), running])


def _global_seconds(parts: _Parts, weights, scale: float, missed: np.ndarray) -> np.ndarray:
    charge = parts.charges(weights) * scale
    kept = np.concatenate([[0.0], np.cumsum(np.sort(charge))])  # the cheapest requests met
    met = np.clip(len(charge) - missed, 0, len(charge))
    return kept[met]


def _bound_seconds(
    req: _Requests,
    s: _Setting,
    windows: _Windows,
    cold_start_s: float,
    scale: float,
    missed: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Bounds (a) and (b) in serving seconds (of pods, or of nodes with ``scale = 1 / pods_per_node``)."""
    whole = _parts(req, s, np.full(len(req.arrival_s), req.end_s))
    instant = np.zeros(len(missed))
    for weights in _weights(s, windowed=False):
        instant = np.maximum(instant, _global_seconds(whole, weights, scale, missed))
    sure = _coverage(req, 0.0, s.tick_s)
    if not sure.empty:
        for weights in _weights(s, windowed=True):
            instant = np.maximum(instant, _windowed_seconds(windows, weights, sure, scale, missed))
    cold = instant.copy()
    if cold_start_s > 0:
        cover = _coverage(req, cold_start_s, s.tick_s)
        for weights in _weights(s, windowed=True):
            cold = np.maximum(cold, _windowed_seconds(windows, weights, cover, scale, missed))
    return instant, cold


def oracle_curve(
    trace: RequestTrace,
    fleet: FleetSpec | None = None,
    *,
    duration_s: float | None = None,
    missed_requests: Sequence[int] | np.ndarray | None = None,
    window_s: float = ORACLE_WINDOW_S,
) -> OracleCurve:
    """Bounds (a) and (b) for many numbers of requests allowed to miss (see the module docstring).

    Parameters
    ----------
    trace : RequestTrace
    fleet : FleetSpec, optional
        The replica, objectives, cold start and prices (default :class:`FleetSpec`).
    duration_s : float, optional
        Simulated time, as :func:`planner.simulate.simulate` takes it. [s]
    missed_requests : sequence of int, optional
        Where to evaluate: numbers of requests allowed to miss. Default: every attainment step of
        0.1 % from 0 to 100 % misses.
    window_s : float
        Bound (b)'s window. [s]

    Returns
    -------
    OracleCurve
    """
    fleet = fleet or FleetSpec()
    req = _requests(trace, fleet, duration_s)
    if missed_requests is None:
        missed = np.unique(np.floor(np.linspace(0.0, 1.0, 1001) * req.requests + 1e-6).astype(np.int64))
    else:
        missed = np.unique(np.asarray(missed_requests, dtype=np.int64))
        if missed.size == 0 or missed[0] < 0 or missed[-1] > req.requests:
            raise PlannerInputError(f"missed_requests: expected whole numbers from 0 to {req.requests}")
    return _curve(req, fleet, missed, _windows(req, _setting(fleet), window_s))


def _curve(req: _Requests, fleet: FleetSpec, missed: np.ndarray, windows: _Windows) -> OracleCurve:
    s = _setting(fleet)
    beyond = missed - req.impossible  # misses left after the requests nobody can serve
    usable = np.maximum(beyond, 0)
    pod_cold_s, node_cold_s = shortest_cold_start_s(fleet)
    pod_a, pod_b = _bound_seconds(req, s, windows, pod_cold_s, 1.0, usable)
    gpus = fleet.gpus_per_replica
    if fleet.nodes is None or node_cold_s is None:
        per_second = gpus * fleet.usd_per_gpu_hour / _SECONDS_PER_HOUR
        cost_a, cost_b = pod_a * per_second, pod_b * per_second
    else:
        per_node = pods_per_node(fleet.nodes.gpus_per_node, gpus)
        node_a, node_b = _bound_seconds(req, s, windows, node_cold_s, 1.0 / per_node, usable)
        price = fleet.nodes.node_price_usd_per_hour(fleet.usd_per_gpu_hour) / _SECONDS_PER_HOUR
        cost_a, cost_b = node_a * price, node_b * price
    unreachable = beyond < 0
    hours = gpus / _SECONDS_PER_HOUR

    def mark(values: np.ndarray) -> np.ndarray:
        return np.where(unreachable, np.inf, values)

    return OracleCurve(
        requests=req.requests,
        impossible_requests=req.impossible,
        missed_requests=missed,
        instant_gpu_hours=mark(pod_a * hours),
        instant_cost_usd=mark(cost_a),
        cold_start_gpu_hours=mark(pod_b * hours),
        cold_start_cost_usd=mark(cost_b),
    )


def oracle_bound(
    trace: RequestTrace,
    fleet: FleetSpec | None = None,
    attainment_goal_frac: float = 0.99,
    *,
    duration_s: float | None = None,
    window_s: float = ORACLE_WINDOW_S,
) -> OracleBound:
    """Bounds (a) and (b) at one goal, with the least peak and bound (b)'s profile.

    Parameters
    ----------
    trace : RequestTrace
    fleet : FleetSpec, optional
    attainment_goal_frac : float
        Share of requests that must meet the objective. [fraction]
    duration_s : float, optional
        Simulated time, as :func:`planner.simulate.simulate` takes it. [s]
    window_s : float
        Bound (b)'s window. [s]

    Returns
    -------
    OracleBound
    """
    fleet = fleet or FleetSpec()
    req = _requests(trace, fleet, duration_s)
    missed = missed_at(attainment_goal_frac, req.requests)
    s = _setting(fleet)
    # One set of windows (and the requests' charges it keeps) for the curve, the peak and the profile.
    windows = _windows(req, s, window_s)
    curve = _curve(req, fleet, np.array([missed]), windows)
    usable = missed - req.impossible
    peak = _peak_replicas(windows, _weights(s, windowed=True), usable) if usable >= 0 else 0
    pod_cold_s, node_cold_s = shortest_cold_start_s(fleet)
    profile_t_s, profile_replicas = _profile(req, s, windows, pod_cold_s)
    return OracleBound(
        attainment_goal_frac=attainment_goal_frac,
        requests=req.requests,
        missed_requests=missed,
        impossible_requests=req.impossible,
        instant=OracleCost(float(curve.instant_gpu_hours[0]), float(curve.instant_cost_usd[0]), peak),
        cold_start=OracleCost(float(curve.cold_start_gpu_hours[0]), float(curve.cold_start_cost_usd[0]), peak),
        cold_start_s=pod_cold_s,
        node_cold_start_s=node_cold_s,
        token_capacity_tps=token_capacity_tps(fleet.replica),
        tokens_counted=s.tokens != "none",
        window_s=windows.length_s,
        profile_t_s=profile_t_s,
        profile_replicas=profile_replicas,
    )


def _peak_replicas(windows: _Windows, weights_tried: list[tuple[float, float, float]], missed: int) -> int:
    # A window whose pod-seconds exceed (k - 1) x its length has k pods serving at some moment. To avoid k
    # everywhere, the misses must bring every window under that; k is forced when that takes more misses
    # than the goal allows (each window losing its largest charges first). Each weight gives a valid answer;
    # the two with the most volume are tried.
    if len(windows.of_request) - missed <= 0:
        return 0
    by_volume = sorted(weights_tried, key=lambda w: -float(windows.parts.charges(w).sum()))
    window, span_s = windows.of_request, windows.span_s
    peak = 1
    for weights in by_volume[:2]:
        charge = windows.parts.charges(weights)
        order = np.lexsort((-charge, window))
        ranked, by = charge[order], window[order]
        starts = np.searchsorted(by, np.arange(windows.count))
        total = np.cumsum(ranked)
        before = np.where(starts > 0, total[np.maximum(starts - 1, 0)], 0.0)
        # Within each window, the sum of its r largest charges, made one increasing sequence by the window's offset.
        offset = float(total[-1]) + 1.0
        key = by * offset + (total - before[by])
        volume = np.bincount(window, weights=charge, minlength=windows.count)
        level = peak + 1
        while True:
            excess = volume - (level - 1) * span_s
            over = np.flatnonzero(excess > 1e-9 * span_s)
            if over.size == 0:
                break
            position = np.searchsorted(key, over * offset + excess[over] - 1e-9 * span_s[over], side="left")
            needed = int(np.sum(position - starts[over] + 1))
            if needed <= missed:
                break
            peak, level = level, level + 1
    return peak


def _profile(req: _Requests, s: _Setting, windows: _Windows, cold_start_s: float) -> tuple[np.ndarray, np.ndarray]:
    # Bound (b)'s windows with every request met, for the weight that gives the largest sum.
    cover = _coverage(req, cold_start_s, s.tick_s)
    slots = round(windows.length_s / s.tick_s)
    n_slots = len(cover.count)
    coverage = np.bincount(np.arange(n_slots) // slots, weights=cover.count > 0, minlength=windows.count) * s.tick_s
    best = np.zeros(windows.count)
    for weights in _weights(s, windowed=True):
        volume = np.bincount(windows.of_request, weights=windows.parts.charges(weights), minlength=windows.count)
        candidate = np.maximum(volume, coverage)
        if candidate.sum() > best.sum():
            best = candidate
    return np.arange(windows.count) * windows.length_s, best / windows.span_s


def regret_usd(
    trace: RequestTrace,
    fleets: Sequence[FleetSpec],
    costs_usd: Sequence[float],
    slo_attainments_frac: Sequence[float],
    attainment_goal_frac: float,
    *,
    duration_s: float | None = None,
    window_s: float = ORACLE_WINDOW_S,
) -> tuple[float, np.ndarray]:
    """The oracle's cost at the goal, and each configuration's cost over the oracle at its own attainment.

    Parameters
    ----------
    trace : RequestTrace
    fleets : sequence of FleetSpec
        Each configuration's fleet (a sweep may vary the cold start).
    costs_usd, slo_attainments_frac : sequence of float
        Each configuration's simulated cost and attainment. [$], [fraction]
    attainment_goal_frac : float
        [fraction]
    duration_s, window_s : float, optional
        As :func:`oracle_curve`. [s]

    Returns
    -------
    float
        Bound (b) at the goal, the least over the configurations' fleets (so it bounds every one);
        inf when no run can reach the goal. [$]
    numpy.ndarray
        Per configuration: its cost less bound (b) for its own fleet at its own attainment (at least 0;
        NaN where its attainment is NaN). [$]
    """
    if not (len(fleets) == len(costs_usd) == len(slo_attainments_frac)):
        raise PlannerInputError("regret: one fleet, cost and attainment per configuration")
    base = fleets[0] if fleets else FleetSpec()
    req = _requests(trace, base, duration_s)
    attained = np.asarray(slo_attainments_frac, dtype=float)
    missed = np.where(np.isnan(attained), 0, np.round((1.0 - np.nan_to_num(attained)) * req.requests)).astype(int)
    goal_missed = missed_at(attainment_goal_frac, req.requests)
    groups: dict[tuple, list[int]] = {}
    for i, fleet in enumerate(fleets):
        groups.setdefault(_oracle_key(fleet), []).append(i)
    regret = np.full(len(fleets), np.nan)
    oracle_usd = math.inf if fleets else float("nan")
    for members in groups.values():
        fleet = fleets[members[0]]
        points = np.unique(np.concatenate([missed[members], [goal_missed]]))
        group_req = _requests(trace, fleet, duration_s)
        curve = _curve(group_req, fleet, points, _windows(group_req, _setting(fleet), window_s))
        oracle_usd = min(oracle_usd, float(curve.cold_start_cost_usd[np.searchsorted(points, goal_missed)]))
        for i in members:
            if not np.isnan(attained[i]):
                bound = float(curve.cold_start_cost_usd[np.searchsorted(points, missed[i])])
                regret[i] = float(costs_usd[i]) - bound
    return oracle_usd, regret


def _oracle_key(fleet: FleetSpec) -> tuple:
    # Fleets that differ only in what the oracle does not read share one curve.
    nodes = fleet.nodes
    return (
        fleet.replica,
        fleet.tick_s,
        fleet.ttft_slo_s,
        fleet.itl_slo_ms,
        fleet.usd_per_gpu_hour,
        fleet.gpus_per_replica,
        fleet.pre_stop_s > 0 or fleet.shutdown_timeout_s > 0,
        shortest_cold_start_s(fleet),
        None if nodes is None else (nodes.gpus_per_node, nodes.node_price_usd_per_hour(fleet.usd_per_gpu_hour)),
    )


def how_computed_text(bound: OracleBound) -> str:
    """One paragraph: how the two bounds were computed and why no configuration can beat them."""
    tokens = (
        f", and emits at most {bound.token_capacity_tps:,.0f} tokens per second of a tick (the most its tick's "
        "batch accounting can credit)"
        if bound.tokens_counted
        else " (tokens are not counted: pods may drain inside a tick and start in less than one)"
    )
    node = (
        " With the node pool, nodes are billed: pod-seconds over the pods a node holds, and a new node's shortest "
        f"cold start ({bound.node_cold_start_s:g} s) in place of the pod's."
        if bound.node_cold_start_s is not None
        else ""
    )
    return (
        f"Of {bound.requests:,} requests, at most {bound.missed_requests:,} may miss the objective, and "
        f"{bound.impossible_requests:,} cannot meet it in any run (their prefill and one step take longer). "
        "Every request that meets it is admitted within the TTFT objective of its arrival and then held by one "
        "pod for at least its prefill and one batch-1 step per output token; a pod holds at most max_num_seqs "
        f"such requests and kv_tokens of their prompts at any moment{tokens}. Summing the least each met request "
        "takes of these, and letting the most expensive requests miss, gives the instant bound: no autoscaler, "
        "however quick or far-sighted, serves those requests on fewer pod-seconds. The cold-start bound adds, "
        f"window by window ({bound.window_s / 60:.3g} minutes), that the pod admitting a request was requested at "
        f"least its shortest cold start ({bound.cold_start_s:g} s) earlier and is billed until the request "
        "finishes, so one replica stays through every lull shorter than a cold start; misses may uncover at most "
        "the least-covered seconds their requests covered." + node + " Neither counts the headroom, reaction time "
        "or cold starts of extra replicas a real controller needs, so real configurations cost more."
    )
