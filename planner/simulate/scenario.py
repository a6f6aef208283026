"""The ``scenario`` module describes synthetic traffic as data and turns it into seeded request traces.

A :class:`Scenario` is a kind plus its parameters, read from a dict (a YAML
mapping) by :func:`scenario_from_dict`. :func:`scenario_rate_trace` gives its
rate as a :class:`~planner.simulate.traffic.RateTrace` (what a chart's demand
line shows) and :func:`scenario_trace` the requests, drawn by a seeded
non-homogeneous Poisson process. The kinds:

``constant``
    ``rate_rps`` throughout.
``ramp``
    Linear from ``rate_rps`` at ``ramp_start_s`` to ``end_rate_rps`` at
    ``ramp_end_s`` (default: the whole run), flat outside.
``step``
    ``rate_rps``, then ``step_rate_rps`` from ``step_at_s`` on.
``diurnal``
    ``rate_rps x diurnal_factor(t)``: mean ``rate_rps`` over a ``period_s``
    cycle, busiest at ``peak_at_s``, ``peak_to_trough`` busiest over quietest.
``launch_spike``
    ``rate_rps``, then from ``spike_at_s`` a linear rise to
    ``spike_factor x rate_rps`` (2.5x) over ``rise_s`` (20 s), held for
    ``hold_s`` (default: to the end), then back to ``rate_rps``.
``long_answers``
    ``rate_rps`` throughout; from ``change_at_s`` on, answers are
    ``output_factor`` (3x) longer: same request rate, more work per request.

Continuous shapes (ramp, diurnal, the spike's rise) are held constant over
``resolution_s`` steps (1 s by default) at their value in the middle of the
step, which for the linear pieces is the exact mean of the step.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from planner.errors import PlannerInputError
from planner.simulate.traffic import (
    SECONDS_PER_DAY,
    TOKEN_DISTRIBUTIONS,
    RateTrace,
    RequestTrace,
    diurnal_factor,
)

__all__ = [
    "KIND_PARAMETERS",
    "SCENARIO_KINDS",
    "Scenario",
    "scenario_from_dict",
    "scenario_rate_trace",
    "scenario_trace",
]

COMMON_PARAMETERS = (
    "kind",
    "name",
    "duration_s",
    "rate_rps",
    "mean_input_tokens",
    "mean_output_tokens",
    "token_distribution",
    "resolution_s",
)
KIND_PARAMETERS: dict[str, tuple[str, ...]] = {
    "constant": (),
    "ramp": ("end_rate_rps", "ramp_start_s", "ramp_end_s"),
    "step": ("step_at_s", "step_rate_rps"),
    "diurnal": ("peak_to_trough", "peak_at_s", "period_s"),
    "launch_spike": ("spike_at_s", "spike_factor", "rise_s", "hold_s"),
    "long_answers": ("change_at_s", "output_factor"),
}
"""The parameters each kind accepts beyond the common ones."""
SCENARIO_KINDS = tuple(KIND_PARAMETERS)


@dataclass(frozen=True)
class Scenario:
    """Synthetic traffic: a kind and its parameters (see the module docstring for each kind).

    Attributes
    ----------
    kind : str
        One of :data:`SCENARIO_KINDS`.
    duration_s : float
        Length of the run. [s]
    rate_rps : float
        Base arrival rate. [requests/s]
    mean_input_tokens, mean_output_tokens : float
        Mean prompt and answer length (before ``output_factor``). [tokens]
    token_distribution : {"fixed", "geometric"}
        How each request's lengths are drawn from the means.
    resolution_s : float
        Step of the piecewise-constant rate for continuous shapes. [s]
    name : str
        Label for sources and charts; defaults to the kind.
    end_rate_rps, ramp_start_s, ramp_end_s : float or None
        ``ramp``: final rate [requests/s] and when the ramp runs [s].
    step_at_s, step_rate_rps : float or None
        ``step``: when, and the rate after. [s], [requests/s]
    peak_to_trough, peak_at_s, period_s : float
        ``diurnal``: busiest over quietest [-], time of the peak [s], cycle [s].
    spike_at_s, spike_factor, rise_s, hold_s : float or None
        ``launch_spike``: start [s], multiple of ``rate_rps`` [-], rise time [s], time held [s].
    change_at_s, output_factor : float
        ``long_answers``: when answers lengthen [s] and by what factor [-].
    """

    kind: str
    duration_s: float
    rate_rps: float
    mean_input_tokens: float = 512.0
    mean_output_tokens: float = 240.0
    token_distribution: str = "fixed"
    resolution_s: float = 1.0
    name: str = ""
    end_rate_rps: float | None = None
    ramp_start_s: float = 0.0
    ramp_end_s: float | None = None
    step_at_s: float | None = None
    step_rate_rps: float | None = None
    peak_to_trough: float = 3.0
    peak_at_s: float = 14 * 3600.0
    period_s: float = SECONDS_PER_DAY
    spike_at_s: float | None = None
    spike_factor: float = 2.5
    rise_s: float = 20.0
    hold_s: float | None = None
    change_at_s: float = 0.0
    output_factor: float = 3.0

    def __post_init__(self) -> None:
        where = f"scenario {self.name or self.kind!r}"
        if self.kind not in KIND_PARAMETERS:
            raise PlannerInputError(f"{where}: kind must be one of {', '.join(SCENARIO_KINDS)}, got {self.kind!r}")
        if self.token_distribution not in TOKEN_DISTRIBUTIONS:
            raise PlannerInputError(
                f"{where}: token_distribution must be one of {', '.join(TOKEN_DISTRIBUTIONS)}, "
                f"got {self.token_distribution!r}"
            )
        for field in fields(self):
            value = getattr(self, field.name)
            if field.name in ("kind", "name", "token_distribution") or value is None:
                continue
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise PlannerInputError(f"{where}: {field.name} must be a finite number, got {value!r}")
        positive = [
            "duration_s",
            "resolution_s",
            "mean_input_tokens",
            "mean_output_tokens",
            "period_s",
            "spike_factor",
            "output_factor",
        ]
        for name in positive:
            if not getattr(self, name) > 0:
                raise PlannerInputError(f"{where}: {name} must be > 0, got {getattr(self, name)!r}")
        for name in ("rate_rps", "end_rate_rps", "step_rate_rps", "rise_s", "hold_s", "ramp_start_s", "change_at_s"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise PlannerInputError(f"{where}: {name} must be >= 0, got {value!r}")
        for name in ("mean_input_tokens", "mean_output_tokens"):
            if getattr(self, name) < 1:
                raise PlannerInputError(f"{where}: {name} must be >= 1 token, got {getattr(self, name)!r}")
        if self.peak_to_trough < 1:
            raise PlannerInputError(f"{where}: peak_to_trough must be >= 1, got {self.peak_to_trough!r}")
        required = {"ramp": ("end_rate_rps",), "step": ("step_at_s", "step_rate_rps"), "launch_spike": ("spike_at_s",)}
        for name in required.get(self.kind, ()):
            if getattr(self, name) is None:
                raise PlannerInputError(f"{where}: a {self.kind} scenario needs {name}")
        if self.kind == "ramp" and self.ramp_end_s is not None and self.ramp_end_s <= self.ramp_start_s:
            raise PlannerInputError(
                f"{where}: ramp_end_s must be after ramp_start_s ({self.ramp_start_s!r}), got {self.ramp_end_s!r}"
            )

    @property
    def label(self) -> str:
        return self.name or self.kind

    def rate_at(self, t_s) -> np.ndarray:
        """The scenario's instantaneous rate (the continuous shape, before steps). [requests/s]"""
        t = np.asarray(t_s, dtype=float)
        base = np.full_like(t, float(self.rate_rps))
        if self.kind == "ramp":
            assert self.end_rate_rps is not None  # required for a ramp by __post_init__
            end_s = self.duration_s if self.ramp_end_s is None else self.ramp_end_s
            frac = np.clip((t - self.ramp_start_s) / (end_s - self.ramp_start_s), 0.0, 1.0)
            return self.rate_rps + (self.end_rate_rps - self.rate_rps) * frac
        if self.kind == "step":
            assert self.step_rate_rps is not None  # required for a step by __post_init__
            return np.where(t >= self.step_at_s, float(self.step_rate_rps), base)
        if self.kind == "diurnal":
            return self.rate_rps * diurnal_factor(t, self.peak_to_trough, self.peak_at_s, self.period_s)
        if self.kind == "launch_spike":
            since = t - self.spike_at_s
            rise = np.clip(since / self.rise_s, 0.0, 1.0) if self.rise_s > 0 else (since >= 0).astype(float)
            factor = 1.0 + (self.spike_factor - 1.0) * rise
            if self.hold_s is not None:
                factor = np.where(since >= self.rise_s + self.hold_s, 1.0, factor)
            return self.rate_rps * np.where(since >= 0, factor, 1.0)
        return base

    def output_factor_at(self, t_s) -> np.ndarray:
        """Multiplier on ``mean_output_tokens`` at each time (``long_answers`` only). [-]"""
        t = np.asarray(t_s, dtype=float)
        if self.kind == "long_answers":
            return np.where(t >= self.change_at_s, float(self.output_factor), 1.0)
        return np.ones_like(t)


def scenario_from_dict(data: Mapping, *, where: str = "scenario") -> Scenario:
    """A :class:`Scenario` from a mapping (a parsed YAML document).

    Raises
    ------
    PlannerInputError
        On a missing ``kind``, ``duration_s`` or ``rate_rps``, a key the kind
        does not take (naming it and the accepted keys), or a bad value.
    """
    if not isinstance(data, Mapping):
        raise PlannerInputError(f"{where}: expected a mapping of scenario parameters, got {type(data).__name__}")
    kind = data.get("kind")
    if kind not in KIND_PARAMETERS:
        raise PlannerInputError(f"{where}: kind must be one of {', '.join(SCENARIO_KINDS)}, got {kind!r}")
    allowed = COMMON_PARAMETERS + KIND_PARAMETERS[kind]
    for key in data:
        if key not in allowed:
            raise PlannerInputError(
                f"{where}: unknown key {key!r} for a {kind} scenario (accepted: {', '.join(allowed)})"
            )
    for key in ("duration_s", "rate_rps"):
        if key not in data:
            raise PlannerInputError(f"{where}: missing key {key!r}")
    # A str, a float or None per key, as each field takes; Scenario.__post_init__ checks them.
    values: dict[str, Any] = {}
    for key, value in data.items():
        if key in ("kind", "name", "token_distribution"):
            values[key] = str(value)
        elif value is None:
            values[key] = None
        else:
            try:
                values[key] = float(value)
            except (TypeError, ValueError):
                raise PlannerInputError(f"{where}: {key} must be a number, got {value!r}") from None
    return Scenario(**values)


def scenario_rate_trace(scenario: Scenario) -> RateTrace:
    """The scenario's rate as ``resolution_s`` steps, each at its mid-step value."""
    starts = np.arange(0.0, scenario.duration_s, scenario.resolution_s)
    mids = (starts + np.minimum(starts + scenario.resolution_s, scenario.duration_s)) / 2.0  # last step may be short
    return RateTrace(
        t_s=starts,
        rate_rps=scenario.rate_at(mids),
        end_s=float(scenario.duration_s),
        mean_input_tokens=np.full(len(starts), float(scenario.mean_input_tokens)),
        mean_output_tokens=scenario.mean_output_tokens * scenario.output_factor_at(mids),
        source=f"scenario {scenario.label}",
    )


def scenario_trace(scenario: Scenario, seed: int) -> RequestTrace:
    """Requests for ``scenario``; the same seed gives identical arrays, bit for bit.

    Parameters
    ----------
    scenario : Scenario
    seed : int
        Seed for ``numpy.random.Generator(PCG64(seed))``.

    Returns
    -------
    RequestTrace
    """
    return scenario_rate_trace(scenario).requests(seed, token_distribution=scenario.token_distribution)
