"""The ``outcome`` kernel: the per-request latencies and their counts in one pass, as numpy computes them.

:func:`request_summary` computes what :func:`planner.simulate.outcome.request_latencies`
and :func:`planner.simulate.outcome.slo_met` compute, and the counts and sums the
Outcome takes from them, in one compiled pass over the requests instead of a
dozen numpy passes (a day of a busy trace holds half a million requests, and a
sweep builds an Outcome for every path through its grid). The floating-point
operations are numpy's, in numpy's order: ``first - arrival``,
``(done - first) / (output - 1) * 1000``, the comparisons against
``objective + 1e-9``, and the ITL mean as numpy's pairwise sum of the finite
values, in request order, over their count. The TTFT percentiles are left to
``numpy.percentile`` on the finite values this kernel gathers.
"""

from __future__ import annotations

import math

from numba import njit

from planner.simulate.fast._numeric import pairwise_sum
from planner.simulate.replica import CUT, DONE

__all__ = ["request_summary"]


@njit(cache=True, nogil=True)
def request_summary(
    arrival_s,
    output_tokens,
    status,
    first_token_s,
    done_s,
    ttft_limit_s,
    itl_limit_ms,
    ttft_s,
    met,
    finite_ttft_s,
    finite_itl_ms,
):
    """TTFT and SLO per request, and the Outcome's counts.

    Parameters
    ----------
    arrival_s, first_token_s, done_s : numpy.ndarray of float64
        Per request. [s]
    output_tokens : numpy.ndarray of int64
        Per request. [tokens]
    status : numpy.ndarray of int8
        Per request status code.
    ttft_limit_s : float
        The TTFT objective plus 1e-9, as ``slo_met`` compares. [s]
    itl_limit_ms : float
        The ITL objective plus 1e-9, or NaN when there is none. [ms]
    ttft_s : numpy.ndarray of float64
        Receives each request's TTFT (NaN where none); empty: not kept. [s]
    met : numpy.ndarray of bool
        Receives whether each request met the objective(s); empty: not kept.
    finite_ttft_s, finite_itl_ms : numpy.ndarray of float64
        Receive the finite TTFTs [s] and mean ITLs [ms], in request order.

    Returns
    -------
    n_met, n_done, n_cut : int
        Requests that met the objective(s), finished, were cut off.
    n_ttft : int
        Finite TTFTs written to ``finite_ttft_s``.
    itl_mean_ms : float
        Mean of the finite per-request mean ITLs (NaN if none). [ms]
    """
    n_met = 0
    n_done = 0
    n_cut = 0
    n_ttft = 0
    n_itl = 0
    has_itl_limit = not math.isnan(itl_limit_ms)
    keep_ttft = ttft_s.shape[0] > 0
    keep_met = met.shape[0] > 0
    for i in range(arrival_s.shape[0]):
        ttft = first_token_s[i] - arrival_s[i]
        if keep_ttft:
            ttft_s[i] = ttft
        after_first = output_tokens[i] - 1
        if math.isfinite(done_s[i]):
            itl = (done_s[i] - first_token_s[i]) / after_first * 1000.0 if after_first > 0 else 0.0
        else:
            itl = math.nan
        code = status[i]
        ok = math.isfinite(ttft) and ttft <= ttft_limit_s and code != CUT
        if has_itl_limit:
            ok = ok and math.isfinite(itl) and itl <= itl_limit_ms
        if keep_met:
            met[i] = ok
        if ok:
            n_met += 1
        if code == DONE:
            n_done += 1
        elif code == CUT:
            n_cut += 1
        if math.isfinite(ttft):
            finite_ttft_s[n_ttft] = ttft
            n_ttft += 1
        if math.isfinite(itl):
            finite_itl_ms[n_itl] = itl
            n_itl += 1
    itl_mean_ms = pairwise_sum(finite_itl_ms, 0, n_itl) / n_itl if n_itl else math.nan
    return n_met, n_done, n_cut, n_ttft, itl_mean_ms
