"""Tests for planner.readers.canonical_trace."""

from __future__ import annotations

import numpy as np
import pytest

from planner.errors import PlannerInputError
from planner.readers.canonical_trace import read_canonical_trace
from tests.conftest import DATA_DIR


def test_bundled_steady_trace():
    trace = read_canonical_trace(DATA_DIR / "traces" / "steady-0.6rps-12min.csv")
    assert len(trace) == 432
    assert np.allclose(np.diff(trace.arrival_s), 1 / 0.6, atol=1e-3)
    assert set(trace.output_tokens.tolist()) == {900}


def test_rows_are_named(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("arrival_s,input_tokens,output_tokens\n0,1,1\n2,1\n")
    with pytest.raises(PlannerInputError, match=r"t.csv: row 3: expected 3 values"):
        read_canonical_trace(path)
