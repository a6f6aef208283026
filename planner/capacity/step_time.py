"""The ``step_time`` module models a decode step as a fixed cost plus a cost per sequence.

With continuous batching, every scheduler step runs one forward pass for
the whole batch and emits one token per running sequence. Its duration is
close to linear in the batch size over the range a replica is run at::

    step_ms = fixed_ms + per_sequence_ms x batch_size

so a step's duration is also each sequence's time per output token (TPOT),
and the replica's output rate is ``batch_size / step``. The model ignores
prefill chunks scheduled into decode steps (they lengthen the steps that
carry them) and the attention cost's growth with context length; fit it to
your own load test with :func:`fit_step_time` and read its ``r_squared``
before trusting it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner._numeric import floor_count
from planner.errors import PlannerInputError, require_non_negative, require_positive

__all__ = [
    "StepTimeFit",
    "fit_step_time",
    "max_batch_for_tpot",
    "output_throughput_tps",
    "slot_headroom_frac",
    "step_time_from_throughput_ms",
    "step_time_ms",
    "throughput_fraction_of_max",
    "throughput_headroom_frac",
    "tpot_ms",
]


def step_time_ms(batch_size, fixed_ms, per_sequence_ms):
    """Duration of one decode step for ``batch_size`` running sequences.

    Parameters
    ----------
    batch_size : float or array_like
        Sequences in the running batch. [sequences]
    fixed_ms : float
        Cost of a step whatever the batch (weights read, launch overhead). [ms]
    per_sequence_ms : float
        Added cost per sequence in the batch. [ms/sequence]

    Returns
    -------
    float or numpy.ndarray
        Step duration. [ms]

    Examples
    --------
    >>> step_time_ms(64, 6.0, 0.25)
    22.0
    """
    batch_size = require_non_negative("batch_size", batch_size)
    fixed_ms = require_positive("fixed_ms", fixed_ms)
    per_sequence_ms = require_non_negative("per_sequence_ms", per_sequence_ms)
    return fixed_ms + per_sequence_ms * batch_size


def tpot_ms(batch_size, fixed_ms, per_sequence_ms):
    """Time per output token seen by each sequence: one token per step. [ms]

    Equal to :func:`step_time_ms` under this model; kept as its own name
    because SLOs are written in TPOT (or ITL) and load tests report it.
    """
    return step_time_ms(batch_size, fixed_ms, per_sequence_ms)


def output_throughput_tps(batch_size, fixed_ms, per_sequence_ms):
    """Output tokens per second of one replica running ``batch_size`` sequences.

    Parameters
    ----------
    batch_size : float or array_like
        Sequences in the running batch. [sequences]
    fixed_ms, per_sequence_ms : float
        Step-time model constants. [ms], [ms/sequence]

    Returns
    -------
    float or numpy.ndarray
        Output throughput. [tokens/s]

    Examples
    --------
    >>> output_throughput_tps(1, 6.0, 0.25)
    160.0
    """
    step_ms = step_time_ms(batch_size, fixed_ms, per_sequence_ms)
    return 1000.0 * np.asarray(batch_size, dtype=float)[()] / step_ms


def slot_headroom_frac(target_batch, batch_limit):
    """Share of the batch slots left free when running at ``target_batch``.

    This is the headroom a concurrency target *appears* to leave; see
    :func:`throughput_headroom_frac` for the headroom in tokens per second,
    which is smaller because bigger batches run slower steps.

    Parameters
    ----------
    target_batch : float or array_like
        Concurrency the autoscaler holds each replica at. [sequences]
    batch_limit : float
        Largest batch the replica runs (``--max-num-seqs`` or the knee). [sequences]

    Returns
    -------
    float or numpy.ndarray
        ``1 - target_batch / batch_limit``. [fraction]
    """
    target_batch = require_positive("target_batch", target_batch)
    batch_limit = require_positive("batch_limit", batch_limit)
    return 1.0 - target_batch / batch_limit


def throughput_headroom_frac(target_batch, batch_limit, fixed_ms, per_sequence_ms):
    """Extra output throughput available between ``target_batch`` and ``batch_limit``.

    Returns
    -------
    float or numpy.ndarray
        ``throughput(batch_limit) / throughput(target_batch) - 1``. [fraction]

    Examples
    --------
    >>> round(throughput_headroom_frac(32, 64, 6.0, 0.25), 3)
    0.273
    """
    target_batch = require_positive("target_batch", target_batch)
    at_limit = output_throughput_tps(batch_limit, fixed_ms, per_sequence_ms)
    at_target = output_throughput_tps(target_batch, fixed_ms, per_sequence_ms)
    return at_limit / at_target - 1.0


def throughput_fraction_of_max(target_batch, batch_limit, fixed_ms, per_sequence_ms):
    """Output throughput at ``target_batch`` as a fraction of that at ``batch_limit``.

    Examples
    --------
    >>> round(throughput_fraction_of_max(48, 64, 6.0, 0.25), 3)
    0.917
    """
    batch_limit = require_positive("batch_limit", batch_limit)
    at_limit = output_throughput_tps(batch_limit, fixed_ms, per_sequence_ms)
    at_target = output_throughput_tps(target_batch, fixed_ms, per_sequence_ms)
    return at_target / at_limit


def max_batch_for_tpot(tpot_slo_ms, fixed_ms, per_sequence_ms):
    """Largest batch whose TPOT stays within ``tpot_slo_ms``.

    Parameters
    ----------
    tpot_slo_ms : float or array_like
        TPOT (or ITL) objective. [ms]
    fixed_ms, per_sequence_ms : float
        Step-time model constants. [ms], [ms/sequence]

    Returns
    -------
    int or numpy.ndarray of int
        ``floor((tpot_slo_ms - fixed_ms) / per_sequence_ms)``; 0 when even a
        single sequence misses the objective. [sequences]

    Examples
    --------
    >>> max_batch_for_tpot(16.0, 6.0, 0.25)
    40
    """
    tpot_slo_ms = require_positive("tpot_slo_ms", tpot_slo_ms)
    fixed_ms = require_positive("fixed_ms", fixed_ms)
    per_sequence_ms = require_positive("per_sequence_ms", per_sequence_ms)
    return floor_count(np.maximum(0.0, (tpot_slo_ms - fixed_ms) / per_sequence_ms))


def step_time_from_throughput_ms(batch_size, output_throughput_tps):
    """Step duration implied by a measured output rate at a batch size. [ms]

    Under one-token-per-sequence-per-step, ``step = batch / throughput``.
    """
    batch_size = require_positive("batch_size", batch_size)
    output_throughput_tps = require_positive("output_throughput_tps", output_throughput_tps)
    return 1000.0 * batch_size / output_throughput_tps


@dataclass(frozen=True)
class StepTimeFit:
    """A least-squares fit of ``step_ms = fixed_ms + per_sequence_ms x batch``.

    Attributes
    ----------
    fixed_ms : float
        Intercept. [ms]
    per_sequence_ms : float
        Slope. [ms/sequence]
    r_squared : float
        Coefficient of determination of the fit. [-]
    rmse_ms : float
        Root-mean-square residual. [ms]
    max_abs_residual_ms : float
        Largest absolute residual. [ms]
    n_points : int
        Measurements used.
    """

    fixed_ms: float
    per_sequence_ms: float
    r_squared: float
    rmse_ms: float
    max_abs_residual_ms: float
    n_points: int

    @property
    def is_plausible(self) -> bool:
        """Both constants positive: a step costs something, and more sequences cost more.

        A fit with a zero or negative constant can still have a high
        ``r_squared`` (prefix caching or multi-turn reuse make TPOT fall with
        load), but the step-time model does not describe that sweep.
        """
        return self.fixed_ms > 0 and self.per_sequence_ms > 0

    def predict_ms(self, batch_size):
        """Step time the fitted model gives for ``batch_size``. [ms]"""
        return self.fixed_ms + self.per_sequence_ms * np.asarray(batch_size, dtype=float)[()]


def fit_step_time(batch_size, step_ms) -> StepTimeFit:
    """Fit the step-time model to measured (batch size, step time) pairs.

    Parameters
    ----------
    batch_size : array_like
        Mean running batch (or concurrency) at each load step. [sequences]
    step_ms : array_like
        Measured step time at each load step: mean TPOT or ITL, or
        :func:`step_time_from_throughput_ms` of the output rate. [ms]

    Returns
    -------
    StepTimeFit

    Raises
    ------
    PlannerInputError
        Fewer than two distinct batch sizes, mismatched lengths, or values
        that are not finite and positive.

    Notes
    -----
    Ordinary least squares on the raw points. A fitted constant at or
    below zero means the data do not look like this model (for instance,
    steps past saturation where queueing, not batching, sets latency, or
    a multi-turn workload whose cache hits make TPOT fall with load); the
    fit is still returned, ``is_plausible`` is then False, and
    ``r_squared`` says how well the line holds.
    """
    batch = np.atleast_1d(require_positive("batch_size", batch_size)).astype(float)
    step = np.atleast_1d(require_positive("step_ms", step_ms)).astype(float)
    if batch.shape != step.shape:
        raise PlannerInputError(f"batch_size and step_ms must have the same length, got {batch.size} and {step.size}")
    if np.unique(batch).size < 2:
        raise PlannerInputError("fitting a step-time model needs at least two distinct batch sizes")
    design = np.column_stack([np.ones_like(batch), batch])
    (fixed_ms, per_sequence_ms), *_ = np.linalg.lstsq(design, step, rcond=None)
    residual = step - (fixed_ms + per_sequence_ms * batch)
    total = np.sum((step - step.mean()) ** 2)
    r_squared = 1.0 - float(np.sum(residual**2)) / float(total) if total > 0 else 1.0
    return StepTimeFit(
        fixed_ms=float(fixed_ms),
        per_sequence_ms=float(per_sequence_ms),
        r_squared=r_squared,
        rmse_ms=float(np.sqrt(np.mean(residual**2))),
        max_abs_residual_ms=float(np.max(np.abs(residual))),
        n_points=int(batch.size),
    )
