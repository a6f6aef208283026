import numpy as np
import pytest

from planner.errors import (
    PlannerInputError,
    require_finite,
    require_fraction,
    require_non_negative,
    require_positive,
)


def test_scalars_come_back_as_floats_and_arrays_as_arrays():
    assert require_positive("x", 3) == 3.0
    assert isinstance(require_positive("x", 3), float)
    out = require_positive("x", [1, 2])
    assert isinstance(out, np.ndarray) and out.tolist() == [1.0, 2.0]


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), "abc", None])
def test_require_positive_names_parameter_and_value(bad):
    with pytest.raises(PlannerInputError, match=r"warmup_s must be a finite number > 0, got"):
        require_positive("warmup_s", bad)


def test_array_message_shows_the_first_bad_element():
    with pytest.raises(PlannerInputError, match=r"got -2\.0"):
        require_non_negative("rates", [1.0, -2.0, 3.0])


def test_fraction_bounds():
    assert require_fraction("f", 1.0) == 1.0
    assert require_fraction("f", 0.0, allow_zero=True) == 0.0
    with pytest.raises(PlannerInputError, match=r"\(0, 1\]"):
        require_fraction("f", 0.0)
    with pytest.raises(PlannerInputError):
        require_fraction("f", 1.01)


def test_finite_accepts_negatives():
    assert require_finite("delta", -5) == -5.0
    with pytest.raises(PlannerInputError):
        require_finite("delta", float("nan"))


def test_is_a_value_error():
    assert issubclass(PlannerInputError, ValueError)
