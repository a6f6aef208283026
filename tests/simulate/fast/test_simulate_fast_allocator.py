"""The allocator setting: with it, a freed large array leaves the process's resident memory."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

# Allocate and free a 24 MB array six times, keeping a small one each time. Under glibc's adaptive
# threshold the first free raises the threshold above 24 MB, so the next arrays come from the heap and
# stay resident; with the threshold fixed each is unmapped when freed.
PROGRAM = """
import sys
import numpy as np
from planner.simulate.fast.allocator import free_large_arrays_to_the_system

def resident_mib():
    return int(open("/proc/self/statm").read().split()[1]) * 4096 / 2**20

applied = free_large_arrays_to_the_system() if sys.argv[1] == "fixed" else None
before = resident_mib()
kept = []
for _ in range(6):
    block = np.ones(3_000_000)
    kept.append(np.ones(1000))
    del block
print(applied, resident_mib() - before)
"""


def _growth_mib(mode: str) -> tuple[str, float]:
    # glibc's own defaults in the child: a malloc setting in the environment turns the adaptive threshold off
    # (a Dask LocalCluster started earlier in this process leaves MALLOC_TRIM_THRESHOLD_=65536 in os.environ).
    env = {k: v for k, v in os.environ.items() if not (k.startswith("MALLOC_") or k == "GLIBC_TUNABLES")}
    out = subprocess.run(
        [sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, check=True, env=env
    ).stdout
    applied, growth = out.split()
    return applied, float(growth)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt is Linux's")
def test_with_the_threshold_fixed_freed_large_arrays_leave_resident_memory():
    applied, growth_mib = _growth_mib("fixed")
    if applied != "True":
        pytest.skip("this C library is not glibc: mallopt did not take the setting")
    assert growth_mib < 4.0
    # The same program without the setting keeps a 24 MB block resident: the test measures something.
    _, adaptive_growth_mib = _growth_mib("adaptive")
    assert adaptive_growth_mib > 16.0


def test_the_setting_is_made_once_and_reported():
    from planner.simulate.fast.allocator import free_large_arrays_to_the_system

    first = free_large_arrays_to_the_system()
    assert free_large_arrays_to_the_system() is first
