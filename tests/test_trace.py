"""Tests for planner.readers.trace: the Azure LLM traces, canonical and rate traces, and every bad input."""

from __future__ import annotations

import csv
from datetime import datetime

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.errors import PlannerInputError
from planner.readers.trace import read_rate_trace, read_request_trace, read_trace, trace_format

# Data rows in the published files. The traces' README says 19,365 and 8,818:
# that is `wc -l`, which misses the last row because the files end without a
# newline (CRLF line ends, no trailing CRLF).
AZURE = {"conv": (19_366, 3501.721937), "code": (8_819, 3435.948056)}


def _independent_read(path):
    """The same file through the csv module and datetime, to check the pandas path against."""
    with path.open(newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    stamps = [datetime.strptime(r[0][:26], "%Y-%m-%d %H:%M:%S.%f") for r in rows]  # 6 digits; the 7th is 0 here
    assert all(r[0][26:] == "0" for r in rows)
    arrival = np.array([(s - stamps[0]).total_seconds() for s in stamps])
    return arrival, np.array([int(r[1]) for r in rows]), np.array([int(r[2]) for r in rows])


@pytest.mark.parametrize("name", sorted(AZURE))
def test_reads_the_azure_traces(shared_dir, name):
    path = shared_dir / "traces" / f"AzureLLMInferenceTrace_{name}.csv"
    rows, span_s = AZURE[name]
    assert trace_format(path) == "azure"
    trace = read_trace(path)
    assert len(trace) == rows
    assert trace.duration_s == pytest.approx(span_s, abs=1e-6)  # about an hour (58 and 57 minutes)
    assert trace.arrival_s[0] == 0.0 and np.all(np.diff(trace.arrival_s) >= 0)
    assert trace.input_tokens.dtype == np.int64 and trace.output_tokens.dtype == np.int64
    arrival, context, generated = _independent_read(path)
    np.testing.assert_allclose(trace.arrival_s, arrival, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(trace.input_tokens, context)
    np.testing.assert_array_equal(trace.output_tokens, generated)
    trace.check()


def _write(tmp_path, text, name="trace.csv"):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_azure_times_keep_all_fractional_digits(tmp_path):
    path = _write(
        tmp_path,
        "TIMESTAMP,ContextTokens,GeneratedTokens\r\n"
        "2023-11-16 18:17:03.1234567,10,5\r\n"
        "2023-11-16 18:17:03.1234568,20,6\r\n"
        "2023-11-16 18:17:05,30,7",
    )
    trace = read_request_trace(path)
    assert trace.arrival_s.tolist() == [0.0, 1e-7, pytest.approx(1.8765433, abs=1e-12)]
    assert trace.input_tokens.tolist() == [10, 20, 30] and trace.output_tokens.tolist() == [5, 6, 7]


def test_canonical_trace(tmp_path):
    path = _write(tmp_path, "arrival_s,input_tokens,output_tokens\n0.5,100,20\n0.5,0,1\n2.25,7,300\n")
    trace = read_trace(path)
    assert trace.arrival_s.tolist() == [0.5, 0.5, 2.25]
    assert trace.input_tokens.tolist() == [100, 0, 7] and trace.output_tokens.tolist() == [20, 1, 300]
    assert trace.source == str(path)


def test_rate_trace_defaults_and_columns(tmp_path):
    path = _write(tmp_path, "t_s,rate_rps\n0,2\n60,4\n")
    rates = read_rate_trace(path)
    assert rates.end_s == 120.0 and rates.expected_requests == pytest.approx(360.0)
    assert rates.mean_output_tokens.tolist() == [240.0, 240.0]
    full = read_rate_trace(
        _write(tmp_path, "t_s,rate_rps,mean_input_tokens,mean_output_tokens\n0,1,50,700\n", "r.csv"), end_s=30.0
    )
    assert (full.end_s, full.mean_input_tokens.tolist(), full.mean_output_tokens.tolist()) == (30.0, [50.0], [700.0])


def test_rate_trace_is_drawn_with_the_seed(tmp_path):
    path = _write(tmp_path, "t_s,rate_rps,mean_output_tokens\n0,5,100\n100,0\n200,1,\n")
    with pytest.raises(PlannerInputError, match=r"row 2: mean_output_tokens an empty cell is not a finite number"):
        read_trace(path)
    path = _write(tmp_path, "t_s,rate_rps\n0,5\n100,0\n200,1\n")
    a, b, c = read_trace(path, seed=3), read_trace(path, seed=3), read_trace(path, seed=4)
    assert a.arrival_s.tobytes() == b.arrival_s.tobytes() and len(a) > 0
    assert not np.array_equal(a.arrival_s, c.arrival_s)
    assert not np.any((a.arrival_s >= 100) & (a.arrival_s < 200))  # the zero-rate step
    assert a.arrival_s.max() < 300


AZURE_HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
CANONICAL_HEADER = "arrival_s,input_tokens,output_tokens\n"
BAD_INPUTS = [
    pytest.param(
        AZURE_HEADER + "2023-11-16 18:17:03.9799600,1,2\n16/11/2023 18:17,1,2\n",
        r"row 2: TIMESTAMP '16/11/2023 18:17' is not a time like",
        id="unparseable-timestamp",
    ),
    pytest.param(
        AZURE_HEADER + "2023-11-16 18:17:03.9,1,2\n2023-11-16 18:17:04.1,1,2\n2023-11-16 18:17:04.0,1,2\n",
        r"row 3: TIMESTAMP goes back in time \(before row 2\)",
        id="unsorted-timestamp",
    ),
    pytest.param(
        CANONICAL_HEADER + "0,1,2\n5,1,2\n4,1,2\n", r"row 3: arrival_s goes back in time", id="unsorted-arrival"
    ),
    pytest.param(
        CANONICAL_HEADER + "0,1,2\n1,abc,2\n",
        r"row 2: input_tokens 'abc' is not a whole number",
        id="unparseable-tokens",
    ),
    pytest.param(
        AZURE_HEADER + "2023-11-16 18:17:03.9,-4,2\n",
        r"row 1: ContextTokens '-4' is not a whole number of "
        r"tokens >= 0",
        id="negative-tokens",
    ),
    pytest.param(
        CANONICAL_HEADER + "0,1,2\n1,1,-2\n",
        r"row 2: output_tokens '-2' is not a whole number of tokens >= 1",
        id="negative-output",
    ),
    pytest.param(
        CANONICAL_HEADER + "0,1,0\n", r"row 1: output_tokens '0' is not a whole number of tokens >= 1", id="zero-output"
    ),
    pytest.param(CANONICAL_HEADER + "0,1.5,2\n", r"row 1: input_tokens '1.5' is not a whole number", id="fractional"),
    pytest.param(CANONICAL_HEADER + "-1,1,2\n", r"row 1: arrival_s '-1' is not a number >= 0", id="negative-time"),
    pytest.param(
        CANONICAL_HEADER + "0,1,2\n,1,2\n", r"row 2: arrival_s an empty cell is not a finite number", id="empty-cell"
    ),
    pytest.param(CANONICAL_HEADER, r"no data rows after the header \(an empty trace\)", id="empty-trace"),
    pytest.param("", r"empty file; expected a header of arrival_s", id="empty-file"),
    pytest.param(
        "arrival_s,input_tokens\n0,1\n",
        r"missing column 'output_tokens' for a canonical request trace",
        id="missing-column",
    ),
    pytest.param(
        "TIMESTAMP,ContextTokens\n",
        r"missing column 'GeneratedTokens' for a Azure LLM trace",
        id="missing-azure-column",
    ),
    pytest.param(
        "time,prompt,answer\n0,1,2\n", r"unknown header 'time,prompt,answer'; expected a header of", id="unknown-header"
    ),
    pytest.param("arrival_s,input_tokens,output_tokens,user\n0,1,2,x\n", r"unknown column 'user'", id="unknown-column"),
    pytest.param("t_s,rate_rps\n0,1\n0,2\n", r"row 2: t_s 0 must be after the previous row's 0", id="rate-unsorted"),
    pytest.param("t_s,rate_rps\n0,1\n5,-2\n", r"row 2: rate_rps '-2' is not a number >= 0", id="rate-negative"),
    pytest.param("t_s,rate_rps\n0,1\n", r"a one-row rate trace needs an explicit end time", id="rate-one-row"),
    pytest.param(
        "t_s,rate_rps,mean_output_tokens\n0,1,0.5\n1,1,2\n",
        r"row 1: mean_output_tokens '0.5' is not a "
        r"number >= 1",
        id="rate-short-answers",
    ),
    pytest.param(CANONICAL_HEADER + "0,1,2\n1,1,2,9\n", r"not a well-formed CSV", id="extra-field"),
]


@pytest.mark.parametrize(("text", "message"), BAD_INPUTS)
def test_bad_input_names_file_row_and_expectation(tmp_path, text, message):
    path = _write(tmp_path, text)
    before = path.read_bytes()
    with pytest.raises(PlannerInputError, match=message) as info:
        read_trace(path)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)
    assert path.read_bytes() == before  # the input is never touched


def test_wrong_reader_for_the_shape(tmp_path):
    rate = _write(tmp_path, "t_s,rate_rps\n0,1\n1,1\n", "rate.csv")
    with pytest.raises(PlannerInputError, match="this is a rate trace"):
        read_request_trace(rate)
    canonical = _write(tmp_path, CANONICAL_HEADER + "0,1,2\n", "c.csv")
    with pytest.raises(PlannerInputError, match="this is a canonical request trace, not a rate trace"):
        read_rate_trace(canonical)
    with pytest.raises(PlannerInputError, match="no such file"):
        read_trace(tmp_path / "missing.csv")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.floats(0, 1e6, allow_nan=False, allow_infinity=False), st.integers(0, 2**40), st.integers(1, 2**40)
        ),
        min_size=1,
        max_size=50,
    )
)
def test_canonical_round_trip_is_exact(tmp_path_factory, rows):
    """Whatever pandas writes, the reader gives back exactly (floats to the bit, tokens as int64)."""
    rows = sorted(rows)
    frame = pd.DataFrame(rows, columns=["arrival_s", "input_tokens", "output_tokens"])
    path = tmp_path_factory.mktemp("round") / "t.csv"
    frame.to_csv(path, index=False)
    trace = read_trace(path)
    assert trace.arrival_s.tobytes() == frame["arrival_s"].to_numpy(dtype=float).tobytes()
    assert trace.input_tokens.tolist() == frame["input_tokens"].tolist()
    assert trace.output_tokens.tolist() == frame["output_tokens"].tolist()


def test_a_scenario_file_is_a_trace_too(tmp_path):
    path = _write(tmp_path, "kind: constant\nduration_s: 600\nrate_rps: 2\n", "steady.yaml")
    a, b = read_trace(path, seed=8), read_trace(path, seed=8)
    assert a.arrival_s.tobytes() == b.arrival_s.tobytes() and 1000 < len(a) < 1400
    assert a.source.startswith("scenario constant")
