"""Floating-point helpers the compiled kernels share, so their sums match numpy's bit for bit."""

from __future__ import annotations

from numba import njit

__all__ = ["pairwise_sum"]

_BLOCK = 128  # numpy's PW_BLOCKSIZE


@njit(cache=True, nogil=True)
def pairwise_sum(values, start, n):
    """``values[start:start + n].sum()`` as numpy computes it for float64 (pairwise, 8-way unrolled).

    numpy's ``ndarray.sum`` of a contiguous float64 array is not a left-to-right
    sum: below 8 elements it is, up to 128 it keeps eight partial sums, above
    that it splits in two. A kernel that must reproduce ``arr.sum()`` exactly
    calls this; one that mirrors Python's built-in ``sum`` adds left to right.
    """
    if n < 8:
        total = 0.0
        for i in range(n):
            total += values[start + i]
        return total
    if n <= _BLOCK:
        r0 = values[start]
        r1 = values[start + 1]
        r2 = values[start + 2]
        r3 = values[start + 3]
        r4 = values[start + 4]
        r5 = values[start + 5]
        r6 = values[start + 6]
        r7 = values[start + 7]
        i = 8
        stop = n - (n % 8)
        while i < stop:
            r0 += values[start + i]
            r1 += values[start + i + 1]
            r2 += values[start + i + 2]
            r3 += values[start + i + 3]
            r4 += values[start + i + 4]
            r5 += values[start + i + 5]
            r6 += values[start + i + 6]
            r7 += values[start + i + 7]
            i += 8
        total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
        while i < n:
            total += values[start + i]
            i += 1
        return total
    half = n // 2
    half -= half % 8
    return pairwise_sum(values, start, half) + pairwise_sum(values, start + half, n - half)
