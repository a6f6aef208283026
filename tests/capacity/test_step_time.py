import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planner.capacity.step_time import (
    fit_step_time,
    max_batch_for_tpot,
    output_throughput_tps,
    slot_headroom_frac,
    step_time_from_throughput_ms,
    step_time_ms,
    throughput_fraction_of_max,
    throughput_headroom_frac,
    tpot_ms,
)
from planner.errors import PlannerInputError

FIXED_MS, PER_SEQ_MS = 6.0, 0.25  # the seed's illustrative constants


def test_w21_one_sequence_against_sixty_four():
    assert step_time_ms(1, FIXED_MS, PER_SEQ_MS) == 6.25
    assert output_throughput_tps(1, FIXED_MS, PER_SEQ_MS) == pytest.approx(160.0)
    assert step_time_ms(64, FIXED_MS, PER_SEQ_MS) == 22.0
    assert output_throughput_tps(64, FIXED_MS, PER_SEQ_MS) == pytest.approx(2909.09, abs=0.01)
    ratio = output_throughput_tps(64, FIXED_MS, PER_SEQ_MS) / output_throughput_tps(1, FIXED_MS, PER_SEQ_MS)
    assert round(ratio) == 18


def test_w22_slot_headroom_overstates_throughput_headroom():
    assert slot_headroom_frac(32, 64) == 0.5
    assert output_throughput_tps(32, FIXED_MS, PER_SEQ_MS) == pytest.approx(2285.7, abs=0.1)
    assert throughput_headroom_frac(32, 64, FIXED_MS, PER_SEQ_MS) == pytest.approx(0.27, abs=0.005)


def test_w23_tpot_bound_of_16_ms_allows_40_sequences():
    assert max_batch_for_tpot(16.0, FIXED_MS, PER_SEQ_MS) == 40
    assert tpot_ms(40, FIXED_MS, PER_SEQ_MS) <= 16.0 < tpot_ms(41, FIXED_MS, PER_SEQ_MS)


def test_w24_target_48_runs_at_92_percent_of_peak():
    assert output_throughput_tps(48, FIXED_MS, PER_SEQ_MS) == pytest.approx(2666.7, abs=0.1)
    assert throughput_fraction_of_max(48, 64, FIXED_MS, PER_SEQ_MS) == pytest.approx(0.92, abs=0.005)


def test_no_batch_meets_an_objective_below_the_fixed_cost():
    assert max_batch_for_tpot(5.0, FIXED_MS, PER_SEQ_MS) == 0


def test_fit_recovers_the_model_from_noisy_points():
    rng = np.random.default_rng(7)
    batch = np.array([1, 2, 4, 8, 16, 32, 48, 64], dtype=float)
    measured = step_time_ms(batch, FIXED_MS, PER_SEQ_MS) * (1 + rng.normal(0, 0.01, batch.size))
    fit = fit_step_time(batch, measured)
    assert fit.fixed_ms == pytest.approx(FIXED_MS, rel=0.05)
    assert fit.per_sequence_ms == pytest.approx(PER_SEQ_MS, rel=0.05)
    assert fit.r_squared > 0.99
    assert fit.n_points == 8
    assert fit.predict_ms(64) == pytest.approx(22.0, rel=0.02)


def test_fit_from_throughput_matches_fit_from_tpot():
    batch = np.array([8.0, 16.0, 32.0, 64.0])
    tps = output_throughput_tps(batch, FIXED_MS, PER_SEQ_MS)
    fit = fit_step_time(batch, step_time_from_throughput_ms(batch, tps))
    assert fit.fixed_ms == pytest.approx(FIXED_MS)
    assert fit.per_sequence_ms == pytest.approx(PER_SEQ_MS)


def test_fit_reports_a_poor_fit():
    fit = fit_step_time([1, 2, 3, 4], [10.0, 2.0, 10.0, 2.0])
    assert fit.r_squared < 0.5


@pytest.mark.parametrize(
    ("batch", "step", "message"),
    [
        ([8, 8, 8], [10, 11, 12], "two distinct batch sizes"),
        ([1, 2], [10.0], "same length"),
        ([1, 2], [10.0, float("nan")], "step_ms"),
        ([0, 2], [10.0, 12.0], "batch_size"),
    ],
)
def test_fit_rejects_unusable_data(batch, step, message):
    with pytest.raises(PlannerInputError, match=message):
        fit_step_time(batch, step)


def test_negative_constants_are_rejected():
    with pytest.raises(PlannerInputError, match="per_sequence_ms"):
        step_time_ms(4, 6.0, -0.1)
    with pytest.raises(PlannerInputError, match="fixed_ms"):
        output_throughput_tps(4, 0.0, 0.25)


@given(fixed_ms=st.floats(0.5, 50), per_seq_ms=st.floats(0.01, 5), a=st.integers(1, 512), b=st.integers(1, 512))
def test_throughput_rises_with_batch_and_tpot_too(fixed_ms, per_seq_ms, a, b):
    low, high = sorted((a, b))
    assert output_throughput_tps(high, fixed_ms, per_seq_ms) >= output_throughput_tps(low, fixed_ms, per_seq_ms)
    assert tpot_ms(high, fixed_ms, per_seq_ms) >= tpot_ms(low, fixed_ms, per_seq_ms)


@given(slo=st.floats(1, 500), fixed_ms=st.floats(0.5, 50), per_seq_ms=st.floats(0.01, 5))
def test_max_batch_meets_the_slo_and_one_more_does_not(slo, fixed_ms, per_seq_ms):
    n = max_batch_for_tpot(slo, fixed_ms, per_seq_ms)
    if n > 0:
        assert tpot_ms(n, fixed_ms, per_seq_ms) <= slo * (1 + 1e-9)
    assert tpot_ms(n + 1, fixed_ms, per_seq_ms) > slo * (1 - 1e-9)


def test_a_falling_tpot_fit_is_flagged_implausible():
    # Multi-turn sweeps with prefix caching: TPOT falls as concurrency rises.
    fit = fit_step_time([1.0, 2.0, 4.0], [44.4, 38.1, 27.0])
    assert fit.per_sequence_ms < 0 and not fit.is_plausible
    assert fit_step_time([1.0, 64.0], [6.25, 22.0]).is_plausible
