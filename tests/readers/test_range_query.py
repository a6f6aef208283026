"""Tests for planner.readers.range_query: a Prometheus query_range export read as a rate, and every refusal."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from planner.errors import PlannerInputError
from planner.readers.range_query import read_range_query
from planner.readers.trace import read_trace, trace_format
from tests.conftest import TEST_DATA_DIR

FIXTURE = TEST_DATA_DIR / "traces" / "prometheus-request-rate.json"
START = 1731920460  # the first sample: 2024-11-18 09:01 UTC, one 60 s step after the range's start


def _published() -> dict:
    return json.loads(FIXTURE.read_text())


def test_reads_one_series_as_steps_before_each_sample():
    document = _published()
    for series in (0, "0", "model_name=chat", 'model_name="chat"'):
        rates = read_range_query(FIXTURE, series=series)
        values = document["data"]["result"][0]["values"]
        assert rates.t_s.tolist() == [t - START for t, _ in values]
        assert rates.rate_rps.tolist() == [float(v) for _, v in values]
        assert rates.end_s == 120 * 60.0 and rates.step_s.tolist() == [60.0] * 120
        assert rates.mean_input_tokens.tolist() == [512.0] * 120 and rates.mean_output_tokens.tolist() == [240.0] * 120
        assert rates.source.endswith('({model_name="chat"}, 120 steps of 60 s from 2024-11-18 09:00:00 UTC)')
    code = read_range_query(FIXTURE, series="model_name=code", mean_input_tokens=900, mean_output_tokens=80)
    assert code.rate_rps[0] == float(document["data"]["result"][1]["values"][0][1])
    assert code.mean_input_tokens[0] == 900.0 and code.mean_output_tokens[0] == 80.0


def test_requests_are_a_seeded_poisson_draw_of_the_rate():
    assert trace_format(FIXTURE) == "prometheus"
    rates = read_range_query(FIXTURE, series=0)
    a = read_trace(FIXTURE, series=0, seed=4)
    b = read_trace(FIXTURE, series=0, seed=4)
    c = read_trace(FIXTURE, series=0, seed=5)
    assert a.arrival_s.tobytes() == b.arrival_s.tobytes() and not np.array_equal(a.arrival_s[:100], c.arrival_s[:100])
    assert abs(len(a) - rates.expected_requests) < 4 * math.sqrt(rates.expected_requests)
    per_step = np.bincount((a.arrival_s // 60).astype(int), minlength=120)
    expected = rates.rate_rps * 60
    assert np.abs(per_step - expected).max() < 5 * np.sqrt(expected.max())
    assert set(a.output_tokens.tolist()) == {240} and set(a.input_tokens.tolist()) == {512}
    geometric = read_trace(FIXTURE, series=1, seed=4, token_distribution="geometric", mean_output_tokens=100)
    assert geometric.output_tokens.mean() == pytest.approx(100, rel=0.1) and geometric.output_tokens.std() > 50


def _export(tmp_path, document, name="rate.json") -> object:
    path = tmp_path / name
    path.write_text(json.dumps(document, separators=(",", ":")) if not isinstance(document, str) else document)
    return path


def _one(values, metric=None) -> dict:
    return {
        "status": "success",
        "data": {"resultType": "matrix", "result": [{"metric": metric or {}, "values": values}]},
    }


def test_pretty_printed_json_and_fractional_timestamps(tmp_path):
    path = tmp_path / "pretty.json"
    path.write_text(json.dumps(_one([[1435781430.781, "1"], [1435781445.781, "2.5"]]), indent=3))
    assert trace_format(path) == "prometheus"
    rates = read_range_query(path)
    assert rates.t_s.tolist() == pytest.approx([0.0, 15.0]) and rates.end_s == pytest.approx(30.0)
    one = _export(tmp_path, _one([[1435781430, "3"]]), "one.json")
    with pytest.raises(PlannerInputError, match=r"one sample has no step; export two or more, or give step_s"):
        read_range_query(one)
    assert read_range_query(one, step_s=30).end_s == 30.0


TWO_SERIES = {
    "status": "success",
    "data": {
        "resultType": "matrix",
        "result": [
            {"metric": {"pod": "a"}, "values": [[0, "1"], [60, "1"]]},
            {"metric": {"pod": "b"}, "values": [[0, "2"], [60, "2"]]},
        ],
    },
}

BAD_EXPORTS = [
    pytest.param(
        {"status": "error", "errorType": "bad_data", "error": "parse error"},
        {},
        r"status: the query failed \(bad_data: parse error\)",
        id="status-error",
    ),
    pytest.param({"data": {}}, {}, r"status: expected \"success\", got None", id="no-status"),
    pytest.param(
        {"status": "success", "data": {"resultType": "vector", "result": []}},
        {},
        r"data.resultType: expected \"matrix\" \(a range query's result\), got 'vector'",
        id="vector",
    ),
    pytest.param(
        {"status": "success", "data": {"resultType": "matrix", "result": []}},
        {},
        r"data.result: no series \(the query matched nothing over the range\)",
        id="no-series",
    ),
    pytest.param(
        TWO_SERIES,
        {},
        r"data.result: 2 series \(\[0\] \{pod=\"a\"\}, \[1\] \{pod=\"b\"\}\); choose one by index or labels",
        id="several-series",
    ),
    pytest.param(TWO_SERIES, {"series": 2}, r"data.result\[2\]: no such series; the result holds 2", id="index-out"),
    pytest.param(TWO_SERIES, {"series": "pod=c"}, r"data.result: no series has the labels pod=c", id="no-match"),
    pytest.param(
        TWO_SERIES, {"series": "pod"}, r"series 'pod': expected an index or labels name=value", id="labels-malformed"
    ),
    pytest.param(
        _one([[0, "1"], [60, "NaN"]]),
        {},
        r"data.result\[0\].values\[1\]: value 'NaN' is not a rate \(NaN",
        id="nan",
    ),
    pytest.param(
        _one([[0, "-0.5"]]),
        {"step_s": 60},
        r"data.result\[0\].values\[0\]: value '-0.5' is not a request rate \(a finite number >= 0\)",
        id="negative",
    ),
    pytest.param(
        _one([[0, "1"], [60, "+Inf"]]),
        {},
        r"data.result\[0\].values\[1\]: value '\+Inf' is not a request rate",
        id="infinite",
    ),
    pytest.param(
        _one([[0, "1"], [60, "abc"]]), {}, r"data.result\[0\].values\[1\]: value 'abc' is not a number", id="text"
    ),
    pytest.param(
        _one([[0, "1"], [120, "1"], [60, "1"]]),
        {},
        r"data.result\[0\].values\[2\]: timestamp 60.000 is not after the previous sample's 120.000; "
        r"expected samples sorted by time",
        id="unsorted",
    ),
    pytest.param(
        _one([[0, "1"], [0, "1"]]),
        {},
        r"data.result\[0\].values\[1\]: timestamp 0.000 is not after the previous sample's 0.000",
        id="repeated-timestamp",
    ),
    pytest.param(
        _one([[0, "1"], [60, "1"], [240, "1"]]),
        {},
        r"data.result\[0\].values\[2\]: 2 steps of 60 s missing before 240.000 \(the series had no value there\); "
        r"fill them in the query, e.g. \(QUERY\) or vector\(0\)",
        id="gap",
    ),
    pytest.param(
        _one([[0, "1"], [60, "1"], [150, "1"]]),
        {},
        r"data.result\[0\].values\[2\]: timestamp 150.000 is not on the 60 s step",
        id="off-step",
    ),
    pytest.param(
        _one([[0, "1"], ["60", "1"]]),
        {},
        r"data.result\[0\].values\[1\]: timestamp '60' is not a Unix time in seconds",
        id="timestamp-text",
    ),
    pytest.param(
        _one([[0, "1", 3]]), {}, r"data.result\[0\].values\[0\]: expected \[unix_time, \"value\"\]", id="triple"
    ),
    pytest.param(
        {
            "status": "success",
            "data": {"resultType": "matrix", "result": [{"metric": {}, "histograms": [[0, {"count": "1"}]]}]},
        },
        {},
        r"data.result\[0\]: holds native histograms, not float samples",
        id="histograms",
    ),
    pytest.param('{"status": "success", "data": ', {}, r"not valid JSON \(Expecting value at line 1", id="truncated"),
]


@pytest.mark.parametrize(("document", "options", "message"), BAD_EXPORTS)
def test_bad_exports_name_file_and_key(tmp_path, document, options, message):
    path = _export(tmp_path, document)
    with pytest.raises(PlannerInputError, match=message) as info:
        read_range_query(path, **options)
    assert "\n" not in str(info.value)
    if "series '" not in str(info.value):
        assert str(info.value).startswith(f"{path}: ")


def test_several_series_chosen_by_labels_that_match_two_are_refused(tmp_path):
    document = json.loads(json.dumps(TWO_SERIES))
    for entry in document["data"]["result"]:
        entry["metric"]["model_name"] = "chat"
    path = _export(tmp_path, document)
    with pytest.raises(PlannerInputError, match=r"2 series \(0, 1\) have the labels model_name=chat"):
        read_range_query(path, series="model_name=chat")
    assert read_range_query(path, series="model_name=chat,pod=b").rate_rps.tolist() == [2.0, 2.0]
