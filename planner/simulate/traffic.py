"""The ``traffic`` module holds the request trace every simulator engine replays, and how traces are made.

Three ways to get a :class:`RequestTrace`:

- read one (``planner.readers.trace``: canonical CSV or the Azure LLM trace shape);
- draw one from a piecewise-constant rate (:class:`RateTrace`, read from a
  ``t_s,rate_rps`` file or built by a scenario) with :meth:`RateTrace.requests`,
  a seeded non-homogeneous Poisson process;
- stretch a real one-hour trace to a day under a diurnal envelope
  (:func:`stretch_trace`), or to several days under a weekly one
  (:func:`stretch_days`, :class:`WeeklyEnvelope`).

A trace may carry each request's prompt as KV-block hashes
(:class:`PromptBlocks`, from the Mooncake traces) for prefix-cache work; the
engines do not read them yet.

Randomness always comes from ``numpy.random.Generator(PCG64(seed))`` and the
draws happen in a fixed order, so one seed gives the same arrays, bit for bit,
on every run and machine.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from planner.errors import PlannerInputError, require_fraction, require_non_negative, require_positive

__all__ = [
    "DAY_NOISE_FRAC",
    "DEFAULT_MEAN_INPUT_TOKENS",
    "DEFAULT_MEAN_OUTPUT_TOKENS",
    "SECONDS_PER_DAY",
    "SECONDS_PER_WEEK",
    "TOKEN_DISTRIBUTIONS",
    "WEEKDAY_NAMES",
    "WEEKEND_DROP_FRAC",
    "PromptBlocks",
    "RateTrace",
    "RequestTrace",
    "WeeklyEnvelope",
    "diurnal_factor",
    "draw_token_counts",
    "rng_for",
    "stretch_days",
    "stretch_trace",
]

TOKEN_DISTRIBUTIONS = ("fixed", "geometric")
"""How a request's token counts are drawn from a mean: the rounded mean, or a geometric draw with that mean."""

DEFAULT_MEAN_INPUT_TOKENS = 512.0
"""Prompt length for a rate without its own lengths (a rate trace, a Prometheus export). [tokens]"""
DEFAULT_MEAN_OUTPUT_TOKENS = 240.0
"""Answer length for a rate without its own lengths. [tokens]"""
SECONDS_PER_DAY = 86_400.0
SECONDS_PER_WEEK = 7 * SECONDS_PER_DAY
WEEKDAY_NAMES = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
WEEKEND_DROP_FRAC = 0.3
"""How much lower a Saturday or Sunday runs than a weekday, by default: 0.3, a weekend day at 70 %. [fraction]

An assumption, not a measurement: business-hours services (assistants used at
work, code completion) fall off at the weekend, consumer chat much less.
Measure yours as ``1 - (weekend day's requests / weekday's)`` over a few weeks
(for example ``sum(increase(vllm:request_success_total[1d]))`` per day).
"""
DAY_NOISE_FRAC = 0.05
"""Day-to-day spread of a day's level, by default: about 5 % (one standard deviation). [fraction]

An assumption, not a measurement; see :class:`WeeklyEnvelope`.
"""


def rng_for(seed: int) -> np.random.Generator:
    """The generator every traffic function draws from: ``Generator(PCG64(seed))``."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise PlannerInputError(f"seed must be an integer >= 0, got {seed!r}")
    return np.random.Generator(np.random.PCG64(int(seed)))


@dataclass(frozen=True)
class PromptBlocks:
    """Each request's prompt as a list of KV-block hashes (the Mooncake traces' ``hash_ids``).

    Equal ids at the same position of two prompts are a shared prefix. The
    lists are stored once, end to end (``block_ids`` cut at ``offsets``), and
    each request points at its list by ``row``: a trace stretched to a week
    copies one index per request, not the lists (the Mooncake conversation
    trace holds 24 ids per request on average).

    Attributes
    ----------
    block_ids : numpy.ndarray of int64
        Every list's ids, one list after another.
    offsets : numpy.ndarray of int64
        List ``r`` is ``block_ids[offsets[r]:offsets[r + 1]]``; one more entry than there are lists,
        the first 0 and the last ``len(block_ids)``.
    row : numpy.ndarray of int64
        Which list each request's prompt is.
    block_tokens : int
        Prompt tokens per block; a prompt's last block may be partial (Mooncake: 512). [tokens]
    """

    block_ids: np.ndarray
    offsets: np.ndarray
    row: np.ndarray
    block_tokens: int = 512

    def __post_init__(self) -> None:
        offsets = np.asarray(self.offsets)
        if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(self.block_ids) or np.any(np.diff(offsets) < 0):
            raise PlannerInputError(
                "prompt blocks: offsets must start at 0, never decrease and end at the number of block ids"
            )
        row = np.asarray(self.row)
        if len(row) and (row.min() < 0 or row.max() >= len(offsets) - 1):
            raise PlannerInputError(f"prompt blocks: a request's row must name one of the {len(offsets) - 1} lists")
        if isinstance(self.block_tokens, bool) or not isinstance(self.block_tokens, int) or self.block_tokens < 1:
            raise PlannerInputError(f"prompt blocks: block_tokens must be an integer >= 1, got {self.block_tokens!r}")

    def __len__(self) -> int:
        return len(self.row)

    def of(self, request: int) -> np.ndarray:
        """The block ids of one request's prompt (0-based request index)."""
        r = int(self.row[request])
        return self.block_ids[self.offsets[r] : self.offsets[r + 1]]

    def take(self, requests: np.ndarray) -> PromptBlocks:
        """The blocks of the requests at ``requests`` (indices), sharing this table's lists."""
        return PromptBlocks(self.block_ids, self.offsets, self.row[requests], self.block_tokens)


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
    prompt_blocks : PromptBlocks, optional
        Each request's prompt as KV-block hashes, when the trace has them (Mooncake).
    """

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str = ""
    prompt_blocks: PromptBlocks | None = None

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        if len(self.input_tokens) != n or len(self.output_tokens) != n:
            raise PlannerInputError(
                f"{self.source or 'trace'}: arrival_s, input_tokens and output_tokens must have one "
                f"entry per request, got {n}, {len(self.input_tokens)} and {len(self.output_tokens)}"
            )
        if self.prompt_blocks is not None and len(self.prompt_blocks) != n:
            raise PlannerInputError(
                f"{self.source or 'trace'}: prompt_blocks must have one entry per request, "
                f"got {len(self.prompt_blocks)} for {n} requests"
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
            None if self.prompt_blocks is None else self.prompt_blocks.take(np.arange(count)),
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
    _require_stretchable(trace)
    duration_s = require_positive("duration_s", duration_s)
    mean_factor = require_positive("mean_factor", mean_factor)
    rng = rng_for(seed)
    peak_factor = mean_factor * float(diurnal_factor(peak_at_s, peak_to_trough, peak_at_s))
    times, source_index = _stretched_arrivals(
        trace,
        rng,
        duration_s,
        lambda t_s: mean_factor * diurnal_factor(t_s, peak_to_trough, peak_at_s),
        peak_factor,
    )
    return _replayed(
        trace,
        times,
        source_index,
        f"{trace.source or 'trace'} stretched to {duration_s:g} s (seed {seed}, base {_base_rps(trace):.4g} req/s)",
    )


@dataclass(frozen=True)
class WeeklyEnvelope:
    """A week's shape of traffic: the daily cycle, lower weekends, and days that differ.

    The rate factor at replay time ``t`` (seconds from the replay's start) is
    ``level[k] x diurnal_factor(start_in_week_s + t)``, where ``k`` is the calendar day
    (UTC) that ``start_in_week_s + t`` falls on, counted from the replay's first, and

    - ``diurnal_factor`` is :func:`diurnal_factor` with ``peak_to_trough`` and
      ``peak_at_s`` (time of day, UTC): a cosine a day long with mean 1;
    - ``level[k] = base[k] x noise[k]``: ``base`` is 1 on a weekday and
      ``1 - weekend_drop_frac`` on a Saturday or a Sunday (the whole day scaled,
      its peak and its trough alike); ``noise[0] = 1`` (the first day carries the
      trace's own level, so one day replayed is :func:`stretch_trace`'s day) and
      each later day's ``noise[k] = exp(s z_k - s^2 / 2)`` with ``z_k`` standard
      normal and independent, ``s = day_noise_frac``: mean exactly 1, about
      ``s`` relative spread.

    What this approximates: the two strongest periodicities of request traffic
    in the published LLM traces, the day and the week (the BurstGPT README's
    figures "Weekly Periodicity" and "Daily Periodicity"; arXiv 2401.17644),
    with day totals that wander. What it leaves out: holidays, growth and
    trends, weekends that differ in shape and not only in level (a cosine
    stays a cosine), and correlation between neighbouring days' levels (the
    noise is independent day to day). The defaults for the weekend and the
    noise (:data:`WEEKEND_DROP_FRAC`, :data:`DAY_NOISE_FRAC`) are assumptions,
    not measurements; set them from your own weeks. What they weigh: with
    them a week from Monday carries ``2 x 0.3 / 7 = 8.6 %`` fewer requests than
    seven weekdays, and the noise moves a day's total by about 5 % and a
    week's by about ``0.05 x sqrt(6) / 7 = 1.7 %`` (one standard deviation).

    Attributes
    ----------
    peak_to_trough : float
        A day's busiest over quietest rate, >= 1 (as :func:`stretch_trace`). [-]
    peak_at_s : float
        Time of day of the daily peak, UTC. [s]
    weekend_drop_frac : float
        How much lower Saturday and Sunday run than a weekday, in [0, 1). [fraction]
    day_noise_frac : float
        The log-normal spread ``s`` of a later day's level, >= 0. [fraction]
    start_in_week_s : float
        When the replay starts, in seconds after Monday 00:00 UTC, in [0, one week):
        0 is Monday at midnight, ``5 x 86400`` Saturday at midnight,
        ``2 x 86400 + 13 x 3600`` Wednesday 13:00. [s]
    """

    peak_to_trough: float = 3.0
    peak_at_s: float = 14 * 3600.0
    weekend_drop_frac: float = WEEKEND_DROP_FRAC
    day_noise_frac: float = DAY_NOISE_FRAC
    start_in_week_s: float = 0.0

    def __post_init__(self) -> None:
        diurnal_factor(self.peak_at_s, self.peak_to_trough, self.peak_at_s)  # checks both
        require_fraction("weekend_drop_frac", self.weekend_drop_frac, allow_zero=True)
        if self.weekend_drop_frac >= 1:
            raise PlannerInputError(
                f"weekend_drop_frac must be below 1 (a weekend with no traffic cannot be stretched to), "
                f"got {self.weekend_drop_frac!r}",
                parameter="weekend_drop_frac",
                expected="a fraction in [0, 1)",
                value=self.weekend_drop_frac,
            )
        require_non_negative("day_noise_frac", self.day_noise_frac)
        start_in_week_s = require_non_negative("start_in_week_s", self.start_in_week_s)
        if start_in_week_s >= SECONDS_PER_WEEK:
            raise PlannerInputError(
                f"start_in_week_s must be within one week of Monday 00:00 UTC (below {SECONDS_PER_WEEK:g} s), "
                f"got {start_in_week_s!r}",
                parameter="start_in_week_s",
                expected=f"a time in [0, {SECONDS_PER_WEEK:g}) s",
                value=start_in_week_s,
            )

    @property
    def first_weekday(self) -> int:
        """The replay's first calendar day: 0 for Monday to 6 for Sunday."""
        return int(self.start_in_week_s // SECONDS_PER_DAY)

    def calendar_days(self, duration_s: float) -> int:
        """How many calendar days (UTC) a replay of ``duration_s`` from ``start_in_week_s`` touches."""
        into_day_s = self.start_in_week_s - self.first_weekday * SECONDS_PER_DAY
        return max(1, math.ceil((into_day_s + duration_s) / SECONDS_PER_DAY))

    def day_levels(self, calendar_days: int, seed: int) -> np.ndarray:
        """``level[k]`` for the replay's calendar days, the first 1 or ``1 - weekend_drop_frac``. [-]

        The noise comes from its own seeded stream, drawn in day order, so a
        longer replay's first days have the same levels as a shorter one's.
        """
        weekday = (self.first_weekday + np.arange(calendar_days)) % 7
        base = np.where(weekday >= 5, 1.0 - self.weekend_drop_frac, 1.0)
        s = float(self.day_noise_frac)
        z = _stream(seed, _NOISE_STREAM, 0).standard_normal(calendar_days - 1)
        noise = np.concatenate(([1.0], np.exp(s * z - s * s / 2.0)))
        return base * noise

    def factor(self, t_s, levels: np.ndarray) -> np.ndarray:
        """The rate factor at replay times ``t_s`` (seconds from the start), given :meth:`day_levels`. [-]"""
        t = np.asarray(t_s, dtype=float)
        into_day_s = self.start_in_week_s - self.first_weekday * SECONDS_PER_DAY
        # times past the last day (a tile's overhang, dropped later) take the last day's level
        day = np.minimum(np.floor((t + into_day_s) / SECONDS_PER_DAY).astype(np.int64), len(levels) - 1)
        return levels[day] * diurnal_factor(t + self.start_in_week_s, self.peak_to_trough, self.peak_at_s)


def stretch_days(
    trace: RequestTrace,
    seed: int,
    days: int,
    *,
    envelope: WeeklyEnvelope | None = None,
    mean_factor: float = 1.0,
) -> RequestTrace:
    """Stretch a short real trace (typically one hour) to ``days`` days under a weekly envelope.

    Each replayed day is made as :func:`stretch_trace` makes its day (tiles of
    the trace, each rotated by a random phase, layered and thinned), with the
    target rate ``R x mean_factor x envelope.factor(t)`` (:class:`WeeklyEnvelope`),
    ``R`` the trace's own mean rate. Day 0 draws from ``Generator(PCG64(seed))``
    exactly as :func:`stretch_trace` does, so with the default envelope one day
    (``days=1``, starting on a weekday at midnight) is ``stretch_trace(trace,
    seed)``, bit for bit; day ``d >= 1`` draws from its own stream
    (``SeedSequence([seed, 1, d])``), so a longer replay begins with the shorter.

    A weekday's expected mean rate is ``mean_factor x R`` times its noise; a
    weekend day's is ``1 - weekend_drop_frac`` of that. Everything
    :func:`stretch_trace` says it preserves and does not holds here per day.

    Memory: one day is built at a time (for the Azure conversation trace, about
    a million candidate arrivals, 8 MB each for times and indices), and the
    result holds 24 bytes per request (arrival, input and output lengths) plus
    8 for the prompt blocks' row where the trace has them: a week of the Azure
    conversation trace (about 3 million requests) is about 71 MB.

    Parameters
    ----------
    trace : RequestTrace
        The trace to stretch (at least two requests).
    seed : int
        Seed of every draw.
    days : int
        Days to replay, >= 1.
    envelope : WeeklyEnvelope, optional
        The week's shape and the start (default: Monday 00:00 UTC, the defaults above).
    mean_factor : float, optional
        A weekday's mean rate over the trace's mean rate. [-]

    Returns
    -------
    RequestTrace
        ``days x 86400`` seconds of requests, ``t = 0`` at the envelope's start.
    """
    _require_stretchable(trace)
    if isinstance(days, bool) or not isinstance(days, (int, np.integer)) or days < 1:
        raise PlannerInputError(
            f"days must be an integer >= 1, got {days!r}", parameter="days", expected="an integer >= 1", value=days
        )
    mean_factor = require_positive("mean_factor", mean_factor)
    envelope = envelope if envelope is not None else WeeklyEnvelope()
    first_rng = rng_for(seed)
    levels = envelope.day_levels(envelope.calendar_days(days * SECONDS_PER_DAY), seed)
    daily_peak = float(diurnal_factor(envelope.peak_at_s, envelope.peak_to_trough, envelope.peak_at_s))
    times, sources = [], []
    for day in range(int(days)):
        offset_s = day * SECONDS_PER_DAY
        # the calendar days this replay day overlaps: one, or two when the start is not at midnight
        touched = levels[day : day + 2] if envelope.start_in_week_s % SECONDS_PER_DAY else levels[day : day + 1]

        def factor(t_s, offset_s=offset_s):
            return mean_factor * envelope.factor(t_s + offset_s, levels)

        day_times, day_sources = _stretched_arrivals(
            trace,
            first_rng if day == 0 else _stream(seed, _DAY_STREAM, day),
            SECONDS_PER_DAY,
            factor,
            mean_factor * float(touched.max()) * daily_peak,
        )
        day_times += offset_s
        times.append(day_times)
        sources.append(day_sources)
    arrival_s = np.concatenate(times)
    del times  # hold one copy of the week, not the days and the week
    source_index = np.concatenate(sources)
    del sources
    weekday = WEEKDAY_NAMES[envelope.first_weekday]
    return _replayed(
        trace,
        arrival_s,
        source_index,
        f"{trace.source or 'trace'} stretched to {days} day{'s' if days != 1 else ''} from {weekday} "
        f"(seed {seed}, weekend -{100 * envelope.weekend_drop_frac:g} %, "
        f"day noise {100 * envelope.day_noise_frac:g} %, base {_base_rps(trace):.4g} req/s)",
    )


# Streams of SeedSequence([seed, stream, index]) beside day 0's Generator(PCG64(seed)); a non-zero
# stream keeps them apart from it (SeedSequence pads short entropy with zeros).
_DAY_STREAM = 1
_NOISE_STREAM = 2


def _stream(seed: int, stream: int, index: int) -> np.random.Generator:
    rng_for(seed)  # the same check of the seed
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence([int(seed), stream, index])))


def _require_stretchable(trace: RequestTrace) -> None:
    if len(trace) < 2 or trace.duration_s <= 0:
        raise PlannerInputError(
            f"{trace.source or 'trace'}: stretching needs at least two requests over a positive span"
        )


def _base_rps(trace: RequestTrace) -> float:
    return len(trace) / _tile_s(trace)


def _tile_s(trace: RequestTrace) -> float:
    # the span plus one mean gap, so the seam between tiles has a typical gap
    return trace.duration_s + trace.duration_s / (len(trace) - 1)


def _stretched_arrivals(trace: RequestTrace, rng: np.random.Generator, duration_s: float, factor, peak_factor: float):
    """Arrival times in ``[0, duration_s)`` and the index of the request each one copies, sorted by time.

    Steps 1-3 of :func:`stretch_trace`, for any rate factor (``factor(t_s)``,
    at most ``peak_factor`` anywhere). Draw order: the phases, then one uniform
    per candidate arrival.
    """
    arrival = np.asarray(trace.arrival_s, dtype=float)
    n = len(arrival)
    tile_s = _tile_s(trace)
    tiles = math.ceil(duration_s / tile_s)
    layers = max(1, math.ceil(peak_factor - 1e-12))
    phases = rng.random((layers, tiles)) * tile_s
    # one row per (layer, tile): the rotated copy of the trace, built in place to hold one array
    shifted = arrival[None, None, :] - phases[:, :, None]
    np.mod(shifted, tile_s, out=shifted)
    shifted += (np.arange(tiles) * tile_s)[None, :, None]
    times = shifted.ravel()
    keep_p = factor(times) / layers
    kept = np.flatnonzero((rng.random(times.size) < keep_p) & (times < duration_s))
    times = times[kept]
    order = np.argsort(times, kind="stable")
    # int32 indices: half the memory of a day's worth of copies (a trace has far fewer than 2**31 requests)
    return times[order], (kept % n).astype(np.int32 if n < 2**31 else np.int64)[order]


def _replayed(trace: RequestTrace, times: np.ndarray, source_index: np.ndarray, source: str) -> RequestTrace:
    return RequestTrace(
        times,
        np.asarray(trace.input_tokens)[source_index],
        np.asarray(trace.output_tokens)[source_index],
        source,
        None if trace.prompt_blocks is None else trace.prompt_blocks.take(source_index),
    )
