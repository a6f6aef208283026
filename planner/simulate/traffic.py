"""The ``traffic`` module holds the request trace every simulator engine replays, and how traces are made.

Three ways to get a :class:`RequestTrace`:

- read one (``planner.readers.trace``: canonical CSV or the Azure LLM trace shape);
- draw one from a piecewise-constant rate (:class:`RateTrace`, read from a
  ``t_s,rate_rps`` file or built by a scenario) with :meth:`RateTrace.requests`,
  a seeded non-homogeneous Poisson process;
- stretch a real one-hour trace to a day under a diurnal envelope
  (:func:`stretch_trace`).

Randomness always comes from ``numpy.random.Generator(PCG64(seed))`` and the
draws happen in a fixed order, so one seed gives the same arrays, bit for bit,
on every run and machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.errors import PlannerInputError, require_non_negative, require_positive

__all__ = [
    "TOKEN_DISTRIBUTIONS",
    "RateTrace",
    "RequestTrace",
    "diurnal_factor",
    "draw_token_counts",
    "rng_for",
    "stretch_trace",
]

TOKEN_DISTRIBUTIONS = ("fixed", "geometric")
"""How a request's token counts are drawn from a mean: the rounded mean, or a geometric draw with that mean."""

SECONDS_PER_DAY = 86_400.0


def rng_for(seed: int) -> np.random.Generator:
    """The generator every traffic function draws from: ``Generator(PCG64(seed))``."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise PlannerInputError(f"seed must be an integer >= 0, got {seed!r}")
    return np.random.Generator(np.random.PCG64(int(seed)))


@dataclass(frozen=True)
class RequestTrace:
    """Requests in arrival order.

    Attributes
    ----------
    arrival_s : numpy.ndarray of float
        Arrival time of each request from the start of the trace, sorted. [s]
    input_tokens : numpy.ndarray of int
        Prompt length of each request. [tokens]
    output_tokens : numpy.ndarray of int
        Generated length of each request (at least 1). [tokens]
    source : str
        Where the trace came from (a file, or a scenario's name and seed).
    """

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str = ""

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        if len(self.input_tokens) != n or len(self.output_tokens) != n:
            raise PlannerInputError(
                f"{self.source or 'trace'}: arrival_s, input_tokens and output_tokens must have one "
                f"entry per request, got {n}, {len(self.input_tokens)} and {len(self.output_tokens)}"
            )

    @property
    def duration_s(self) -> float:
        """Time from zero to the last arrival. [s]"""
        return float(self.arrival_s[-1]) if len(self.arrival_s) else 0.0

    def __len__(self) -> int:
        return len(self.arrival_s)

    def until(self, end_s: float) -> RequestTrace:
        """The requests arriving before ``end_s`` (for a run shorter than the trace). [s]"""
        count = int(np.searchsorted(np.asarray(self.arrival_s, dtype=float), end_s, side="left"))
        return RequestTrace(
            self.arrival_s[:count],
            self.input_tokens[:count],
            self.output_tokens[:count],
            f"{self.source or 'trace'} until {end_s:g} s",
        )

    @property
    def mean_rate_rps(self) -> float:
        """Requests per second from zero to the last arrival (0 for fewer than two requests). [requests/s]"""
        return len(self) / self.duration_s if len(self) > 1 and self.duration_s > 0 else 0.0

    def check(self) -> RequestTrace:
        """Return ``self`` if the arrays are what the engines assume, else raise.

        Arrivals finite, >= 0 and sorted; input tokens >= 0; output tokens >= 1.
        The message names the first offending request (1-based).
        """
        where = self.source or "trace"
        arrival = np.asarray(self.arrival_s, dtype=float)
        bad = ~np.isfinite(arrival) | (arrival < 0)
        if bad.any():
            i = int(np.argmax(bad))
            raise PlannerInputError(
                f"{where}: request {i + 1}: arrival_s must be a finite time >= 0, got {float(arrival[i])!r}"
            )
        if len(arrival) > 1:
            back = np.diff(arrival) < 0
            if back.any():
                i = int(np.argmax(back)) + 1
                raise PlannerInputError(
                    f"{where}: request {i + 1}: arrival_s {float(arrival[i])!r} is before the previous request's "
                    f"{float(arrival[i - 1])!r}; requests must be sorted by arrival"
                )
        for name, tokens, low in (("input_tokens", self.input_tokens, 0), ("output_tokens", self.output_tokens, 1)):
            values = np.asarray(tokens)
            bad = values < low
            if bad.any():
                i = int(np.argmax(bad))
                raise PlannerInputError(f"{where}: request {i + 1}: {name} must be >= {low}, got {values[i].item()!r}")
        return self


def draw_token_counts(mean_tokens: np.ndarray, distribution: str, rng: np.random.Generator) -> np.ndarray:
    """One token count per request from each request's mean.

    Parameters
    ----------
    mean_tokens : numpy.ndarray of float
        Mean length for each request, >= 1. [tokens]
    distribution : {"fixed", "geometric"}
        ``fixed``: the mean rounded half-up. ``geometric``: a geometric draw
        on 1, 2, ... with that mean (success probability ``1 / mean``), a
        memoryless length whose spread (standard deviation close to the mean)
        resembles measured answer lengths more than a constant does.
    rng : numpy.random.Generator
        Used only by ``geometric``.

    Returns
    -------
    numpy.ndarray of int64
        [tokens]
    """
    mean_tokens = np.asarray(mean_tokens, dtype=float)
    if distribution == "fixed":
        return np.maximum(np.floor(mean_tokens + 0.5), 1).astype(np.int64)
    if distribution == "geometric":
        if len(mean_tokens) == 0:
            return np.zeros(0, dtype=np.int64)
        return rng.geometric(1.0 / np.maximum(mean_tokens, 1.0)).astype(np.int64)
    raise PlannerInputError(f"token_distribution must be one of {', '.join(TOKEN_DISTRIBUTIONS)}, got {distribution!r}")


@dataclass(frozen=True)
class RateTrace:
    """A piecewise-constant request rate: ``rate_rps[i]`` holds on ``[t_s[i], t_s[i+1])``.

    The last step holds until ``end_s``. Before ``t_s[0]`` the rate is zero.

    Attributes
    ----------
    t_s : numpy.ndarray of float
        Start of each step, strictly increasing, >= 0. [s]
    rate_rps : numpy.ndarray of float
        Arrival rate during each step, >= 0. [requests/s]
    end_s : float
        End of the last step (> ``t_s[-1]``). [s]
    mean_input_tokens, mean_output_tokens : numpy.ndarray of float
        Mean prompt and answer length of requests arriving during each step, >= 1. [tokens]
    source : str
        Where the rates came from.
    """

    t_s: np.ndarray
    rate_rps: np.ndarray
    end_s: float
    mean_input_tokens: np.ndarray
    mean_output_tokens: np.ndarray
    source: str = ""

    def __post_init__(self) -> None:
        where = self.source or "rate trace"
        n = len(self.t_s)
        if n == 0:
            raise PlannerInputError(f"{where}: a rate trace needs at least one step")
        for name in ("rate_rps", "mean_input_tokens", "mean_output_tokens"):
            if len(getattr(self, name)) != n:
                raise PlannerInputError(f"{where}: {name} has {len(getattr(self, name))} entries for {n} steps")
        t_s = np.asarray(self.t_s, dtype=float)
        require_non_negative(f"{where}: t_s", t_s)
        if n > 1 and np.any(np.diff(t_s) <= 0):
            i = int(np.argmax(np.diff(t_s) <= 0)) + 1
            raise PlannerInputError(
                f"{where}: step {i + 1}: t_s {float(t_s[i])!r} must be after the previous step's {float(t_s[i - 1])!r}"
            )
        if not (math.isfinite(self.end_s) and self.end_s > t_s[-1]):
            raise PlannerInputError(
                f"{where}: end_s must be after the last step's start {float(t_s[-1])!r}, got {self.end_s!r}"
            )
        require_non_negative(f"{where}: rate_rps", self.rate_rps)
        for name in ("mean_input_tokens", "mean_output_tokens"):
            values = np.asarray(getattr(self, name), dtype=float)
            require_positive(f"{where}: {name}", values)
            if np.any(values < 1):
                raise PlannerInputError(f"{where}: {name} must be >= 1 token, got {float(values.min())!r}")

    @property
    def step_s(self) -> np.ndarray:
        """Length of each step. [s]"""
        return np.diff(np.append(np.asarray(self.t_s, dtype=float), self.end_s))

    @property
    def expected_requests(self) -> float:
        """Integral of the rate: the mean number of arrivals. [requests]"""
        return float(np.sum(np.asarray(self.rate_rps, dtype=float) * self.step_s))

    def rate_at(self, t_s) -> np.ndarray:
        """The rate in force at each time (0 before the first step and from ``end_s`` on). [requests/s]"""
        t = np.asarray(t_s, dtype=float)
        index = np.searchsorted(np.asarray(self.t_s, dtype=float), t, side="right") - 1
        rate = np.asarray(self.rate_rps, dtype=float)[np.clip(index, 0, None)]
        return np.where((index >= 0) & (t < self.end_s), rate, 0.0)

    def requests(self, seed: int, *, token_distribution: str = "fixed") -> RequestTrace:
        """Draw requests from this rate: a seeded non-homogeneous Poisson process.

        For a piecewise-constant rate this is exact, not an approximation: the
        number of arrivals in each step is Poisson with mean ``rate x length``
        and, given that number, the arrival times are independent and uniform
        over the step. Draw order (fixed, so a seed reproduces bit for bit):
        the counts, the positions, then the input and output lengths.

        Parameters
        ----------
        seed : int
            Seed for ``Generator(PCG64(seed))``.
        token_distribution : {"fixed", "geometric"}, optional
            See :func:`draw_token_counts`.

        Returns
        -------
        RequestTrace
        """
        rng = rng_for(seed)
        starts = np.asarray(self.t_s, dtype=float)
        lengths = self.step_s
        counts = rng.poisson(np.asarray(self.rate_rps, dtype=float) * lengths)
        step_of = np.repeat(np.arange(len(starts)), counts)
        arrival_s = starts[step_of] + rng.random(len(step_of)) * lengths[step_of]
        # Positions are uniform within a step and steps are in order, so a
        # per-step sort is a global sort; a stable sort keeps it reproducible.
        order = np.lexsort((arrival_s, step_of))
        arrival_s = arrival_s[order]
        input_tokens = draw_token_counts(
            np.asarray(self.mean_input_tokens, dtype=float)[step_of], token_distribution, rng
        )
        output_tokens = draw_token_counts(
            np.asarray(self.mean_output_tokens, dtype=float)[step_of], token_distribution, rng
        )
        return RequestTrace(arrival_s, input_tokens, output_tokens, f"{self.source or 'rate trace'} (seed {seed})")


def diurnal_factor(t_s, peak_to_trough: float, peak_at_s: float, period_s: float = SECONDS_PER_DAY) -> np.ndarray:
    """A daily cycle around 1: ``1 + a cos(2 pi (t - peak_at_s) / period_s)``.

    ``a = (r - 1) / (r + 1)`` for ``r = peak_to_trough``, so the factor's mean
    over a period is exactly 1, its maximum ``1 + a`` and its minimum
    ``1 - a`` (their ratio is ``r``).

    Parameters
    ----------
    t_s : array_like of float
        Times. [s]
    peak_to_trough : float
        Busiest over quietest rate, >= 1. [-]
    peak_at_s : float
        Time of the peak within the period. [s]
    period_s : float, optional
        Cycle length, a day by default. [s]

    Returns
    -------
    numpy.ndarray of float
        [-]
    """
    ratio = require_positive("peak_to_trough", peak_to_trough)
    if ratio < 1:
        raise PlannerInputError(f"peak_to_trough must be >= 1 (busiest over quietest), got {ratio!r}")
    require_positive("period_s", period_s)
    amplitude = (ratio - 1.0) / (ratio + 1.0)
    return 1.0 + amplitude * np.cos(2.0 * np.pi * (np.asarray(t_s, dtype=float) - peak_at_s) / period_s)


def stretch_trace(
    trace: RequestTrace,
    seed: int,
    *,
    duration_s: float = SECONDS_PER_DAY,
    peak_to_trough: float = 3.0,
    peak_at_s: float = 14 * 3600.0,
    mean_factor: float = 1.0,
) -> RequestTrace:
    """Stretch a short real trace (typically one hour) to ``duration_s`` under a diurnal envelope.

    Method, all seeded:

    1. The trace is one tile of length ``L = span + span / (n - 1)`` (its
       span plus one mean gap, so the seam between tiles has a typical gap).
    2. Tiles are laid end to end to cover ``duration_s``. Each tile is the
       whole trace rotated by its own uniformly random phase: a request at
       ``a`` lands at ``k L + ((a - phase_k) mod L)``, so tile boundaries do
       not fall at the trace's own start every time.
    3. The target rate is ``r(t) = R x mean_factor x diurnal_factor(t)``, where
       ``R = n / L`` is the trace's own mean rate. Where ``r`` can exceed ``R``,
       ``c = ceil(max r / R)`` independent layers of tiles (own phases) are
       overlaid, and every arrival is kept with probability ``r(t) / (c R)``
       (independent thinning).

    What it preserves: the joint distribution of (input, output) lengths,
    exactly in expectation (a kept request is an original request, kept
    independently of its lengths), and the trace's within-hour arrival
    pattern (bursts stay where they were in the hour, scaled by the keep
    probability). The day's mean rate is ``mean_factor x R``.

    What it does not: real day-scale behaviour (every hour is the same hour
    in a different rotation, so hour-to-hour correlation and events longer
    than the trace are absent); time-of-day changes in lengths (lengths do
    not follow the envelope); burstiness at full strength where the envelope
    is low (independent thinning moves counts toward Poisson: a window's
    variance-to-mean ratio ``D`` becomes ``1 + p (D - 1)`` at keep probability
    ``p``); and, where layers overlap (``c > 1``), the same request appears
    more than once per tile period.

    Parameters
    ----------
    trace : RequestTrace
        The trace to stretch (at least two requests).
    seed : int
        Seed for ``Generator(PCG64(seed))``.
    duration_s : float, optional
        Length of the result. [s]
    peak_to_trough, peak_at_s : float, optional
        The envelope (:func:`diurnal_factor`, one cycle per day). [-], [s]
    mean_factor : float, optional
        Day's mean rate over the trace's mean rate. [-]

    Returns
    -------
    RequestTrace
    """
    if len(trace) < 2 or trace.duration_s <= 0:
        raise PlannerInputError(
            f"{trace.source or 'trace'}: stretching needs at least two requests over a positive span"
        )
    duration_s = require_positive("duration_s", duration_s)
    mean_factor = require_positive("mean_factor", mean_factor)
    rng = rng_for(seed)
    arrival = np.asarray(trace.arrival_s, dtype=float)
    n = len(arrival)
    tile_s = trace.duration_s + trace.duration_s / (n - 1)
    tiles = math.ceil(duration_s / tile_s)
    base_rps = n / tile_s
    peak_factor = mean_factor * float(diurnal_factor(peak_at_s, peak_to_trough, peak_at_s))
    layers = max(1, math.ceil(peak_factor - 1e-12))
    phases = rng.random((layers, tiles)) * tile_s
    # one row per (layer, tile): the rotated copy of the trace
    shifted = np.mod(arrival[None, None, :] - phases[:, :, None], tile_s) + (np.arange(tiles) * tile_s)[None, :, None]
    times = shifted.ravel()
    source_index = np.broadcast_to(np.arange(n), shifted.shape).ravel()
    keep_p = mean_factor * diurnal_factor(times, peak_to_trough, peak_at_s) / layers
    keep = (rng.random(times.size) < keep_p) & (times < duration_s)
    times, source_index = times[keep], source_index[keep]
    order = np.argsort(times, kind="stable")
    return RequestTrace(
        times[order],
        np.asarray(trace.input_tokens)[source_index[order]],
        np.asarray(trace.output_tokens)[source_index[order]],
        f"{trace.source or 'trace'} stretched to {duration_s:g} s (seed {seed}, base {base_rps:.4g} req/s)",
    )
