"""The ``errors`` module defines the error raised for bad input and the checks that raise it."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


class PlannerInputError(ValueError):
    """An input file, field or value the planner cannot use.

    The message names where the problem is (file, row, key or parameter)
    and what was expected, so the command line prints it as it is and
    exits with status 2.

    Parameters
    ----------
    message : str
        The whole message.
    parameter, expected, value : optional
        For a bad value of a named function parameter: its name, what was
        expected and what came. The command line uses them to restate the
        message with the flag the user typed instead of the parameter name.
    """

    def __init__(
        self, message: str, *, parameter: str | None = None, expected: str | None = None, value: object = None
    ) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.expected = expected
        self.value = value


def require_positive(name: str, value):
    """Return ``value`` (a float or float array) if every element is finite and > 0.

    Parameters
    ----------
    name : str
        Parameter name, quoted in the message.
    value : float or array_like
        The value to check.

    Raises
    ------
    PlannerInputError
        Naming the parameter and the offending value.
    """
    return _require(name, value, lambda v: v > 0, "a finite number > 0")


def require_non_negative(name: str, value):
    """Return ``value`` if every element is finite and >= 0, else raise."""
    return _require(name, value, lambda v: v >= 0, "a finite number >= 0")


def require_fraction(name: str, value, *, allow_zero: bool = False):
    """Return ``value`` if every element lies in (0, 1] (or [0, 1] with ``allow_zero``)."""
    if allow_zero:
        return _require(name, value, lambda v: (v >= 0) & (v <= 1), "a fraction in [0, 1]")
    return _require(name, value, lambda v: (v > 0) & (v <= 1), "a fraction in (0, 1]")


def require_finite(name: str, value):
    """Return ``value`` if every element is a finite number, else raise."""
    return _require(name, value, lambda v: np.ones_like(v, dtype=bool), "a finite number")


def _require(name: str, value, ok: Callable, expected: str):
    try:
        array = np.asarray(value, dtype=float)
    except (TypeError, ValueError):
        raise PlannerInputError(
            f"{name} must be {expected}, got {value!r}", parameter=name, expected=expected, value=value
        ) from None
    bad = ~np.isfinite(array) | ~np.asarray(ok(array), dtype=bool)
    if np.any(bad):
        shown = float(array.flat[int(np.argmax(bad.ravel()))]) if array.ndim else value
        raise PlannerInputError(
            f"{name} must be {expected}, got {shown!r}", parameter=name, expected=expected, value=shown
        )
    if array.ndim == 0:
        return float(array)
    return array
