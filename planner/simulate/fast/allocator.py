"""The ``allocator`` setting: large arrays go straight back to the operating system when freed.

A long run allocates and frees arrays of tens of megabytes over and over (the
per-run scratch, snapshots where a group splits, each configuration's
outcome), from several threads in a sweep. glibc's ``malloc`` serves a block
of at least ``M_MMAP_THRESHOLD`` bytes with its own ``mmap``, returned to the
system by ``free``; but by default the threshold adapts, rising to the size of
each such block freed (up to 32 MiB), after which blocks of that size come
from the heap and its per-thread arenas, where a free keeps them resident. On
the week-long 1,000-configuration sweep of ``make bench`` that kept the peak
resident memory about 0.6 GiB above what the run held at any time (2.47 GiB
against 1.86 GiB with a fixed threshold).

Setting the threshold with ``mallopt`` turns the adaptation off (GNU C
Library manual, "Malloc Tunable Parameters": "If the parameter is set, the
dynamic adjustment is disabled"); 1 MiB keeps small arrays on the heap, where
reuse is fast. Elsewhere (musl, macOS) nothing is changed.
"""

from __future__ import annotations

import ctypes
import functools
import sys

__all__ = ["MMAP_THRESHOLD_BYTES", "free_large_arrays_to_the_system"]

MMAP_THRESHOLD_BYTES = 1 << 20
"""Blocks of at least this many bytes are mapped on their own and unmapped when freed. [bytes]"""

_M_MMAP_THRESHOLD = -3  # glibc's malloc.h


@functools.cache  # once per process (two threads racing both set the same value, which is harmless)
def free_large_arrays_to_the_system() -> bool:
    """Fix glibc's mmap threshold at :data:`MMAP_THRESHOLD_BYTES`, once per process.

    Returns
    -------
    bool
        Whether the C library took the setting (``False`` without glibc).
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) == 1)
