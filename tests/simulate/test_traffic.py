"""Tests for planner.simulate.traffic: Poisson arrivals from a rate, token draws, determinism, stretching to days."""

from __future__ import annotations

import math
import tracemalloc

import numpy as np
import pytest

from planner.errors import PlannerInputError
from planner.readers.trace import read_request_trace
from planner.simulate.traffic import (
    PromptBlocks,
    RateTrace,
    RequestTrace,
    WeeklyEnvelope,
    diurnal_factor,
    draw_token_counts,
    rng_for,
    stretch_days,
    stretch_trace,
)


def _rates(t_s, rate_rps, end_s, mean_in=100.0, mean_out=50.0):
    n = len(t_s)
    return RateTrace(
        np.asarray(t_s, float), np.asarray(rate_rps, float), end_s, np.full(n, mean_in), np.full(n, mean_out), "test"
    )


def _within_sigmas(count, expected, sigmas=4.0):
    return abs(count - expected) <= sigmas * math.sqrt(expected)


def test_poisson_counts_match_the_rate_over_a_long_run():
    rates = _rates([0, 1000, 3000, 6000], [5.0, 0.5, 12.0, 0.0], 20_000.0)
    trace = rates.requests(11)
    assert rates.expected_requests == 5 * 1000 + 0.5 * 2000 + 12 * 3000
    assert _within_sigmas(len(trace), rates.expected_requests)
    for start, end, rate in ((0, 1000, 5.0), (1000, 3000, 0.5), (3000, 6000, 12.0)):
        inside = np.count_nonzero((trace.arrival_s >= start) & (trace.arrival_s < end))
        assert _within_sigmas(inside, rate * (end - start))
    assert not np.any(trace.arrival_s >= 6000)  # the zero-rate step
    trace.check()


def test_arrivals_are_poisson_not_just_the_right_mean():
    """Counts per second have variance equal to the mean, and gaps are exponential (CV 1)."""
    trace = _rates([0], [8.0], 50_000.0).requests(5)
    counts = np.bincount(trace.arrival_s.astype(int), minlength=50_000)
    assert counts.var() / counts.mean() == pytest.approx(1.0, abs=0.03)
    gaps = np.diff(trace.arrival_s)
    assert gaps.std() / gaps.mean() == pytest.approx(1.0, abs=0.02)


def test_same_seed_same_arrays_bit_for_bit():
    rates = _rates([0, 60], [3.0, 9.0], 600.0)
    a = rates.requests(42, token_distribution="geometric")
    b = rates.requests(42, token_distribution="geometric")
    c = rates.requests(43, token_distribution="geometric")
    for field in ("arrival_s", "input_tokens", "output_tokens"):
        assert getattr(a, field).tobytes() == getattr(b, field).tobytes()
    assert not np.array_equal(a.arrival_s, c.arrival_s)


def test_token_draws():
    rng = rng_for(0)
    assert draw_token_counts(np.array([1.0, 2.5, 240.4]), "fixed", rng).tolist() == [1, 3, 240]
    draws = draw_token_counts(np.full(200_000, 240.0), "geometric", rng)
    assert draws.min() >= 1 and draws.mean() == pytest.approx(240.0, rel=0.01)
    assert draws.std() == pytest.approx(math.sqrt(240.0 * 239.0), rel=0.02)  # geometric: sqrt(1-p)/p
    with pytest.raises(PlannerInputError, match="token_distribution must be one of fixed, geometric"):
        draw_token_counts(np.ones(2), "normal", rng)


@pytest.mark.parametrize("seed", [-1, 1.5, True, "7"])
def test_seed_must_be_a_non_negative_integer(seed):
    with pytest.raises(PlannerInputError, match="seed must be an integer >= 0"):
        rng_for(seed)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"t_s": [0, 0]}, "step 2: t_s 0.0 must be after the previous step's 0.0"),
        ({"rate_rps": [1, -1]}, "rate_rps must be a finite number >= 0"),
        ({"end_s": 5.0}, "end_s must be after the last step's start 10.0"),
    ],
)
def test_rate_trace_checks(kwargs, message):
    args = {"t_s": [0, 10], "rate_rps": [1, 1], "end_s": 20.0} | kwargs
    with pytest.raises(PlannerInputError, match=message):
        _rates(args["t_s"], args["rate_rps"], args["end_s"])


def test_request_trace_check_names_the_request():
    ok = RequestTrace(np.array([0.0, 1.0]), np.array([0, 5]), np.array([1, 2]), "t")
    assert ok.check() is ok and ok.mean_rate_rps == 2.0
    with pytest.raises(PlannerInputError, match=r"request 2: arrival_s 0\.5 is before the previous request's 1\.0"):
        RequestTrace(np.array([1.0, 0.5]), np.array([1, 1]), np.array([1, 1]), "t").check()
    with pytest.raises(PlannerInputError, match="request 1: output_tokens must be >= 1, got 0"):
        RequestTrace(np.array([0.0]), np.array([1]), np.array([0]), "t").check()


def test_diurnal_factor_mean_one_and_ratio():
    t = np.arange(0.0, 86_400.0, 1.0)
    f = diurnal_factor(t, 4.0, 50_400.0)
    assert f.mean() == pytest.approx(1.0, abs=1e-9)
    assert f.max() / f.min() == pytest.approx(4.0, rel=1e-6)
    assert t[np.argmax(f)] == 50_400.0


# ------------------------------------------------------------------ stretching


def _hour(seed=0, n=20_000):
    """A bursty synthetic hour: arrivals in clusters, lengths from two populations."""
    rng = np.random.default_rng(seed)
    centres = np.sort(rng.random(n // 20) * 3600)
    arrival = np.sort(np.clip((centres[:, None] + rng.exponential(2.0, (len(centres), 20))).ravel(), 0, 3600))
    arrival -= arrival[0]
    short = rng.random(n) < 0.7
    return RequestTrace(
        arrival,
        np.where(short, rng.integers(50, 500, n), rng.integers(2000, 6000, n)),
        np.where(short, rng.integers(5, 60, n), rng.integers(100, 900, n)),
        "hour",
    )


def test_stretch_with_a_flat_envelope_is_the_hour_rotated_into_every_tile():
    """peak_to_trough 1, mean_factor 1: nothing is thinned, so every tile holds every request once."""
    hour = _hour()
    day = stretch_trace(hour, 1, peak_to_trough=1.0)
    tile_s = hour.duration_s + hour.duration_s / (len(hour) - 1)
    tiles = int(86_400 // tile_s)
    per_tile = np.bincount((day.arrival_s // tile_s).astype(int))[:tiles]
    assert np.all(per_tile == len(hour))
    first = day.arrival_s < tile_s
    assert sorted(zip(day.input_tokens[first], day.output_tokens[first], strict=True)) == sorted(
        zip(hour.input_tokens, hour.output_tokens, strict=True)
    )


def test_stretch_follows_the_envelope_and_keeps_the_lengths():
    hour = _hour()
    ratio, peak_at_s = 3.0, 14 * 3600.0
    day = stretch_trace(hour, 7, peak_to_trough=ratio, peak_at_s=peak_at_s)
    day.check()
    assert day.duration_s < 86_400.0
    rate = len(hour) / (hour.duration_s + hour.duration_s / (len(hour) - 1))
    assert _within_sigmas(len(day), rate * 86_400.0, sigmas=5)  # the day's mean rate is the hour's
    hourly = np.bincount((day.arrival_s // 3600).astype(int), minlength=24)
    expected = rate * 3600 * diurnal_factor(np.arange(24) * 3600 + 1800, ratio, peak_at_s)
    # bursts make hourly counts over-dispersed; 10 % is well outside chance at ~10k-30k per hour
    np.testing.assert_allclose(hourly, expected, rtol=0.10)
    assert hourly[14] / hourly[2] == pytest.approx(ratio, rel=0.12)
    # lengths: every request is an original one, and the distribution is the hour's
    pairs = set(zip(hour.input_tokens.tolist(), hour.output_tokens.tolist(), strict=True))
    assert set(zip(day.input_tokens.tolist(), day.output_tokens.tolist(), strict=True)) <= pairs
    for field in ("input_tokens", "output_tokens"):
        src, out = getattr(hour, field), getattr(day, field)
        np.testing.assert_allclose(np.quantile(out, [0.1, 0.5, 0.9]), np.quantile(src, [0.1, 0.5, 0.9]), rtol=0.05)


def test_stretch_keeps_burstiness_within_the_hour():
    """At the peak (keep probability 1) the 10 s counts are as over-dispersed as the hour's own."""
    hour = _hour()
    day = stretch_trace(hour, 3, peak_to_trough=1.0)

    def dispersion(arrival, start, end):
        counts = np.bincount(((arrival[(arrival >= start) & (arrival < end)] - start) // 10).astype(int))
        return counts.var() / counts.mean()

    own = dispersion(hour.arrival_s, 0, 3500)
    assert own > 5  # clustered, far from Poisson's 1
    assert dispersion(day.arrival_s, 7200, 10_700) == pytest.approx(own, rel=0.25)


def test_stretch_above_the_hours_rate_overlays_layers():
    hour = _hour(n=4000)
    day = stretch_trace(hour, 2, mean_factor=2.0, peak_to_trough=2.0, duration_s=6 * 3600.0, peak_at_s=3 * 3600.0)
    rate = len(hour) / (hour.duration_s + hour.duration_s / (len(hour) - 1))
    f = diurnal_factor(np.arange(0.0, 6 * 3600.0, 1.0) + 0.5, 2.0, 3 * 3600.0, 86_400.0)
    assert _within_sigmas(len(day), 2.0 * rate * f.sum(), sigmas=6)


def test_stretch_is_seeded(shared_dir):
    hour = read_request_trace(shared_dir / "traces" / "AzureLLMInferenceTrace_code.csv")
    a, b, c = (stretch_trace(hour, s) for s in (5, 5, 6))
    assert a.arrival_s.tobytes() == b.arrival_s.tobytes() and a.output_tokens.tobytes() == b.output_tokens.tobytes()
    assert not np.array_equal(a.arrival_s, c.arrival_s)
    assert len(a) == pytest.approx(len(hour) / hour.duration_s * 86_400, rel=0.05)


def test_stretch_needs_two_requests():
    with pytest.raises(PlannerInputError, match="needs at least two requests"):
        stretch_trace(RequestTrace(np.array([0.0]), np.array([1]), np.array([1]), "one"), 0)


def test_until_keeps_the_arrivals_before_the_end():
    trace = RequestTrace(np.array([0.0, 1.0, 2.0, 2.0, 3.5]), np.arange(5), np.arange(1, 6), "t")
    short = trace.until(2.0)
    assert short.arrival_s.tolist() == [0.0, 1.0] and short.output_tokens.tolist() == [1, 2]
    assert len(trace.until(10.0)) == 5 and len(trace.until(0.0)) == 0


# ------------------------------------------------------------------ several days under a weekly envelope


def _daily_counts(trace, days):
    return np.bincount((trace.arrival_s // 86_400).astype(int), minlength=days)


def test_one_day_is_stretch_trace_bit_for_bit():
    hour = _hour()
    for seed in (0, 7):
        a, b = stretch_days(hour, seed, 1), stretch_trace(hour, seed)
        for field in ("arrival_s", "input_tokens", "output_tokens"):
            assert getattr(a, field).tobytes() == getattr(b, field).tobytes()


def test_one_day_of_the_azure_trace_is_stretch_trace(shared_dir):
    hour = read_request_trace(shared_dir / "traces" / "AzureLLMInferenceTrace_conv.csv")
    a, b = stretch_days(hour, 3, 1), stretch_trace(hour, 3)
    assert a.arrival_s.tobytes() == b.arrival_s.tobytes() and a.output_tokens.tobytes() == b.output_tokens.tobytes()


def test_n_days_long_sorted_and_every_day_busy():
    hour = _hour(n=4000)
    week = stretch_days(hour, 1, 7)
    week.check()
    assert 7 * 86_400 - 600 < week.duration_s < 7 * 86_400
    counts = _daily_counts(week, 7)
    assert len(counts) == 7 and counts.min() > 0.5 * counts.max()
    assert "stretched to 7 days from Monday (seed 1, weekend -30 %, day noise 5 %" in week.source


def test_weekend_runs_lower_by_the_stated_fraction():
    hour = _hour(n=4000)
    rate = len(hour) / (hour.duration_s + hour.duration_s / (len(hour) - 1))
    flat = WeeklyEnvelope(day_noise_frac=0.0, weekend_drop_frac=0.4)
    counts = _daily_counts(stretch_days(hour, 2, 14, envelope=flat), 14)
    weekday, weekend = counts[[0, 1, 2, 3, 4, 7, 8, 9, 10, 11]], counts[[5, 6, 12, 13]]
    # without noise a weekday holds the trace's rate for a day and a weekend day 60 % of it
    assert weekday.mean() == pytest.approx(rate * 86_400, rel=0.02)
    assert weekend.mean() / weekday.mean() == pytest.approx(0.6, rel=0.03)
    # and the default envelope keeps weekends below every weekday, noise and all
    counts = _daily_counts(stretch_days(hour, 2, 7), 7)
    assert counts[5:].max() < counts[:5].min()


def test_the_daily_cycle_peaks_at_the_stated_hour_every_day():
    hour = _hour(n=4000)
    week = stretch_days(hour, 4, 7, envelope=WeeklyEnvelope(day_noise_frac=0.0, peak_at_s=10 * 3600.0))
    hourly = np.bincount((week.arrival_s // 3600).astype(int), minlength=7 * 24).reshape(7, 24)
    # each day's first harmonic: its phase is the peak hour, its amplitude (r - 1) / (r + 1) = 0.5 of the mean
    harmonic = hourly @ np.exp(2j * np.pi * (np.arange(24) + 0.5) / 24) / hourly.sum(axis=1)
    peak_hour = np.angle(harmonic) * 24 / (2 * np.pi) % 24
    np.testing.assert_allclose(peak_hour, 10.0, atol=0.25)
    np.testing.assert_allclose(2 * np.abs(harmonic), 0.5, rtol=0.05)


def test_noise_is_seeded_reproducible_and_of_the_stated_spread():
    hour = _hour(n=4000)
    a, b, c = (stretch_days(hour, s, 3) for s in (5, 5, 6))
    for field in ("arrival_s", "input_tokens", "output_tokens"):
        assert getattr(a, field).tobytes() == getattr(b, field).tobytes()
    assert not np.array_equal(a.arrival_s[: len(c)], c.arrival_s[: len(a)])
    envelope = WeeklyEnvelope(weekend_drop_frac=0.0, day_noise_frac=0.08)
    levels = envelope.day_levels(4001, 11)
    assert levels[0] == 1.0  # the first day carries the trace's own level
    assert np.array_equal(levels, envelope.day_levels(4001, 11))
    assert not np.array_equal(levels, envelope.day_levels(4001, 12))
    assert levels[1:].mean() == pytest.approx(1.0, abs=0.01)
    assert np.log(levels[1:]).std() == pytest.approx(0.08, rel=0.05)
    assert np.array_equal(WeeklyEnvelope(day_noise_frac=0.0).day_levels(7, 3), [1, 1, 1, 1, 1, 0.7, 0.7])


def test_a_longer_replay_begins_with_the_shorter_one():
    hour = _hour(n=4000)
    week, fortnight = stretch_days(hour, 9, 7), stretch_days(hour, 9, 14)
    head = fortnight.until(7 * 86_400.0)
    assert head.arrival_s.tobytes() == week.arrival_s.tobytes()
    assert head.input_tokens.tobytes() == week.input_tokens.tobytes()


def test_the_start_shifts_the_week():
    hour = _hour(n=4000)
    saturday = WeeklyEnvelope(day_noise_frac=0.0, start_in_week_s=5 * 86_400.0)
    counts = _daily_counts(stretch_days(hour, 1, 3, envelope=saturday), 3)
    assert counts[0] / counts[2] == pytest.approx(0.7, rel=0.05)
    assert counts[1] / counts[2] == pytest.approx(0.7, rel=0.05)  # Saturday, Sunday, then Monday
    assert "from Saturday" in stretch_days(hour, 1, 1, envelope=saturday).source
    # Friday 18:00: six hours of a weekday, then the weekend; the daily peak stays at 14:00 UTC
    friday_evening = WeeklyEnvelope(day_noise_frac=0.0, start_in_week_s=4 * 86_400.0 + 18 * 3600.0)
    day = stretch_days(hour, 2, 1, envelope=friday_evening)
    hourly = np.bincount((day.arrival_s // 3600).astype(int), minlength=24)
    expected = friday_evening.factor(np.arange(24) * 3600.0 + 1800.0, friday_evening.day_levels(2, 2))
    np.testing.assert_allclose(hourly / hourly.sum(), expected / expected.sum(), atol=0.006)
    # the step at midnight: Saturday's hours against Friday's, as the envelope says
    assert hourly[6:].sum() / hourly[:6].sum() == pytest.approx(expected[6:].sum() / expected[:6].sum(), rel=0.03)
    assert expected[6] / expected[5] == pytest.approx(
        0.7 * diurnal_factor(1800.0, 3, 14 * 3600) / diurnal_factor(-1800.0, 3, 14 * 3600)
    )


def test_prompt_blocks_follow_their_requests_when_stretched():
    rng = np.random.default_rng(0)
    n = 500
    lengths = rng.integers(1, 6, n)
    offsets = np.concatenate(([0], np.cumsum(lengths)))
    blocks = PromptBlocks(np.arange(offsets[-1]), offsets, np.arange(n))
    hour = RequestTrace(np.sort(rng.uniform(0, 3600, n)), lengths * 512, np.full(n, 10), "blocks", blocks)
    week = stretch_days(hour, 0, 2)
    assert week.prompt_blocks is not None and len(week.prompt_blocks) == len(week)
    assert np.shares_memory(week.prompt_blocks.block_ids, blocks.block_ids)  # the lists are not copied
    for i in range(0, len(week), 997):
        assert len(week.prompt_blocks.of(i)) * 512 == week.input_tokens[i]
    assert hour.until(1800.0).prompt_blocks.row.tolist() == list(range(len(hour.until(1800.0))))


def test_a_week_holds_about_one_copy_of_its_arrays():
    """Built a day at a time: the peak allocation stays near the result's own size, not a week of candidates."""
    hour = _hour()
    tracemalloc.start()
    try:
        week = stretch_days(hour, 0, 7)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    result = week.arrival_s.nbytes + week.input_tokens.nbytes + week.output_tokens.nbytes
    assert result == 24 * len(week) and len(week) > 2_500_000
    assert peak < 1.5 * result


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda h: stretch_days(h, 0, 0), "days must be an integer >= 1, got 0"),
        (lambda h: stretch_days(h, 0, 2.0), "days must be an integer >= 1, got 2.0"),
        (lambda h: stretch_days(h, -1, 2), "seed must be an integer >= 0"),
        (lambda h: stretch_days(h, 0, 1, mean_factor=0.0), "mean_factor must be a finite number > 0"),
        (lambda h: WeeklyEnvelope(weekend_drop_frac=1.0), "weekend_drop_frac must be below 1"),
        (lambda h: WeeklyEnvelope(weekend_drop_frac=-0.1), r"weekend_drop_frac must be a fraction in \[0, 1\]"),
        (lambda h: WeeklyEnvelope(day_noise_frac=-0.1), "day_noise_frac must be a finite number >= 0"),
        (lambda h: WeeklyEnvelope(start_in_week_s=7 * 86_400.0), "start_in_week_s must be within one week of Monday"),
        (lambda h: WeeklyEnvelope(peak_to_trough=0.5), "peak_to_trough must be >= 1"),
        (
            lambda h: stretch_days(RequestTrace(np.array([0.0]), np.array([1]), np.array([1]), "one"), 0, 2),
            "needs at least two requests",
        ),
    ],
)
def test_stretch_days_refuses_bad_arguments(call, message):
    with pytest.raises(PlannerInputError, match=message):
        call(_hour(n=200))


def test_prompt_blocks_check_their_shape():
    with pytest.raises(PlannerInputError, match="offsets must start at 0"):
        PromptBlocks(np.arange(3), np.array([0, 2]), np.array([0]))
    with pytest.raises(PlannerInputError, match="must name one of the 1 lists"):
        PromptBlocks(np.arange(3), np.array([0, 3]), np.array([1]))
    blocks = PromptBlocks(np.arange(3), np.array([0, 3]), np.array([0, 0]))
    with pytest.raises(PlannerInputError, match="prompt_blocks must have one entry per request, got 2 for 1"):
        RequestTrace(np.array([0.0]), np.array([1]), np.array([1]), "t", blocks)
