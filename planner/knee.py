"""The ``knee`` module finds a replica's knee in a load test and derives autoscaling targets.

The knee K is the highest load step that still meets the TTFT p99 and ITL
p99 objectives with zero preemptions. From it come the per-replica
concurrency target T = K / (1 + expected growth during one warmup), a KV
usage target a little under the KV usage seen at the knee, the drain rate
mu = K / W and a queue-depth threshold W_max x mu (see
:mod:`planner.headroom` and :mod:`planner.littles_law`), plus a fit of the
step-time model (:mod:`planner.step_time`) to the measured TPOT and output
throughput.

The knee is taken as the last step of the unbroken run of passing steps from
the lightest load: a step that passes again after a failing one is reported
(``later_passing_steps``) but not used, since one lucky step above a failure
is noise, not capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from planner.errors import PlannerInputError, require_non_negative, require_positive
from planner.headroom import target_for_step
from planner.littles_law import drain_rate_rps, queue_threshold_requests
from planner.step_time import StepTimeFit, fit_step_time, step_time_from_throughput_ms

__all__ = [
    "Knee",
    "LoadTestThresholds",
    "find_knee",
    "knee_grid",
    "kv_usage_target_frac",
    "thresholds_from_loadtest",
    "value_at_knee",
]

DEFAULT_KV_MARGIN_FRAC = 0.05  # KV target sits 5 % (relative) under the usage at the knee


@dataclass(frozen=True)
class Knee:
    """Where a load test stops meeting its objectives.

    Attributes
    ----------
    index : int
        Position of the last passing step (steps sorted by load).
    step : float
        Load at the knee, in the step variable's unit; between ``index`` and
        the next step when interpolated.
    interpolated : bool
        True when ``step`` lies between two measured steps.
    limited_by : str
        What failed at the next step: ``"ttft_p99"``, ``"itl_p99"``,
        ``"preemptions"``, several joined by ``+``, or ``"none"`` when every
        step passed (the knee is then only a lower bound).
    lower_bound : bool
        Every step passed: the real knee is above the heaviest step tested.
    later_passing_steps : tuple of int
        Steps above the first failure that pass again (not used for the knee).
    """

    index: int
    step: float
    interpolated: bool
    limited_by: str
    lower_bound: bool
    later_passing_steps: tuple[int, ...]


def find_knee(step, ttft_p99_ms, itl_p99_ms, preemptions=None, *, ttft_p99_slo_ms: float,
              itl_p99_slo_ms: float, interpolate: bool = False) -> Knee:
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

    Raises
    ------
    PlannerInputError
        If even the lightest step misses an objective, or the inputs are
        malformed.

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
        raise PlannerInputError(
            f"no step meets the objectives: the lightest step ({step[0]:g}) misses "
            + ", ".join(_describe(f, ttft[0], itl[0], preempt[0], ttft_p99_slo_ms, itl_p99_slo_ms) for f in failures[0])
        )
    first_fail = next((i for i, f in enumerate(failures) if f), None)
    if first_fail is None:
        return Knee(index=step.size - 1, step=float(step[-1]), interpolated=False, limited_by="none",
                    lower_bound=True, later_passing_steps=())
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
    return Knee(index=index, step=knee_step, interpolated=interpolated,
                limited_by="+".join(failures[first_fail]), lower_bound=False, later_passing_steps=later)


def _checked_sweep(step, ttft_p99_ms, itl_p99_ms, preemptions):
    step = np.atleast_1d(np.asarray(step, dtype=float))
    ttft = np.atleast_1d(np.asarray(ttft_p99_ms, dtype=float))
    itl = np.atleast_1d(np.asarray(itl_p99_ms, dtype=float))
    preempt = np.full(step.shape, np.nan) if preemptions is None else np.atleast_1d(np.asarray(preemptions, dtype=float))
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


def _describe(failure, ttft, itl, preempt, ttft_slo, itl_slo) -> str:
    if failure == "ttft_p99":
        return f"TTFT p99 {ttft:g} ms > {ttft_slo:g} ms"
    if failure == "itl_p99":
        return f"ITL p99 {itl:g} ms > {itl_slo:g} ms"
    return f"{preempt:g} preemptions > 0"


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
        The quantity at ``knee.step``; NaN if not measured there.
    """
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
        T = K / (1 + growth_frac). [requests]
    request_duration_s : float
        Mean request duration W at the knee. [s]
    drain_rate_rps : float
        mu = K / W (or the measured throughput at the knee when W is unknown). [requests/s]
    drain_rate_source : str
    kv_usage_at_knee_frac, kv_usage_target_frac : float
        [fraction of 1]
    queue_wait_budget_s, queue_threshold_requests : float
        W_max and W_max x mu. [s], [requests]
    tpot_fit, throughput_fit : StepTimeFit or None
        ``step = a + b x batch`` fitted to the mean TPOT and to
        batch / output throughput over the steps up to the knee.
    fit_steps : int
        Steps used in the fits.
    fit_step_indices : tuple of int
        Their positions in the sweep.
    fit_batch : tuple of float
        Their batch sizes (mean requests in flight, else the configured concurrency). [sequences]
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


def thresholds_from_loadtest(steps: pd.DataFrame, *, ttft_p99_slo_ms: float, itl_p99_slo_ms: float,
                             growth_frac: float = 0.2, queue_wait_budget_s: float | None = None,
                             kv_margin_frac: float = DEFAULT_KV_MARGIN_FRAC,
                             interpolate: bool = False, step_column: str | None = None) -> LoadTestThresholds:
    """Knee, targets and step-time fits from a validated sweep.

    Parameters
    ----------
    steps : pandas.DataFrame
        The table :func:`planner.readers.loadtest.read_loadtest` returns,
        sorted by load.
    ttft_p99_slo_ms, itl_p99_slo_ms : float
        Objectives. [ms]
    growth_frac : float
        Expected growth in load during one warmup (W17). [fraction]
    queue_wait_budget_s : float, optional
        Longest acceptable queue wait W_max for the queue threshold (W32). [s]
    kv_margin_frac : float
        Relative margin of the KV target under the usage at the knee. [fraction]
    interpolate : bool
        Interpolate the knee between steps (see :func:`find_knee`).
    step_column : str, optional
        Step variable; defaults to ``steps.attrs["step_variable"]`` or
        ``concurrency``.

    Returns
    -------
    LoadTestThresholds
    """
    growth_frac = require_non_negative("growth_frac", growth_frac)
    variable, step, itl_source = _sweep_columns(steps, step_column)
    preemptions = steps["preemptions"].to_numpy(dtype=float)
    knee = find_knee(step, steps["ttft_p99_ms"], steps[itl_source], preemptions,
                     ttft_p99_slo_ms=ttft_p99_slo_ms, itl_p99_slo_ms=itl_p99_slo_ms, interpolate=interpolate)

    def at_knee(column: str) -> float:
        return value_at_knee(knee, step, steps[column].to_numpy(dtype=float))

    knee_concurrency = _knee_concurrency(knee, steps, variable, step)
    knee_rate = knee.step if variable == "request_rate_rps" else at_knee("request_throughput_rps")
    if not np.isfinite(knee_rate):
        knee_rate = at_knee("request_throughput_rps")
    duration_ms = at_knee("e2e_mean_ms")
    if not np.isfinite(duration_ms):
        duration_ms = at_knee("ttft_mean_ms") + at_knee("tpot_mean_ms") * max(at_knee("mean_output_tokens") - 1.0, 0.0)
    duration_s = duration_ms / 1000.0

    target = math.nan
    drain, drain_source = math.nan, "unknown (the load test has neither request durations nor throughput)"
    if np.isfinite(knee_concurrency) and knee_concurrency > 0:
        target = float(target_for_step(knee_concurrency, growth_frac))
        if np.isfinite(duration_s) and duration_s > 0:
            drain, drain_source = float(drain_rate_rps(knee_concurrency, duration_s)), "K / W"
    if not np.isfinite(drain):
        measured = at_knee("request_throughput_rps")
        if np.isfinite(measured) and measured > 0:
            drain, drain_source = measured, "measured throughput at the knee"
    threshold = math.nan
    budget = math.nan if queue_wait_budget_s is None else float(require_positive("queue_wait_budget_s", queue_wait_budget_s))
    if np.isfinite(budget) and np.isfinite(drain):
        threshold = float(queue_threshold_requests(budget, drain))
    kv_knee = at_knee("kv_usage_frac")
    kv_target = float(kv_usage_target_frac(kv_knee, kv_margin_frac)) if np.isfinite(kv_knee) and kv_knee > 0 else math.nan

    tpot_fit, throughput_fit, fit_indices, fit_batch = _fit_step_time_models(steps, knee)
    return LoadTestThresholds(
        knee=knee, step_variable=variable, knee_concurrency=float(knee_concurrency),
        knee_request_rate_rps=float(knee_rate), itl_source=itl_source,
        preemptions_checked=bool(np.isfinite(preemptions).any()), growth_frac=float(growth_frac),
        concurrency_target=target, request_duration_s=float(duration_s), drain_rate_rps=float(drain),
        drain_rate_source=drain_source, kv_usage_at_knee_frac=float(kv_knee), kv_usage_target_frac=kv_target,
        queue_wait_budget_s=budget, queue_threshold_requests=threshold,
        tpot_fit=tpot_fit, throughput_fit=throughput_fit, fit_steps=len(fit_indices),
        fit_step_indices=fit_indices, fit_batch=fit_batch,
    )


def _sweep_columns(steps: pd.DataFrame, step_column: str | None) -> tuple[str, np.ndarray, str]:
    # The step variable and which inter-token column stands for ITL (TPOT when the tool has no ITL).
    variable = step_column or steps.attrs.get("step_variable", "concurrency")
    itl_source = "itl_p99_ms" if steps["itl_p99_ms"].notna().all() else "tpot_p99_ms"
    return variable, steps[variable].to_numpy(dtype=float), itl_source


def _knee_concurrency(knee: Knee, steps: pd.DataFrame, variable: str, step: np.ndarray) -> float:
    # Requests in flight at the knee: the step itself in a concurrency sweep, else the measured mean.
    if variable == "concurrency":
        return float(knee.step)
    return value_at_knee(knee, step, steps["mean_concurrency"].to_numpy(dtype=float))


def knee_grid(steps: pd.DataFrame, ttft_slos_ms, itl_slos_ms, growth_frac: float = 0.2, *,
              interpolate: bool = False, step_column: str | None = None) -> pd.DataFrame:
    """Knee and concurrency target for every pair of objectives, one row per pair.

    The rows are what a slider over the objectives selects from: each is
    exactly what :func:`thresholds_from_loadtest` gives for that pair. A pair
    under which even the lightest step fails is a row too (knee NaN), not an
    error.

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
    rows = []
    for ttft_slo in ttft_slos:
        for itl_slo in itl_slos:
            lightest_misses = _failures(ttft[0], itl[0], preempt[0], ttft_slo, itl_slo)
            if lightest_misses:
                rows.append((ttft_slo, itl_slo, math.nan, math.nan, math.nan, "+".join(lightest_misses),
                             "no passing step"))
                continue
            knee = find_knee(step, ttft, itl, preempt, ttft_p99_slo_ms=ttft_slo, itl_p99_slo_ms=itl_slo,
                             interpolate=interpolate)
            concurrency = _knee_concurrency(knee, steps, variable, step)
            target = (float(target_for_step(concurrency, growth_frac))
                      if np.isfinite(concurrency) and concurrency > 0 else math.nan)
            rows.append((ttft_slo, itl_slo, knee.step, concurrency, target, knee.limited_by,
                         "lower bound" if knee.lower_bound else "knee"))
    return pd.DataFrame(rows, columns=["ttft_p99_slo_ms", "itl_p99_slo_ms", "knee_step", "knee_concurrency",
                                       "concurrency_target", "limited_by", "status"])


def _fit_step_time_models(steps: pd.DataFrame, knee: Knee):
    # Past the knee queueing, not batching, sets latency; fit the steps up to it,
    # or every step when fewer than two distinct batches precede it.
    batch = steps["mean_concurrency"].to_numpy(dtype=float)
    if not np.isfinite(batch).all():
        batch = steps["concurrency"].to_numpy(dtype=float)
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
