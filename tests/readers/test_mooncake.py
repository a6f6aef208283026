"""Tests for planner.readers.mooncake: the published Mooncake conversation trace, and every bad line."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from planner.errors import PlannerInputError
from planner.readers.mooncake import read_mooncake_trace
from planner.readers.trace import read_trace, trace_format


def test_reads_the_mooncake_conversation_trace(shared_dir):
    path = shared_dir / "traces" / "mooncake_conversation_trace.jsonl"
    assert trace_format(path) == "mooncake"
    trace = read_trace(path)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    # the traces' README: 12,031 requests over one hour, mean prompt 12,035 and answer 343 tokens
    assert len(trace) == len(records) == 12_031
    assert trace.input_tokens.mean() == pytest.approx(12_035, abs=1) and trace.output_tokens.mean() == pytest.approx(
        343, abs=1
    )
    assert trace.duration_s == pytest.approx(3536.999) and trace.arrival_s[0] == 0.0
    np.testing.assert_array_equal(trace.arrival_s, [r["timestamp"] / 1000 for r in records])
    np.testing.assert_array_equal(trace.output_tokens, [r["output_length"] for r in records])
    blocks = trace.prompt_blocks
    assert blocks is not None and blocks.block_tokens == 512 and len(blocks) == len(trace)
    for i in (0, 1, 4, 5000, 12_030):
        assert blocks.of(i).tolist() == records[i]["hash_ids"]
    # one hash per 512 prompt tokens, the last block partial, on every line of the release
    counts = np.diff(blocks.offsets)[blocks.row]
    assert np.array_equal(counts, [math.ceil(r["input_length"] / 512) for r in records])
    assert blocks.of(1)[0] == blocks.of(2)[0] == 0  # a shared first block: the common system prompt
    trace.check()


def _write(tmp_path, lines, name="trace.jsonl"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


GOOD = '{"timestamp": 0, "input_length": 700, "output_length": 5, "hash_ids": [0, 1]}'


def test_blank_lines_are_skipped_and_lines_are_counted_in_the_file(tmp_path):
    path = _write(
        tmp_path,
        [GOOD, "", '{"timestamp": 1500.5, "input_length": 0, "output_length": 1, "hash_ids": [], "extra": "kept out"}'],
    )
    trace = read_mooncake_trace(path)
    assert trace.arrival_s.tolist() == [0.0, 1.5005] and trace.input_tokens.tolist() == [700, 0]
    assert trace.prompt_blocks.of(1).tolist() == [] and trace.source == str(path)
    bad = _write(tmp_path, [GOOD, "", GOOD.replace('"output_length": 5', '"output_length": 0')], "bad.jsonl")
    with pytest.raises(PlannerInputError, match="line 3: output_length 0"):
        read_mooncake_trace(bad)


BAD_LINES = [
    pytest.param(["{not json"], r"line 1: not valid JSON \(Expecting property name", id="not-json"),
    pytest.param([GOOD, "[1, 2]"], r"line 2: a JSON list, not an object", id="not-an-object"),
    pytest.param(
        ['{"timestamp": 0, "input_length": 1, "hash_ids": []}'],
        r"line 1: missing key 'output_length' \(a Mooncake trace line has timestamp, input_length",
        id="missing-key",
    ),
    pytest.param(
        [GOOD.replace('"timestamp": 0', '"timestamp": "0"')],
        r"line 1: timestamp '0' is not a time in milliseconds >= 0",
        id="timestamp-text",
    ),
    pytest.param(
        [GOOD.replace('"timestamp": 0', '"timestamp": -5')],
        r"line 1: timestamp -5 is not a time in milliseconds >= 0",
        id="timestamp-negative",
    ),
    pytest.param(
        [GOOD.replace('"timestamp": 0', '"timestamp": 900'), GOOD],
        r"line 2: timestamp 0 goes back in time \(before line 1's 900\); expected lines sorted by arrival",
        id="unsorted",
    ),
    pytest.param(
        [GOOD.replace('"input_length": 700', '"input_length": 12.5')],
        r"line 1: input_length 12.5 is not a whole number of tokens >= 0",
        id="fractional-input",
    ),
    pytest.param(
        [GOOD.replace('"output_length": 5', '"output_length": 0')],
        r"line 1: output_length 0 is not a whole number of tokens >= 1",
        id="zero-output",
    ),
    pytest.param(
        [GOOD.replace('"output_length": 5', '"output_length": true')],
        r"line 1: output_length True is not a whole number of tokens >= 1",
        id="boolean-output",
    ),
    pytest.param(
        [GOOD.replace('"hash_ids": [0, 1]', '"hash_ids": "0,1"')],
        r"line 1: hash_ids \"0,1\" is not a list of block hashes",
        id="hash-ids-text",
    ),
    pytest.param(
        [GOOD.replace('"hash_ids": [0, 1]', '"hash_ids": [0, -1]')],
        r"line 1: hash_ids\[1\] -1 is not a block hash",
        id="hash-id-negative",
    ),
    pytest.param([], r"no requests \(an empty trace\)", id="empty"),
]


@pytest.mark.parametrize(("lines", "message"), BAD_LINES)
def test_bad_lines_name_file_line_and_key(tmp_path, lines, message):
    path = _write(tmp_path, lines)
    with pytest.raises(PlannerInputError, match=message) as info:
        read_trace(path, file_format="mooncake")
    assert str(info.value).startswith(f"{path}: ") and "\n" not in str(info.value)


def test_binary_and_missing_files(tmp_path):
    binary = tmp_path / "b.jsonl"
    binary.write_bytes(b"\xff\xfe\x00{")
    with pytest.raises(PlannerInputError, match="not a UTF-8 text file"):
        read_mooncake_trace(binary)
    with pytest.raises(PlannerInputError, match="no such file"):
        read_mooncake_trace(tmp_path / "missing.jsonl")
