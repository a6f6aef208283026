"""Tests for planner.readers.trace: Azure, BurstGPT, canonical and rate traces, telling formats apart, bad input."""

from __future__ import annotations

import csv
from datetime import datetime

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planner.errors import PlannerInputError
from planner.readers.trace import TRACE_FORMATS, read_rate_trace, read_request_trace, read_trace, trace_format
from tests.conftest import TEST_DATA_DIR

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


# ------------------------------------------------------------------ BurstGPT

BURSTGPT = TEST_DATA_DIR / "traces" / "burstgpt-head.csv"
BURSTGPT_HEADER = "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"


def test_reads_the_published_burstgpt_rows_without_the_failed_one():
    assert trace_format(BURSTGPT) == "burstgpt"
    with BURSTGPT.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 33 and [r for r in rows if r["Response tokens"] == "0"] == [rows[20]]
    ok = [r for r in rows if r["Response tokens"] != "0"]
    trace = read_trace(BURSTGPT)
    assert trace.arrival_s.tolist() == [float(r["Timestamp"]) for r in ok]  # seconds from the first day's midnight
    assert trace.input_tokens.tolist() == [int(r["Request tokens"]) for r in ok]
    assert trace.output_tokens.tolist() == [int(r["Response tokens"]) for r in ok]
    assert trace.source == f"{BURSTGPT}, 1 failed request dropped"
    gpt4 = read_trace(BURSTGPT, model="GPT-4")
    assert gpt4.arrival_s.tolist() == [float(r["Timestamp"]) for r in ok if r["Model"] == "GPT-4"]
    assert len(gpt4) == 8 and gpt4.source.endswith("(Model GPT-4), 0 failed requests dropped")
    chat = read_trace(BURSTGPT, model="ChatGPT")
    assert len(chat) == 24 and chat.source.endswith("(Model ChatGPT), 1 failed request dropped")
    trace.check()


def test_burstgpt_keeps_other_columns_out_and_refuses_an_unknown_model(tmp_path):
    path = _write(
        tmp_path,
        BURSTGPT_HEADER.replace("Log Type", "Log Type,Session ID,Elapsed time")
        + "0.5,GPT-4,10,0,10,API log,s1,3.5\n2.25,GPT-4,20,7,27,API log,s1,1.0\n",
    )
    trace = read_trace(path)
    assert trace.arrival_s.tolist() == [2.25] and trace.output_tokens.tolist() == [7]
    with pytest.raises(PlannerInputError, match=r"Model: no row is 'gpt-4'; the file has 'GPT-4'"):
        read_trace(path, model="gpt-4")
    with pytest.raises(PlannerInputError, match=r"every request of Model 'GPT-4' failed"):
        read_trace(_write(tmp_path, BURSTGPT_HEADER + "5,GPT-4,10,0,10,API log\n", "failed.csv"), model="GPT-4")


BAD_BURSTGPT = [
    pytest.param(
        BURSTGPT_HEADER + "5,ChatGPT,472,18,490,Conversation log\n4,ChatGPT,1,1,2,Conversation log\n",
        r"row 2: Timestamp goes back in time \(before row 1\)",
        id="unsorted",
    ),
    pytest.param(
        BURSTGPT_HEADER + "5,ChatGPT,472,-1,471,Conversation log\n",
        r"row 1: Response tokens '-1' is not a whole number of tokens >= 0",
        id="negative-response",
    ),
    pytest.param(
        BURSTGPT_HEADER + "5,ChatGPT,4x,18,490,Conversation log\n",
        r"row 1: Request tokens '4x' is not a whole number",
        id="unparseable-request",
    ),
    pytest.param(
        BURSTGPT_HEADER + "5,ChatGPT,472,18,4.5,Conversation log\n",
        r"row 1: Total tokens '4.5' is not a whole number",
        id="fractional-total",
    ),
    pytest.param(
        BURSTGPT_HEADER + "5,,472,18,490,Conversation log\n",
        r"row 1: Model an empty cell is not a name",
        id="empty-model",
    ),
    pytest.param(
        BURSTGPT_HEADER + "-5,ChatGPT,472,18,490,Conversation log\n",
        r"row 1: Timestamp '-5' is not a number >= 0",
        id="negative-time",
    ),
    pytest.param(
        "Timestamp,Model,Request tokens,Response tokens,Total tokens\n5,ChatGPT,1,1,2\n",
        r"missing column 'Log Type' for a BurstGPT trace",
        id="missing-column",
    ),
]


@pytest.mark.parametrize(("text", "message"), BAD_BURSTGPT)
def test_bad_burstgpt_rows_name_file_row_and_column(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(PlannerInputError, match=message) as info:
        read_trace(path)
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)


# ------------------------------------------------------------------ telling the formats apart


def test_every_format_is_told_from_its_file(tmp_path, shared_dir):
    found = {
        "canonical": _write(tmp_path, CANONICAL_HEADER + "0,1,2\n", "c.csv"),
        "azure": shared_dir / "traces" / "AzureLLMInferenceTrace_code.csv",
        "rate": _write(tmp_path, "t_s,rate_rps\n0,1\n60,2\n", "r.csv"),
        "burstgpt": BURSTGPT,
        "mooncake": shared_dir / "traces" / "mooncake_conversation_trace.jsonl",
        "prometheus": TEST_DATA_DIR / "traces" / "prometheus-request-rate.json",
        "scenario": _write(tmp_path, "kind: constant\nduration_s: 60\nrate_rps: 1\n", "s.yaml"),
    }
    assert sorted(found) == sorted(TRACE_FORMATS)
    for kind, path in found.items():
        assert trace_format(path) == kind
    # a Mooncake trace saved as .json is told by its first line
    renamed = _write(tmp_path, '{"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [0]}\n', "m.json")
    assert trace_format(renamed) == "mooncake" and len(read_trace(renamed)) == 1


def test_a_named_format_is_checked_against_the_file(tmp_path):
    canonical = _write(tmp_path, CANONICAL_HEADER + "0,1,2\n", "c.csv")
    assert len(read_trace(canonical, file_format="canonical")) == 1
    with pytest.raises(PlannerInputError, match="not a BurstGPT trace: it reads as a canonical request trace"):
        read_trace(canonical, file_format="burstgpt")
    with pytest.raises(PlannerInputError, match=r"line 1: not valid JSON"):
        read_trace(canonical, file_format="mooncake")
    with pytest.raises(PlannerInputError, match=r"trace format must be auto or one of canonical, azure"):
        read_trace(canonical, file_format="csv")
    with pytest.raises(PlannerInputError, match="a model to keep applies to a BurstGPT trace"):
        read_trace(canonical, model="GPT-4")
    with pytest.raises(PlannerInputError, match="a series to choose applies to a Prometheus export"):
        read_trace(canonical, series=0)
    with pytest.raises(PlannerInputError, match="mean_output_tokens does not apply to a canonical request trace"):
        read_trace(canonical, mean_output_tokens=100)
    neither = _write(tmp_path, '{"kind": "x"}\n', "x.json")
    with pytest.raises(PlannerInputError, match=r"JSON that is neither a Mooncake trace .* nor a Prometheus"):
        read_trace(neither)


def test_a_rate_mean_is_refused_where_the_file_has_its_own_column(tmp_path):
    path = _write(tmp_path, "t_s,rate_rps,mean_output_tokens\n0,1,50\n60,1,70\n")
    with pytest.raises(PlannerInputError, match="has a mean_output_tokens column; a mean_output_tokens given as well"):
        read_rate_trace(path, mean_output_tokens=100)
    rates = read_rate_trace(path, mean_input_tokens=300)
    assert rates.mean_input_tokens.tolist() == [300.0, 300.0] and rates.mean_output_tokens.tolist() == [50.0, 70.0]
