"""The ``knee`` module finds a replica's knee in a load test and derives autoscaling targets.

The knee K is the highest load step that still meets the TTFT p99 and ITL
p99 objectives with zero preemptions. From it come the per-replica
concurrency target T = K / (1 + expected growth during one warmup), a KV
usage target a little under the KV usage seen at the knee, the drain rate
mu = K / W and a queue-depth threshold W_max x mu (see
:mod:`planner.capacity.headroom` and :mod:`planner.capacity.littles_law`), plus a fit of the
step-time model (:mod:`planner.capacity.step_time`) to the measured TPOT and output
throughput.

The knee is taken as the last step of the unbroken run of passing steps from
the lightest load: a step that passes again after a failing one is reported
(``later_passing_steps``) but not used, since one lucky step above a failure
is noise, not capacity.

Three outcomes are findings, not errors: no step meets the objectives (the
:class:`Knee` then has status ``"no passing step"`` and says by how much the
lightest step misses), every step passes (the knee is a lower bound), and a
sweep of fewer than :data:`MIN_SWEEP_STEPS` steps (the targets are withheld,
since one or two steps cannot show where latency turns up).

In a sweep by request rate the knee's concurrency is the requests in flight
at the knee step, by Little's law L = X x W: X the measured throughput (or,
where the file has none, the offered rate, which a step that met its
objectives kept up with) and W the mean request duration (the mean
end-to-end latency, or TTFT + TPOT x (output tokens - 1)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.capacity.headroom import target_for_step
from planner.capacity.littles_law import drain_rate_rps, queue_threshold_requests
from planner.capacity.step_time import StepTimeFit, fit_step_time, step_time_from_throughput_ms
from planner.errors import PlannerInputError, require_non_negative, require_positive

__all__ = [
    "MIN_SWEEP_STEPS",
    "Knee",
    "LoadTestThresholds",
    "Shortfall",
    "find_knee",
    "in_flight_by_step",
    "knee_finding",
    "knee_grid",
    "kv_usage_target_frac",
    "step_name",
    "sweep_commands",
    "targets_summary",
    "thresholds_from_loadtest",
    "value_at_knee",
]

DEFAULT_KV_MARGIN_FRAC = 0.05  # KV target sits 5 % (relative) under the usage at the knee
# Two points always make a line; a third is the least that shows latency turning up.
MIN_SWEEP_STEPS = 3

_METRIC_NAMES = {"ttft_p99": "TTFT p99", "itl_p99": "ITL p99", "preemptions": "preemptions"}


@dataclass(frozen=True)
class Shortfall:
    """How far one step misses one objective.

    Attributes
    ----------
    metric : str
        ``"ttft_p99"``, ``"itl_p99"`` or ``"preemptions"``.
    measured : float
        The step's value. [ms], or [count] for preemptions
    objective : float
        The objective (0 for preemptions). [ms], or [count]
    """

    metric: str
    measured: float
    objective: float

    @property
    def excess(self) -> float:
        """measured - objective, in the metric's unit."""
        return self.measured - self.objective

    def describe(self, itl_name: str = "ITL") -> str:
        """One phrase, e.g. ``"ITL p99 by 70 ms (120 ms against 50 ms)"``."""
        if self.metric == "preemptions":
            return f"zero preemptions ({self.measured:g} preempted)"
        name = _METRIC_NAMES[self.metric].replace("ITL", itl_name)
        return f"{name} by {_ms(self.excess)} ms ({_ms(self.measured)} ms against {_ms(self.objective)} ms)"


def _ms(value: float) -> str:
    # Milliseconds to a reader's precision: whole above 10, one decimal under.
    return f"{value:,.0f}" if abs(value) >= 10 else f"{value:,.1f}"


@dataclass(frozen=True)
class Knee:
    """Where a load test stops meeting its objectives.

    Attributes
    ----------
    index : int
        Position of the last passing step (steps sorted by load); -1 when no
        step passes.
    step : float
        Load at the knee, in the step variable's unit; between ``index`` and
        the next step when interpolated; NaN when no step passes.
    interpolated : bool
        True when ``step`` lies between two measured steps.
    limited_by : str
        What failed at the next step: ``"ttft_p99"``, ``"itl_p99"``,
        ``"preemptions"``, several joined by ``+``, or ``"none"`` when every
        step passed (the knee is then only a lower bound); when no step
        passes, what the lightest step misses.
    lower_bound : bool
        Every step passed: the real knee is above the heaviest step tested.
    later_passing_steps : tuple of int
        Steps above the first failure that pass again (not used for the knee).
    status : str
        ``"knee"``, ``"lower bound"`` or ``"no passing step"``.
    lightest_misses : tuple of Shortfall
        When no step passes: each objective the lightest step misses, and by how much.
    """

    index: int
    step: float
    interpolated: bool
    limited_by: str
    lower_bound: bool
    later_passing_steps: tuple[int, ...]
    status: str = "knee"
    lightest_misses: tuple[Shortfall, ...] = ()

    @property
    def found(self) -> bool:
        """True unless no step meets the objectives."""
        return self.status != "no passing step"


def find_knee(
    step,
    ttft_p99_ms,
    itl_p99_ms,
    preemptions=None,
    *,
    ttft_p99_slo_ms: float,
    itl_p99_slo_ms: float,
    interpolate: bool = False,
) -> Knee:
    """Find the knee: the highest step of the first run of steps that meet every objective.

    Parameters
    ----------
    step : array_like
        Load at each step, increasing (concurrency [requests] or request rate
        [requests/s]; ``inf`` allowed for the last step).
    ttft_p99_ms, itl_p99_ms : array_like
        Measured 99th percentiles at each step. [ms]
    preemptions : array_like, optional
        Preemptions during each step [count]; NaN (or None) where not measured,
        which is then not checked.
    ttft_p99_slo_ms, itl_p99_slo_ms : float
        The objectives. [ms]
    interpolate : bool
        Interpolate linearly between the knee and the first failing step to
        the load where the failing percentile crosses its objective (not when
        only preemptions failed, or when the next step is ``inf``).

    Returns
    -------
    Knee
        With status ``"no passing step"`` (index -1, step NaN) and the
        lightest step's shortfalls when even it misses an objective: that is
        a finding about the replica, not bad input.

    Raises
    ------
    PlannerInputError
        If the inputs are malformed.

    Examples
    --------
    >>> knee = find_knee([16, 32, 48, 64], [300, 500, 900, 2500], [20, 30, 45, 70],
    ...                  ttft_p99_slo_ms=2000, itl_p99_slo_ms=50)
    >>> knee.step, knee.limited_by
    (48.0, 'ttft_p99+itl_p99')
    """
    step, ttft, itl, preempt = _checked_sweep(step, ttft_p99_ms, itl_p99_ms, preemptions)
    ttft_p99_slo_ms = require_positive("ttft_p99_slo_ms", ttft_p99_slo_ms)
    itl_p99_slo_ms = require_positive("itl_p99_slo_ms", itl_p99_slo_ms)

    failures = [_failures(ttft[i], itl[i], preempt[i], ttft_p99_slo_ms, itl_p99_slo_ms) for i in range(step.size)]
    if failures[0]:
        measured = {
            "ttft_p99": (ttft[0], ttft_p99_slo_ms),
            "itl_p99": (itl[0], itl_p99_slo_ms),
            "preemptions": (preempt[0], 0.0),
        }
        misses = tuple(Shortfall(f, float(measured[f][0]), float(measured[f][1])) for f in failures[0])
        return Knee(
            index=-1,
            step=math.nan,
            interpolated=False,
            limited_by="+".join(failures[0]),
            lower_bound=False,
            later_passing_steps=tuple(i for i, f in enumerate(failures) if not f),
            status="no passing step",
            lightest_misses=misses,
        )
    first_fail = next((i for i, f in enumerate(failures) if f), None)
    if first_fail is None:
        return Knee(
            index=step.size - 1,
            step=float(step[-1]),
            interpolated=False,
            limited_by="none",
            lower_bound=True,
            later_passing_steps=(),
            status="lower bound",
        )
    index = first_fail - 1
    later = tuple(i for i in range(first_fail + 1, step.size) if not failures[i])
    knee_step = float(step[index])
    interpolated = False
    crossing = []
    if interpolate and np.isfinite(step[first_fail]) and "preemptions" not in failures[first_fail]:
        for name, values, slo in (("ttft_p99", ttft, ttft_p99_slo_ms), ("itl_p99", itl, itl_p99_slo_ms)):
            if name in failures[first_fail]:
                share = (slo - values[index]) / (values[first_fail] - values[index])
                crossing.append(step[index] + share * (step[first_fail] - step[index]))
        knee_step = float(min(crossing))
        interpolated = knee_step > step[index]
    return Knee(
        index=index,
        step=knee_step,
        interpolated=interpolated,
        limited_by="+".join(failures[first_fail]),
        lower_bound=False,
        later_passing_steps=later,
    )


def _checked_sweep(step, ttft_p99_ms, itl_p99_ms, preemptions):
    step = np.atleast_1d(np.asarray(step, dtype=float))
    ttft = np.atleast_1d(np.asarray(ttft_p99_ms, dtype=float))
    itl = np.atleast_1d(np.asarray(itl_p99_ms, dtype=float))
    preempt = (
        np.full(step.shape, np.nan) if preemptions is None else np.atleast_1d(np.asarray(preemptions, dtype=float))
    )
    if not (step.shape == ttft.shape == itl.shape == preempt.shape) or step.size == 0:
        raise PlannerInputError("step, ttft_p99_ms, itl_p99_ms and preemptions must be non-empty and of one length")
    if np.any(np.isnan(step)) or np.any(np.diff(step) <= 0):
        raise PlannerInputError(f"steps must be numbers in strictly increasing order, got {step.tolist()}")
    require_non_negative("ttft_p99_ms", ttft)
    require_non_negative("itl_p99_ms", itl)
    return step, ttft, itl, preempt


def _failures(ttft, itl, preempt, ttft_slo, itl_slo) -> list[str]:
    failed = []
    if ttft > ttft_slo:
        failed.append("ttft_p99")
    if itl > itl_slo:
        failed.append("itl_p99")
    if np.isfinite(preempt) and preempt > 0:
        failed.append("preemptions")
    return failed


def value_at_knee(knee: Knee, step, values) -> float:
    """A measured quantity at the knee, linearly interpolated when the knee is.

    Parameters
    ----------
    knee : Knee
    step : array_like
        The steps ``knee`` was found on.
    values : array_like
        The quantity at each step (any unit); NaN where not measured.

    Returns
    -------
    float
        The quantity at ``knee.step``; NaN if not measured there or if no
        step passed.
    """
    if not knee.found:
        return math.nan
    step = np.asarray(step, dtype=float)
    values = np.asarray(values, dtype=float)
    here = values[knee.index]
    if not knee.interpolated:
        return float(here)
    following = values[knee.index + 1]
    share = (knee.step - step[knee.index]) / (step[knee.index + 1] - step[knee.index])
    return float(here + share * (following - here))


def kv_usage_target_frac(kv_usage_at_knee_frac, margin_frac=DEFAULT_KV_MARGIN_FRAC):
    """KV-usage target just under the usage measured at the knee: u x (1 - margin).

    Parameters
    ----------
    kv_usage_at_knee_frac : float or array_like
        Peak KV-cache usage at the knee. [fraction of 1]
    margin_frac : float or array_like
        Relative margin under it. [fraction]

    Returns
    -------
    float or numpy.ndarray
        Target for an average KV-usage trigger. [fraction of 1]

    Examples
    --------
    >>> round(kv_usage_target_frac(0.84, 0.05), 6)
    0.798
    """
    kv_usage_at_knee_frac = require_positive("kv_usage_at_knee_frac", kv_usage_at_knee_frac)
    margin_frac = require_non_negative("margin_frac", margin_frac)
    if np.any(np.asarray(kv_usage_at_knee_frac) > 1) or np.any(np.asarray(margin_frac) >= 1):
        raise PlannerInputError("kv_usage_at_knee_frac must be in (0, 1] and margin_frac in [0, 1)")
    return kv_usage_at_knee_frac * (1.0 - margin_frac)


@dataclass(frozen=True)
class LoadTestThresholds:
    """Knee, targets and fitted step-time model from one load-test sweep.

    Attributes (units in the names; NaN where the load test lacked the data)
    ----------
    knee : Knee
    step_variable : str
        Column the steps are ordered by (``concurrency``, ``request_rate_rps``
        or ``mean_concurrency``).
    knee_concurrency : float
        Requests in flight per replica at the knee: the step itself for a
        concurrency sweep, the mean in flight otherwise. [requests]
    knee_request_rate_rps : float
        Arrival rate at the knee (the step for a rate sweep, the measured
        throughput otherwise). [requests/s]
    itl_source : str
        ``itl_p99_ms`` or ``tpot_p99_ms`` (when the file has no ITL).
    preemptions_checked : bool
        Whether the file measured preemptions.
    growth_frac : float
        Expected growth in load during one warmup that T must absorb. [fraction]
    concurrency_target : float
        T = K / (1 + growth_frac); NaN when the sweep is too short. [requests]
    request_duration_s : float
        Mean request duration W at the knee. [s]
    drain_rate_rps : float
        mu = K / W (or the measured throughput at the knee when W is unknown). [requests/s]
    drain_rate_source : str
    kv_usage_at_knee_frac, kv_usage_target_frac : float
        [fraction of 1]; the target is NaN when the sweep is too short.
    queue_wait_budget_s, queue_threshold_requests : float
        W_max and W_max x mu; the threshold is NaN when the sweep is too short. [s], [requests]
    tpot_fit, throughput_fit : StepTimeFit or None
        ``step = a + b x batch`` fitted to the mean TPOT and to
        batch / output throughput over the steps up to the knee.
    fit_steps : int
        Steps used in the fits.
    fit_step_indices : tuple of int
        Their positions in the sweep.
    fit_batch : tuple of float
        Their batch sizes (mean requests in flight, else the configured concurrency). [sequences]
    sweep_steps : int
        Steps in the sweep.
    sweep_too_short : bool
        Fewer than :data:`MIN_SWEEP_STEPS` steps: the targets are withheld.
    concurrency_source : str
        How the requests in flight at the knee were obtained.
    """

    knee: Knee
    step_variable: str
    knee_concurrency: float
    knee_request_rate_rps: float
    itl_source: str
    preemptions_checked: bool
    growth_frac: float
    concurrency_target: float
    request_duration_s: float
    drain_rate_rps: float
    drain_rate_source: str
    kv_usage_at_knee_frac: float
    kv_usage_target_frac: float
    queue_wait_budget_s: float
    queue_threshold_requests: float
    tpot_fit: StepTimeFit | None
    throughput_fit: StepTimeFit | None
    fit_steps: int
    fit_step_indices: tuple[int, ...] = ()
    fit_batch: tuple[float, ...] = ()
    sweep_steps: int = 0
    sweep_too_short: bool = False
    concurrency_source: str = ""


def in_flight_by_step(
    steps: pd.DataFrame, mean_output_tokens: float | None = None
) -> tuple[np.ndarray, np.ndarray, str]:
    """Mean request duration W and requests in flight L = X x W at every step (Little's law).

    Parameters
    ----------
    steps : pandas.DataFrame
        The table :func:`planner.readers.loadtest.read_loadtest` returns.
    mean_output_tokens : float, optional
        Mean generated length to assume where the file records none (a
        result that kept only latency keys). [tokens]

    Returns
    -------
    in_flight : numpy.ndarray
        Mean requests in flight per step: ``mean_concurrency`` where the file
        gives it, else X x W; NaN where neither is known. [requests]
    duration_ms : numpy.ndarray
        Mean request duration W per step: the mean end-to-end latency, else
        TTFT + TPOT x (output tokens - 1). [ms]
    source : str
        How the values were obtained, for the reader of a report.

    Notes
    -----
    X is the measured request throughput; where the file has none, the
    offered rate of a finite-rate step, which holds for a step that kept up
    with its arrivals (a step that meets its objectives does). TTFT + TPOT x
    (N - 1) assumes the TPOT does not depend on the output length.
    """
    if mean_output_tokens is not None:
        mean_output_tokens = float(require_positive("mean_output_tokens", mean_output_tokens))
    measured = steps["mean_concurrency"].to_numpy(dtype=float)
    e2e = steps["e2e_mean_ms"].to_numpy(dtype=float)
    tokens = steps["mean_output_tokens"].to_numpy(dtype=float)
    assumed_tokens = ~np.isfinite(tokens)
    if mean_output_tokens is not None:
        tokens = np.where(assumed_tokens, mean_output_tokens, tokens)
    estimate = steps["ttft_mean_ms"].to_numpy(dtype=float) + steps["tpot_mean_ms"].to_numpy(dtype=float) * np.maximum(
        tokens - 1.0, 0.0
    )
    duration_ms = np.where(np.isfinite(e2e), e2e, estimate)
    throughput = steps["request_throughput_rps"].to_numpy(dtype=float)
    rate = steps["request_rate_rps"].to_numpy(dtype=float)
    offered = ~np.isfinite(throughput) & np.isfinite(rate)
    throughput = np.where(offered, rate, throughput)
    in_flight = np.where(np.isfinite(measured), measured, throughput * duration_ms / 1000.0)

    tools = set(steps["tool"])
    if np.isfinite(measured).all():
        source = (
            "measured by GuideLLM (mean request concurrency)"
            if tools == {"guidellm"}
            else "from the file: measured, or by Little's law L = throughput x mean duration per step"
        )
        return in_flight, duration_ms, source
    parts = ["Little's law per step, L = X x W"]
    derived = ~np.isfinite(measured)
    if (offered & derived).any():
        parts.append("X the offered rate (the file records no throughput; a step meeting its objectives keeps up)")
    if (~np.isfinite(e2e) & derived).any():
        if (assumed_tokens & derived).any() and mean_output_tokens is not None:
            parts.append(f"W = TTFT + TPOT x (N - 1) with N = {mean_output_tokens:g} output tokens as given")
        elif (assumed_tokens & derived).any():
            parts.append(
                "W unknown: the file records neither end-to-end latency nor output lengths; "
                "give the workload's mean output tokens (mean_output_tokens, --mean-output-tokens)"
            )
        else:
            parts.append("W = TTFT + TPOT x (N - 1) with the file's mean output tokens N")
    return in_flight, duration_ms, "; ".join(parts)


def thresholds_from_loadtest(
    steps: pd.DataFrame,
    *,
    ttft_p99_slo_ms: float,
    itl_p99_slo_ms: float,
    growth_frac: float = 0.2,
    queue_wait_budget_s: float | None = None,
    kv_margin_frac: float = DEFAULT_KV_MARGIN_FRAC,
    interpolate: bool = False,
    step_column: str | None = None,
    mean_output_tokens: float | None = None,
) -> LoadTestThresholds:
    """Knee, targets and step-time fits from a validated sweep.

    Parameters
    ----------
    steps : pandas.DataFrame
        The table :func:`planner.readers.loadtest.read_loadtest` returns,
        sorted by load.
    ttft_p99_slo_ms, itl_p99_slo_ms : float
        Objectives. [ms]
    growth_frac : float
        Expected growth in load during one warmup. [fraction]
    queue_wait_budget_s : float, optional
        Longest acceptable queue wait W_max for the queue threshold. [s]
    kv_margin_frac : float
        Relative margin of the KV target under the usage at the knee. [fraction]
    interpolate : bool
        Interpolate the knee between steps (see :func:`find_knee`).
    step_column : str, optional
        Step variable; defaults to ``steps.attrs["step_variable"]`` or
        ``concurrency``.
    mean_output_tokens : float, optional
        Mean generated length to assume where the file records none (see
        :func:`in_flight_by_step`). [tokens]

    Returns
    -------
    LoadTestThresholds
        When no step passes, the knee says what the lightest step misses and
        every quantity taken at the knee is NaN. When the sweep has fewer than
        :data:`MIN_SWEEP_STEPS` steps, the targets (T, the KV target and the
        queue threshold) are NaN.
    """
    growth_frac = require_non_negative("growth_frac", growth_frac)
    variable, step, itl_source = _sweep_columns(steps, step_column)
    preemptions = steps["preemptions"].to_numpy(dtype=float)
    knee = find_knee(
        step,
        steps["ttft_p99_ms"],
        steps[itl_source],
        preemptions,
        ttft_p99_slo_ms=ttft_p99_slo_ms,
        itl_p99_slo_ms=itl_p99_slo_ms,
        interpolate=interpolate,
    )
    in_flight, duration_ms_by_step, in_flight_source = in_flight_by_step(steps, mean_output_tokens)

    def at_knee(column: str) -> float:
        return value_at_knee(knee, step, steps[column].to_numpy(dtype=float))

    knee_concurrency = _knee_concurrency(knee, variable, step, in_flight)
    knee_rate = knee.step if variable == "request_rate_rps" else at_knee("request_throughput_rps")
    if not np.isfinite(knee_rate):
        knee_rate = at_knee("request_throughput_rps")
    duration_s = value_at_knee(knee, step, duration_ms_by_step) / 1000.0

    too_short = len(steps) < MIN_SWEEP_STEPS
    target = math.nan
    drain, drain_source = math.nan, "unknown (the load test has neither request durations nor throughput)"
    if not knee.found:
        drain_source = "none: no step meets the objectives"
    if np.isfinite(knee_concurrency) and knee_concurrency > 0:
        target = float(target_for_step(knee_concurrency, growth_frac))
        if np.isfinite(duration_s) and duration_s > 0:
            drain, drain_source = float(drain_rate_rps(knee_concurrency, duration_s)), "K / W"
    if not np.isfinite(drain):
        measured = at_knee("request_throughput_rps")
        if np.isfinite(measured) and measured > 0:
            drain, drain_source = measured, "measured throughput at the knee"
    threshold = math.nan
    budget = (
        math.nan if queue_wait_budget_s is None else float(require_positive("queue_wait_budget_s", queue_wait_budget_s))
    )
    if np.isfinite(budget) and np.isfinite(drain):
        threshold = float(queue_threshold_requests(budget, drain))
    kv_knee = at_knee("kv_usage_frac")
    kv_target = (
        float(kv_usage_target_frac(kv_knee, kv_margin_frac)) if np.isfinite(kv_knee) and kv_knee > 0 else math.nan
    )
    if too_short:
        target = kv_target = threshold = math.nan

    tpot_fit, throughput_fit, fit_indices, fit_batch = _fit_step_time_models(steps, knee, in_flight)
    concurrency_source = "the step itself (a concurrency sweep)" if variable == "concurrency" else in_flight_source
    return LoadTestThresholds(
        knee=knee,
        step_variable=variable,
        knee_concurrency=float(knee_concurrency),
        knee_request_rate_rps=float(knee_rate),
        itl_source=itl_source,
        preemptions_checked=bool(np.isfinite(preemptions).any()),
        growth_frac=float(growth_frac),
        concurrency_target=target,
        request_duration_s=float(duration_s),
        drain_rate_rps=float(drain),
        drain_rate_source=drain_source,
        kv_usage_at_knee_frac=float(kv_knee),
        kv_usage_target_frac=kv_target,
        queue_wait_budget_s=budget,
        queue_threshold_requests=threshold,
        tpot_fit=tpot_fit,
        throughput_fit=throughput_fit,
        fit_steps=len(fit_indices),
        fit_step_indices=fit_indices,
        fit_batch=fit_batch,
        sweep_steps=len(steps),
        sweep_too_short=too_short,
        concurrency_source=concurrency_source,
    )


def _sweep_columns(steps: pd.DataFrame, step_column: str | None) -> tuple[str, np.ndarray, str]:
    # The step variable and which inter-token column stands for ITL (TPOT when the tool has no ITL).
    variable = step_column or steps.attrs.get("step_variable", "concurrency")
    itl_source = "itl_p99_ms" if steps["itl_p99_ms"].notna().all() else "tpot_p99_ms"
    return variable, steps[variable].to_numpy(dtype=float), itl_source


def _knee_concurrency(knee: Knee, variable: str, step: np.ndarray, in_flight: np.ndarray) -> float:
    # Requests in flight at the knee: the step itself in a concurrency sweep, else the measured mean.
    if not knee.found:
        return math.nan
    if variable == "concurrency":
        return float(knee.step)
    return value_at_knee(knee, step, in_flight)


def step_name(step_variable: str, value: float) -> str:
    """A step as a reader names it: ``"concurrency 4"``, ``"4 requests/s"``.

    Parameters
    ----------
    step_variable : str
        ``concurrency``, ``request_rate_rps`` or ``mean_concurrency``.
    value : float
        The step's value in that variable's unit.
    """
    if step_variable == "concurrency":
        return f"concurrency {value:g}"
    if step_variable == "request_rate_rps":
        return "an unbounded rate" if math.isinf(value) else f"{value:g} request{'' if value == 1 else 's'}/s"
    return f"{value:,.1f} requests in flight"


def knee_finding(result: LoadTestThresholds, steps: pd.DataFrame) -> str:
    """The chapter's and the CLI's one-sentence finding about the knee.

    Parameters
    ----------
    result : LoadTestThresholds
    steps : pandas.DataFrame
        The sweep ``result`` was computed from.

    Returns
    -------
    str
        E.g. "No step meets the objectives: the lightest step (1 request/s)
        already misses ITL p99 by 70 ms (120 ms against 50 ms)."
    """
    knee = result.knee
    itl_name = "ITL" if result.itl_source == "itl_p99_ms" else "TPOT"
    step = steps[result.step_variable].to_numpy(dtype=float)
    if not knee.found:
        misses = " and ".join(m.describe(itl_name) for m in knee.lightest_misses)
        text = (
            f"No step meets the objectives: the lightest step ({step_name(result.step_variable, step[0])}) "
            f"already misses {misses}."
        )
        if knee.later_passing_steps:
            text += (
                " Heavier steps pass ("
                + ", ".join(step_name(result.step_variable, step[i]) for i in knee.later_passing_steps)
                + "), but a knee starts from the lightest step."
            )
        return text
    k = result.knee_concurrency
    where = f"{k:,.0f}" if math.isfinite(k) and k == round(k) else f"{k:,.1f}"
    where += " requests in flight"
    if result.step_variable != "concurrency":
        where += f" (at {step_name(result.step_variable, knee.step)})"
    if knee.lower_bound:
        text = f"Every step meets the objectives, so the knee is at least {where}: run heavier steps to find it."
    else:
        limited = " and ".join(_METRIC_NAMES[m].replace("ITL", itl_name) for m in knee.limited_by.split("+"))
        text = f"The knee is at {where}; the next step misses {limited}."
    if result.sweep_too_short:
        text += (
            f" The sweep has {result.sweep_steps} step{'s' if result.sweep_steps != 1 else ''}; a knee "
            f"needs at least {MIN_SWEEP_STEPS}, so no target is given."
        )
    return text


def targets_summary(result: LoadTestThresholds) -> str:
    """One sentence on the targets, written for what the load test allows.

    Parameters
    ----------
    result : LoadTestThresholds

    Returns
    -------
    str
        The concurrency target, drain rate and queue threshold when they
        exist; otherwise why there are none.
    """
    if not result.knee.found:
        return (
            "No step met the objectives, so there is no knee and no target: loosen the objectives, "
            "or measure lighter steps, or a faster replica."
        )
    if result.sweep_too_short:
        return (
            f"The sweep has {result.sweep_steps} step{'' if result.sweep_steps == 1 else 's'}, fewer than "
            f"the {MIN_SWEEP_STEPS} a knee needs, so no target is given; the knee, duration and drain "
            "rate above describe the measured steps only."
        )
    if not math.isfinite(result.concurrency_target):
        return (
            f"The requests in flight at the knee are unknown ({result.concurrency_source}), "
            "so no concurrency target follows."
        )
    text = f"Hold each replica at about {result.concurrency_target:,.1f} requests in flight."
    if math.isfinite(result.drain_rate_rps):
        text += f" At the knee one replica completes {result.drain_rate_rps:,.2f} requests per second"
        if math.isfinite(result.queue_threshold_requests):
            text += (
                f", so a queue-depth trigger that keeps waits within {result.queue_wait_budget_s:g} s "
                f"fires at about {result.queue_threshold_requests:,.0f} waiting requests"
            )
        text += "."
    return text


def sweep_commands(steps: pd.DataFrame, concurrencies=(1, 2, 4, 8, 16, 32, 64, 128)) -> dict[str, str]:
    """Commands that measure a sweep the knee can be found on, with this file's model and lengths.

    Parameters
    ----------
    steps : pandas.DataFrame
        The sweep read so far (for the model and the mean prompt and output lengths).
    concurrencies : sequence of int
        Concurrency steps to run. [requests]

    Returns
    -------
    dict
        ``{"vllm bench serve": ..., "guidellm": ...}``: a shell loop over
        ``--max-concurrency`` that saves every metric the knee needs, and the
        GuideLLM equivalent (a ``concurrent`` profile over the same steps).
    """
    model = next((m for m in steps["model"] if m), "") or "MODEL"
    input_tokens = _mean_tokens(steps["mean_input_tokens"], 1024)
    output_tokens = _mean_tokens(steps["mean_output_tokens"], 256)
    levels = [int(c) for c in concurrencies]
    # Short lines, so the commands fit a page's column and a terminal.
    vllm = (
        f"for c in {' '.join(map(str, levels))}; do\n"
        f"  vllm bench serve --model {model} \\\n"
        f"    --dataset-name random --random-input-len {input_tokens} \\\n"
        f"    --random-output-len {output_tokens} \\\n"
        "    --max-concurrency $c --request-rate inf \\\n"
        "    --num-prompts $((100 + 20 * c)) \\\n"
        "    --percentile-metrics ttft,tpot,itl,e2el \\\n"
        "    --metric-percentiles 50,90,99 \\\n"
        "    --save-result --result-dir sweep/\n"
        "done"
    )
    guidellm = (
        "guidellm benchmark run --target http://localhost:8000 \\\n"
        f"  --model {model} \\\n"
        f"  --profile concurrent --rate {','.join(map(str, levels))} \\\n"
        "  --max-seconds 120 \\\n"
        f"  --data prompt_tokens={input_tokens},output_tokens={output_tokens} \\\n"
        "  --output-path benchmarks.json"
    )
    return {"vllm bench serve": vllm, "guidellm": guidellm}


def _mean_tokens(values: pd.Series, default: int) -> int:
    finite = values.to_numpy(dtype=float)
    finite = finite[np.isfinite(finite) & (finite > 0)]
    return round(float(finite.mean())) if finite.size else default


def knee_grid(
    steps: pd.DataFrame,
    ttft_slos_ms,
    itl_slos_ms,
    growth_frac: float = 0.2,
    *,
    interpolate: bool = False,
    step_column: str | None = None,
    mean_output_tokens: float | None = None,
) -> pd.DataFrame:
    """Knee and concurrency target for every pair of objectives, one row per pair.

    The rows are what a slider over the objectives selects from: each is
    exactly what :func:`thresholds_from_loadtest` gives for that pair
    (including a NaN target when the sweep is too short). A pair under which
    even the lightest step fails is a row too (knee NaN).

    Parameters
    ----------
    steps : pandas.DataFrame
        The table :func:`planner.readers.loadtest.read_loadtest` returns,
        sorted by load.
    ttft_slos_ms, itl_slos_ms : array_like
        Candidate TTFT p99 and ITL p99 objectives. [ms]
    growth_frac : float
        Expected growth in load during one warmup. [fraction]
    interpolate : bool
        Interpolate the knee between steps (see :func:`find_knee`).
    step_column : str, optional
        Step variable; defaults to ``steps.attrs["step_variable"]`` or
        ``concurrency``.
    mean_output_tokens : float, optional
        As in :func:`thresholds_from_loadtest`. [tokens]

    Returns
    -------
    pandas.DataFrame
        One row per (TTFT, ITL) pair, TTFT-major, with columns
        ``ttft_p99_slo_ms``, ``itl_p99_slo_ms`` [ms]; ``knee_step`` (in the
        step variable's unit); ``knee_concurrency`` and ``concurrency_target``
        [requests]; ``limited_by`` (as in :class:`Knee`, or what the lightest
        step misses when none passes); ``status``: ``"knee"``,
        ``"lower bound"`` (every step passed) or ``"no passing step"``.

    Raises
    ------
    PlannerInputError
        If an objective is not a positive number or the sweep is malformed.

    Examples
    --------
    >>> import pandas as pd
    >>> steps = pd.DataFrame({"concurrency": [16.0, 32, 48, 64], "ttft_p99_ms": [300.0, 500, 900, 2500],
    ...                       "itl_p99_ms": [20.0, 30, 45, 70], "preemptions": [0.0, 0, 0, 0]})
    >>> knee_grid(steps, [2000], [25, 50], growth_frac=0.2)[["itl_p99_slo_ms", "knee_step", "concurrency_target"]]
       itl_p99_slo_ms  knee_step  concurrency_target
    0            25.0       16.0           13.333333
    1            50.0       48.0           40.000000
    """
    growth_frac = float(require_non_negative("growth_frac", growth_frac))
    ttft_slos = np.atleast_1d(require_positive("ttft_slos_ms", np.asarray(ttft_slos_ms, dtype=float))).ravel()
    itl_slos = np.atleast_1d(require_positive("itl_slos_ms", np.asarray(itl_slos_ms, dtype=float))).ravel()
    variable, step, itl_source = _sweep_columns(steps, step_column)
    step, ttft, itl, preempt = _checked_sweep(step, steps["ttft_p99_ms"], steps[itl_source], steps["preemptions"])
    if variable == "concurrency":
        in_flight = step
    else:
        in_flight = in_flight_by_step(steps, mean_output_tokens)[0]
    too_short = len(steps) < MIN_SWEEP_STEPS
    rows = []
    for ttft_slo in ttft_slos:
        for itl_slo in itl_slos:
            knee = find_knee(
                step, ttft, itl, preempt, ttft_p99_slo_ms=ttft_slo, itl_p99_slo_ms=itl_slo, interpolate=interpolate
            )
            concurrency = _knee_concurrency(knee, variable, step, in_flight)
            target = (
                float(target_for_step(concurrency, growth_frac))
                if np.isfinite(concurrency) and concurrency > 0 and not too_short
                else math.nan
            )
            rows.append((ttft_slo, itl_slo, knee.step, concurrency, target, knee.limited_by, knee.status))
    return pd.DataFrame(
        rows,
        columns=[
            "ttft_p99_slo_ms",
            "itl_p99_slo_ms",
            "knee_step",
            "knee_concurrency",
            "concurrency_target",
            "limited_by",
            "status",
        ],
    )


def _fit_step_time_models(steps: pd.DataFrame, knee: Knee, in_flight: np.ndarray):
    # Past the knee queueing, not batching, sets latency; fit the steps up to it,
    # or every step when fewer than two distinct batches precede it.
    in_flight = np.asarray(in_flight, dtype=float)
    configured = steps["concurrency"].to_numpy(dtype=float)
    batch = in_flight if np.isfinite(in_flight).all() else np.where(np.isfinite(configured), configured, in_flight)
    tpot = steps["tpot_mean_ms"].to_numpy(dtype=float)
    if not np.isfinite(tpot).any():
        tpot = steps["itl_mean_ms"].to_numpy(dtype=float)
    output_tps = steps["output_throughput_tps"].to_numpy(dtype=float)
    upto = np.arange(len(steps)) <= knee.index
    usable_batch = np.isfinite(batch) & (batch > 0)
    if np.unique(batch[upto & usable_batch]).size < 2:
        upto = np.ones(len(steps), dtype=bool)

    def fit(step_ms: np.ndarray) -> StepTimeFit | None:
        keep = upto & usable_batch & np.isfinite(step_ms) & (step_ms > 0)
        if np.unique(batch[keep]).size < 2:
            return None
        return fit_step_time(batch[keep], step_ms[keep])

    tpot_fit = fit(tpot)
    with np.errstate(divide="ignore", invalid="ignore"):
        from_throughput = np.full(len(steps), np.nan)
        ok = usable_batch & np.isfinite(output_tps) & (output_tps > 0)
        from_throughput[ok] = step_time_from_throughput_ms(batch[ok], output_tps[ok]) if ok.any() else []
    throughput_fit = fit(from_throughput)
    used = np.flatnonzero(upto & usable_batch)
    return tpot_fit, throughput_fit, tuple(int(i) for i in used), tuple(float(b) for b in batch[used])
