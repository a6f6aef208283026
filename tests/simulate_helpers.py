"""Small seeded traces and fleets for the simulator tests (not a scenario library)."""

from __future__ import annotations

import numpy as np

from planner.simulate.traffic import RequestTrace


def steady_trace(rate_rps: float, duration_s: float, input_tokens: int, output_tokens: int,
                 start_s: float = 0.0) -> RequestTrace:
    """Evenly spaced arrivals, as a load generator with a fixed interval sends them."""
    arrival_s = start_s + np.arange(0.0, duration_s, 1.0 / rate_rps)
    n = len(arrival_s)
    return RequestTrace(arrival_s, np.full(n, input_tokens), np.full(n, output_tokens), f"steady {rate_rps} req/s")


def poisson_trace(rate_rps, duration_s: float, input_tokens: int, output_tokens: int, seed: int = 0,
                  tick_s: float = 1.0) -> RequestTrace:
    """Poisson arrivals at ``rate_rps`` (a number, or a function of time evaluated per tick)."""
    rng = np.random.default_rng(seed)
    rate = rate_rps if callable(rate_rps) else (lambda t: rate_rps)
    arrivals = []
    for t in np.arange(0.0, duration_s, tick_s):
        n = rng.poisson(rate(t) * tick_s)
        arrivals.extend(np.sort(t + rng.uniform(0.0, tick_s, n)))
    arrival_s = np.asarray(arrivals, dtype=float)
    n = len(arrival_s)
    return RequestTrace(arrival_s, np.full(n, input_tokens), np.full(n, output_tokens), f"poisson seed {seed}")
