"""The ``discrete_event`` engine: the replica model without ticks, per request, on SimPy.

It checks the tick engine's approximation. Here every arrival, admission and
completion is an event: between two events of a replica its batch is fixed,
so each running sequence advances at exactly one token per
``step_time(batch)``, re-evaluated whenever the batch changes. The tick
engine freezes the step time for a whole tick and admits only within the
tick's frozen schedule; the two should agree on attainment to about one
percentage point (tests/test_simulate_discrete_event.py measures it).

Scope: a fixed fleet of Ready replicas behind the same router, with the
same continuous batching, prefill and ``max_num_seqs``; the KV cache is
taken as large enough not to bind, and there is no autoscaler (the point is
the replica model, which the controller does not change).
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import simpy

from planner.errors import PlannerInputError
from planner.simulate.fleet import ROUND_ROBIN, FleetSpec
from planner.simulate.traffic import RequestTrace

__all__ = ["DiscreteEventResult", "simulate_fixed_fleet"]


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
        self.last_s = 0.0
        self.wake = env.event()
        env.process(self.run())

    def load(self) -> int:
        return len(self.running) + len(self.waiting)

    def step_s(self) -> float:
        return self.spec.step_s(len(self.running))

    def advance(self) -> None:
        # Move every running sequence from last_s to now at the batch's current step time.
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
    state = {
        "input_tokens": np.asarray(trace.input_tokens, dtype=np.int64),
        "output_tokens": np.asarray(trace.output_tokens, dtype=np.int64),
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
