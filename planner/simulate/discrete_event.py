"""The ``discrete_event`` engine: the replica model without ticks, per request, on SimPy.

It checks the tick engine's approximation. Here every arrival, admission and
completion is an event: between two events of a replica its batch is fixed,
so each running sequence advances at exactly one token per
``step_time(batch)``, re-evaluated whenever the batch changes. The tick
engine freezes the step time for a whole tick and admits only within the
tick's frozen schedule; the two should agree on attainment to about one
percentage point (tests/simulate/test_simulate_discrete_event.py measures it).

With chunked prefill (a ``max_num_batched_tokens`` budget and a prefill
cost) the replica runs step by step instead, as vLLM V1's scheduler does
(``vllm/v1/core/sched/scheduler.py``, ``Scheduler.schedule``): each step
takes the running sequences in admission order, one token for a decode and
what is left of the prompt (up to the budget left) for one still in
prefill, then admits queued requests while the batch and the budget have
room; the step lasts ``step_s(sequences in the step) + prompt tokens x
prefill cost``, a prompt's first token comes at the end of the step that
carries its last chunk, and a request arriving mid-step waits for the next
one. The tick engine's chunked prefill is a per-tick estimate of this (the
queue of prompts and the stall their compute causes, with the estimate's
error carried to the next tick, see :mod:`planner.simulate.replica`);
``CHUNKED_AGREEMENT_REPLICA`` is the replica on which the two are compared.

Scope: a fixed fleet of Ready replicas behind the same router, with the
same continuous batching, prefill and ``max_num_seqs``; the KV cache is
taken as large enough not to bind, and there is no autoscaler (the point
is the replica model, which the controller does not change).
"""

from __future__ import annotations

import dataclasses
import math
from collections import deque
from collections.abc import Generator
from dataclasses import dataclass

import numpy as np
import simpy

from planner.errors import PlannerInputError
from planner.simulate.fleet import LEAST_LOADED, ROUND_ROBIN, FleetSpec
from planner.simulate.replica import ReplicaSpec
from planner.simulate.scenario import Scenario, scenario_trace
from planner.simulate.traffic import RequestTrace

__all__ = [
    "AGREEMENT_CASES",
    "AGREEMENT_REPLICA",
    "CHUNKED_AGREEMENT_REPLICA",
    "CHUNKED_RATES_RPS",
    "AgreementCase",
    "DiscreteEventResult",
    "EngineAgreement",
    "agreement_table",
    "chunked_agreement",
    "compare_engines",
    "simulate_fixed_fleet",
]


class DiscreteEventResult:
    """Per-request first-token and finish times from the discrete-event run. [s]"""

    def __init__(self, arrival_s: np.ndarray, first_token_s: np.ndarray, done_s: np.ndarray):
        self.arrival_s = arrival_s
        self.first_token_s = first_token_s
        self.done_s = done_s

    def slo_attainment_frac(self, ttft_slo_s: float) -> float:
        """Fraction of requests with TTFT at most ``ttft_slo_s``. [fraction]"""
        ttft_s = self.first_token_s - self.arrival_s
        return float(np.count_nonzero(np.isfinite(ttft_s) & (ttft_s <= ttft_slo_s + 1e-9)) / len(ttft_s))


class _Replica:
    def __init__(self, env: simpy.Environment, spec: FleetSpec, state: dict):
        self.env = env
        self.spec = spec.replica
        self.state = state
        self.running: list[int] = []
        self.waiting: deque[int] = deque()
        self.gen: dict[int, float] = {}
        self.prefill: dict[int, float] = {}
        self.prompt_left: dict[int, int] = {}  # chunked prefill: prompt tokens not yet computed
        self.last_s = 0.0
        self.wake = env.event()
        env.process(self.run_steps() if self.spec.chunked_prefill else self.run())

    def load(self) -> int:
        return len(self.running) + len(self.waiting)

    def step_s(self) -> float:
        return self.spec.step_s(len(self.running))

    def advance(self) -> None:
        # Move every running sequence from last_s to now at the batch's current step time.
        if self.spec.chunked_prefill:
            return  # run_steps moves whole steps; an arrival waits for the next one
        now = self.env.now
        elapsed = now - self.last_s
        if elapsed > 0 and self.running:
            step = self.step_s()
            first, done = self.state["first_token_s"], self.state["done_s"]
            out = self.state["output_tokens"]
            for i in self.running:
                left = elapsed
                if self.prefill[i] > 0:
                    used = min(self.prefill[i], left)
                    self.prefill[i] -= used
                    left -= used
                if left <= 0:
                    continue
                start = now - left
                gen = self.gen[i]
                new = gen + left / step
                if gen < 1.0 <= new and math.isnan(first[i]):
                    first[i] = start + (1.0 - gen) * step
                if new >= out[i] - 1e-9:
                    new = float(out[i])
                    done[i] = start + (out[i] - gen) * step
                self.gen[i] = new
        self.last_s = now

    def run(self):
        out = self.state["output_tokens"]
        inputs = self.state["input_tokens"]
        while True:
            self.advance()
            self.running = [i for i in self.running if self.gen[i] < out[i]]
            while self.waiting and len(self.running) < self.spec.max_num_seqs:
                i = self.waiting.popleft()
                self.running.append(i)
                self.gen[i] = 0.0
                self.prefill[i] = inputs[i] * self.spec.prefill_ms_per_token / 1000.0
            self.wake = self.env.event()
            if not self.running:
                yield self.wake
                continue
            step = self.step_s()
            next_s = min(self.prefill[i] + (out[i] - self.gen[i]) * step for i in self.running)
            yield self.env.timeout(max(next_s, 0.0)) | self.wake

    def run_steps(self) -> Generator[simpy.Event, object, None]:
        # Chunked prefill, one scheduler step at a time (module docstring).
        out = self.state["output_tokens"]
        inputs = self.state["input_tokens"]
        first, done = self.state["first_token_s"], self.state["done_s"]
        budget_tokens = int(self.spec.max_num_batched_tokens or 0)
        cost_s = self.spec.prefill_ms_per_token / 1000.0
        while True:
            if not self.running and not self.waiting:
                self.wake = self.env.event()
                yield self.wake
                continue
            budget = budget_tokens
            scheduled: list[tuple[int, int]] = []  # (request, prompt tokens it computes in the step)
            for i in self.running:
                if budget <= 0:
                    break
                prompt = min(self.prompt_left[i], budget)
                scheduled.append((i, prompt))
                budget -= prompt if prompt > 0 else 1
            while self.waiting and len(self.running) < self.spec.max_num_seqs and budget > 0:
                i = self.waiting.popleft()
                self.running.append(i)
                self.gen[i] = 0.0
                self.prompt_left[i] = int(inputs[i])
                prompt = min(self.prompt_left[i], budget)
                scheduled.append((i, prompt))
                budget -= prompt if prompt > 0 else 1
            prompt_tokens = sum(prompt for _, prompt in scheduled)
            yield self.env.timeout(self.spec.step_s(len(scheduled)) + prompt_tokens * cost_s)
            now = self.env.now
            for i, prompt in scheduled:
                if prompt > 0:
                    self.prompt_left[i] -= prompt
                    if self.prompt_left[i] > 0:
                        continue  # more chunks to come
                self.gen[i] += 1.0  # a decode's token, or the first one, sampled after the last chunk
                if math.isnan(first[i]):
                    first[i] = now
                if self.gen[i] >= out[i]:
                    done[i] = now
            self.running = [i for i in self.running if self.gen[i] < out[i]]


def simulate_fixed_fleet(trace: RequestTrace, fleet_spec: FleetSpec, replicas: int) -> DiscreteEventResult:
    """Replay ``trace`` through ``replicas`` Ready replicas, event by event.

    Parameters
    ----------
    trace : RequestTrace
    fleet_spec : FleetSpec
        Uses ``replica`` and ``router``.
    replicas : int
        Ready replicas for the whole run.

    Returns
    -------
    DiscreteEventResult
    """
    if replicas < 1:
        raise PlannerInputError(f"replicas: expected at least 1, got {replicas}")
    n = len(trace)
    # Token counts as Python ints: the event loops read them one at a time, where numpy scalars are slow.
    state = {
        "input_tokens": np.asarray(trace.input_tokens, dtype=np.int64).tolist(),
        "output_tokens": np.asarray(trace.output_tokens, dtype=np.int64).tolist(),
        "first_token_s": np.full(n, np.nan),
        "done_s": np.full(n, np.nan),
    }
    env = simpy.Environment()
    pods = [_Replica(env, fleet_spec, state) for _ in range(replicas)]

    def arrivals():
        turn = 0
        for i, at in enumerate(trace.arrival_s):
            yield env.timeout(max(float(at) - env.now, 0.0))
            if fleet_spec.router == ROUND_ROBIN:
                pod = pods[turn % replicas]
                turn += 1
            else:
                pod = min(pods, key=lambda p: (p.load(), pods.index(p)))
            pod.advance()
            pod.waiting.append(i)
            if not pod.wake.triggered:
                pod.wake.succeed()

    env.process(arrivals())
    env.run()
    return DiscreteEventResult(np.asarray(trace.arrival_s, dtype=float), state["first_token_s"], state["done_s"])


# A replica whose KV cache never binds and whose prefill delays only its own request (no token budget),
# with a prefill cost so TTFT has two parts.
AGREEMENT_REPLICA = ReplicaSpec(
    fixed_ms=6.0,
    per_sequence_ms=0.25,
    max_num_seqs=32,
    kv_tokens=10**7,
    prefill_ms_per_token=0.05,
    max_num_batched_tokens=None,
)
# The same replica with vLLM's default token budget: prompts share steps with the decodes beside them.
CHUNKED_AGREEMENT_REPLICA = dataclasses.replace(AGREEMENT_REPLICA, max_num_batched_tokens=2048)
# Seconds after the last arrival that both engines keep running, so every request finishes.
_DRAIN_S = 300.0


@dataclass(frozen=True)
class AgreementCase:
    """A fixed fleet on seeded traffic, on which the tick and discrete-event engines are compared.

    Attributes
    ----------
    scenario : Scenario
        The traffic (replayed with ``seed``).
    replicas : int
        Ready replicas for the whole run.
    ttft_slo_s : float
        TTFT objective of the attainment compared. [s]
    router : str
        ``least-loaded`` or ``round-robin``.
    seed : int
        Seed of :func:`planner.simulate.scenario.scenario_trace`.
    """

    scenario: Scenario
    replicas: int
    ttft_slo_s: float
    router: str = LEAST_LOADED
    seed: int = 0


def _case(name: str, ttft_slo_s: float, seed: int, router: str = LEAST_LOADED, **traffic) -> AgreementCase:
    scenario = Scenario(
        **{
            "kind": "constant",
            "duration_s": 180.0,
            "mean_input_tokens": 500.0,
            "mean_output_tokens": 200.0,
            "name": name,
            **traffic,
        }
    )
    return AgreementCase(scenario, 2, ttft_slo_s, router, seed)


# Two replicas, three minutes: one light case, and four where requests queue and the engines could part.
AGREEMENT_CASES = (
    _case("light", 0.2, 1, rate_rps=8.0),
    _case("near capacity", 1.0, 2, rate_rps=21.0),
    _case(
        "burst", 2.0, 3, kind="launch_spike", rate_rps=10.0, spike_at_s=60.0, spike_factor=4.0, rise_s=0.0, hold_s=60.0
    ),
    _case("round robin", 0.5, 4, ROUND_ROBIN, rate_rps=20.0),
    _case("long answers", 1.0, 5, rate_rps=5.5, mean_input_tokens=200.0, mean_output_tokens=800.0),
)


@dataclass(frozen=True)
class EngineAgreement:
    """The tick engine against the discrete-event one on one :class:`AgreementCase`.

    Attributes
    ----------
    name : str
        The case's scenario name.
    requests : int
        Requests replayed (every one finishes in both engines).
    tick_attainment_frac, event_attainment_frac : float
        Fraction of requests meeting the TTFT objective, per engine. [fraction]
    tick_mean_ttft_s, event_mean_ttft_s : float
        Mean TTFT, per engine. [s]
    """

    name: str
    requests: int
    tick_attainment_frac: float
    event_attainment_frac: float
    tick_mean_ttft_s: float
    event_mean_ttft_s: float

    @property
    def attainment_gap_pct_points(self) -> float:
        """How far apart the two attainments are. [percentage points]"""
        return 100.0 * abs(self.tick_attainment_frac - self.event_attainment_frac)

    @property
    def mean_ttft_gap_frac(self) -> float:
        """The tick engine's mean TTFT off the discrete-event one, relative to it. [fraction]"""
        return abs(self.tick_mean_ttft_s / self.event_mean_ttft_s - 1.0)


def compare_engines(
    case: AgreementCase, replica: ReplicaSpec = AGREEMENT_REPLICA, *, tick_s: float = 1.0
) -> EngineAgreement:
    """Replay one case through the tick engine and this one; their SLO figures side by side.

    The tick engine runs the case's fleet as a ScaledObject pinned at
    ``replicas`` (minimum = maximum), so its controller never moves it. It runs
    compiled (``fast``), which gives the reference's outcome bit for bit.

    Parameters
    ----------
    case : AgreementCase
    replica : ReplicaSpec
        The replica model both engines run.
    tick_s : float
        The tick engine's tick. [s]

    Returns
    -------
    EngineAgreement
    """
    from planner.autoscaler.keda import ScaledObjectSpec, Trigger, hpa_for_scaled_object
    from planner.autoscaler.spec import Autoscaler
    from planner.simulate import simulate

    trace = scenario_trace(case.scenario, case.seed)
    fleet = FleetSpec(replica=replica, ttft_slo_s=case.ttft_slo_s, router=case.router, tick_s=tick_s)
    pinned = ScaledObjectSpec(
        "pinned",
        (Trigger(0, "prometheus", 10.0, query="sum(vllm:num_requests_running)"),),
        min_replica_count=case.replicas,
        max_replica_count=case.replicas,
    )
    autoscaler = Autoscaler("ScaledObject", "pinned", "pinned", hpa_for_scaled_object(pinned), pinned)
    ticked = simulate(trace, autoscaler, fleet, duration_s=trace.duration_s + _DRAIN_S)
    events = simulate_fixed_fleet(trace, fleet, case.replicas)
    if ticked.completed != len(trace) or not np.isfinite(events.done_s).all():
        raise PlannerInputError(
            f"case {case.scenario.label!r}: some requests did not finish within "
            f"{_DRAIN_S:.0f} s of the last arrival; the engines are compared on finished runs"
        )
    return EngineAgreement(
        name=case.scenario.label,
        requests=len(trace),
        tick_attainment_frac=ticked.slo_attainment_frac,
        event_attainment_frac=events.slo_attainment_frac(case.ttft_slo_s),
        tick_mean_ttft_s=float(np.mean(ticked.ttft_s)),
        event_mean_ttft_s=float(np.mean(events.first_token_s - events.arrival_s)),
    )


# Two replicas on the "near capacity" traffic, with chunked prefill: well below saturation (about 16 rps,
# where requests start to queue), and past it, where the objective is missed for about a quarter of them.
CHUNKED_RATES_RPS = (14.0, 17.0)


def chunked_agreement(
    arrival_rates_rps: tuple[float, ...] = CHUNKED_RATES_RPS, *, tick_s: float = 1.0
) -> list[EngineAgreement]:
    """The engines with chunked prefill (``CHUNKED_AGREEMENT_REPLICA``) on the "near capacity" case at each rate.

    Prompt compute shares the steps under a token budget, so this replica
    saturates at lower rates than ``AGREEMENT_REPLICA``; the default rates
    are one well below saturation and one past it.

    Parameters
    ----------
    arrival_rates_rps : tuple of float
        Arrival rates of the case's constant traffic. [requests/s]
    tick_s : float
        The tick engine's tick. [s]

    Returns
    -------
    list of EngineAgreement
        One per rate, named ``near capacity, <rate> rps``.
    """
    case = next(c for c in AGREEMENT_CASES if c.scenario.label == "near capacity")
    agreements = []
    for rate_rps in arrival_rates_rps:
        scenario = dataclasses.replace(case.scenario, rate_rps=rate_rps, name=f"near capacity, {rate_rps:g} rps")
        agreements.append(
            compare_engines(dataclasses.replace(case, scenario=scenario), CHUNKED_AGREEMENT_REPLICA, tick_s=tick_s)
        )
    return agreements


def agreement_table(agreements: dict[float, list[EngineAgreement]]):
    """One row per case and tick: both engines' attainment and mean TTFT, and their gaps.

    Parameters
    ----------
    agreements : dict of float to list of EngineAgreement
        :func:`compare_engines` results keyed by the tick they ran at. [s]

    Returns
    -------
    pandas.DataFrame
        Columns ``case``, ``tick_s``, ``requests``, ``tick_attainment_frac``,
        ``event_attainment_frac``, ``attainment_gap_pct_points``,
        ``tick_mean_ttft_s``, ``event_mean_ttft_s``, ``mean_ttft_gap_frac``.
    """
    import pandas as pd

    return pd.DataFrame(
        [
            {
                "case": a.name,
                "tick_s": tick_s,
                "requests": a.requests,
                "tick_attainment_frac": a.tick_attainment_frac,
                "event_attainment_frac": a.event_attainment_frac,
                "attainment_gap_pct_points": a.attainment_gap_pct_points,
                "tick_mean_ttft_s": a.tick_mean_ttft_s,
                "event_mean_ttft_s": a.event_mean_ttft_s,
                "mean_ttft_gap_frac": a.mean_ttft_gap_frac,
            }
            for tick_s, rows in agreements.items()
            for a in rows
        ]
    )
