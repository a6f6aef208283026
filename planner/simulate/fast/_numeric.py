"""Floating-point helpers the compiled kernels share, so their sums match numpy's bit for bit."""

from __future__ import annotations

from typing import Any

import numpy as np
from numba import njit

__all__ = ["NRT_OFF", "NRT_ON", "pairwise_sum"]

# numba's private ``_nrt`` flag (reference counting on or off for one kernel), which its typing omits:
# spread into ``njit(...)`` as keywords. A callee compiles with its caller's setting unless it sets its own.
NRT_ON: dict[str, Any] = {"_nrt": True}
NRT_OFF: dict[str, Any] = {"_nrt": False}

_BLOCK = 128  # numpy's PW_BLOCKSIZE


@njit(cache=True, nogil=True, inline="always")
def _block_sum(values, start, n):
    # One leaf of numpy's pairwise sum: left to right below 8 elements, else eight partial sums.
    if n < 8:
        total = 0.0
        for i in range(n):
            total += values[start + i]
        return total
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


@njit(cache=True, nogil=True, inline="always")
def pairwise_sum(values, start, n):
    """``values[start:start + n].sum()`` as numpy computes it for float64 (pairwise, 8-way unrolled).

    numpy's ``ndarray.sum`` of a contiguous float64 array is not a left-to-right
    sum: below 8 elements it is, up to 128 it keeps eight partial sums, above
    that it splits in two (the first half a multiple of 8) and adds the halves'
    sums. A kernel that must reproduce ``arr.sum()`` exactly calls this; one
    that mirrors Python's built-in ``sum`` adds left to right.

    Inlined into the caller: the common case (at most 128 values) is a plain
    loop there, with no call and no reference counting of ``values``.
    """
    if n <= _BLOCK:
        return _block_sum(values, start, n)
    return _halving_sum(values, start, n)


@njit(cache=True, nogil=True, **NRT_ON)
def _halving_sum(values, start, n):
    # pairwise_sum above one block. The halving is walked with an explicit stack, not by recursion:
    # numba's cache cannot reload a recursive function that other cached kernels call. It allocates
    # that stack, so it asks for NRT itself (a caller compiled without it would otherwise pass that on).
    frame_start = np.empty(64, dtype=np.int64)
    frame_n = np.empty(64, dtype=np.int64)
    frame_right = np.zeros(64, dtype=np.bool_)  # the left half is summed, its value in frame_left
    frame_left = np.empty(64)
    frame_start[0] = start
    frame_n[0] = n
    top = 1
    have = False  # ``value`` holds the sum of the child just finished
    value = 0.0
    while True:
        i = top - 1
        half = frame_n[i] // 2
        half -= half % 8
        if have:
            if frame_right[i]:
                value = frame_left[i] + value
                top -= 1
                if top == 0:
                    return value
                continue
            frame_left[i] = value
            frame_right[i] = True
            child_start = frame_start[i] + half
            child_n = frame_n[i] - half
        else:
            child_start = frame_start[i]
            child_n = half
        if child_n <= _BLOCK:
            value = _block_sum(values, child_start, child_n)
            have = True
        else:
            frame_start[top] = child_start
            frame_n[top] = child_n
            frame_right[top] = False
            top += 1
            have = False
