"""Read a Mooncake request trace (JSON Lines) into a :class:`~planner.simulate.traffic.RequestTrace`.

The traces released with the FAST 2025 paper "Mooncake: A KVCache-centric
Disaggregated Architecture for LLM Serving" (repository kvcache-ai/Mooncake,
``FAST25-release/traces/``) hold one JSON object a line::

    {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0, 1, 2, 3]}

``timestamp``
    Arrival, milliseconds from the trace's start (kept as it is, divided by 1000: the
    first request arrives at its own timestamp, 0 in the published files).
``input_length``, ``output_length``
    Prompt and generated tokens (``output_length`` at least 1: the engines
    replay a generation of at least one token).
``hash_ids``
    The prompt's KV blocks, one hash per 512-token block (the last may be
    partial); equal ids at the same position are a shared prefix. Kept as
    :class:`~planner.simulate.traffic.PromptBlocks` for prefix-cache work.

Other keys on a line are ignored. Blank lines are skipped. Every problem
raises :class:`~planner.errors.PlannerInputError` naming the file, the line
(1-based, counting every line of the file) and the key.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from planner.errors import PlannerInputError
from planner.simulate.traffic import PromptBlocks, RequestTrace

__all__ = ["MOONCAKE_BLOCK_TOKENS", "MOONCAKE_KEYS", "read_mooncake_trace"]

MOONCAKE_KEYS = ("timestamp", "input_length", "output_length", "hash_ids")
MOONCAKE_BLOCK_TOKENS = 512
"""Prompt tokens per ``hash_ids`` entry in the Mooncake release. [tokens]"""

_EXPECTED = (
    'expected one JSON object a line like {"timestamp": 0, "input_length": 6758, "output_length": 500, "hash_ids": [0]}'
)


def read_mooncake_trace(path: str | Path) -> RequestTrace:
    """Read a Mooncake JSON Lines trace.

    Returns
    -------
    RequestTrace
        Arrivals ``timestamp / 1000`` [s], int64 token counts, and the prompts' block hashes
        (``prompt_blocks``, 512 tokens a block).

    Raises
    ------
    PlannerInputError
        Missing or empty file, a line that is not a JSON object, a missing key,
        a timestamp that is not a number >= 0 or goes back in time, a token count
        that is not a whole number (``output_length`` >= 1, ``input_length`` >= 0),
        ``hash_ids`` that is not a list of whole numbers >= 0.
    """
    path = Path(path)
    if not path.is_file():
        raise PlannerInputError(f"{path}: no such file")
    timestamp_ms: list[float] = []
    input_tokens: list[int] = []
    output_tokens: list[int] = []
    block_ids: list[int] = []
    block_counts: list[int] = []
    previous_line = 0
    try:
        with path.open(encoding="utf-8-sig") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                record = _record(path, number, line)
                when = _number(path, number, record, "timestamp", "a time in milliseconds >= 0")
                if timestamp_ms and when < timestamp_ms[-1]:
                    raise PlannerInputError(
                        f"{path}: line {number}: timestamp {record['timestamp']!r} goes back in time "
                        f"(before line {previous_line}'s {_time_text(timestamp_ms[-1])}); "
                        "expected lines sorted by arrival"
                    )
                timestamp_ms.append(when)
                input_tokens.append(_whole(path, number, record, "input_length", minimum=0))
                output_tokens.append(_whole(path, number, record, "output_length", minimum=1))
                ids = _block_ids(path, number, record["hash_ids"])
                block_ids.extend(ids)
                block_counts.append(len(ids))
                previous_line = number
    except UnicodeDecodeError:
        raise PlannerInputError(f"{path}: not a UTF-8 text file; {_EXPECTED}") from None
    if not timestamp_ms:
        raise PlannerInputError(f"{path}: no requests (an empty trace); {_EXPECTED}")
    offsets = np.zeros(len(block_counts) + 1, dtype=np.int64)
    np.cumsum(block_counts, out=offsets[1:])
    blocks = PromptBlocks(
        np.asarray(block_ids, dtype=np.int64),
        offsets,
        np.arange(len(block_counts), dtype=np.int64),
        MOONCAKE_BLOCK_TOKENS,
    )
    return RequestTrace(
        np.asarray(timestamp_ms, dtype=float) / 1000.0,
        np.asarray(input_tokens, dtype=np.int64),
        np.asarray(output_tokens, dtype=np.int64),
        str(path),
        blocks,
    )


def _time_text(value: float) -> str:
    return f"{value:.0f}" if value == int(value) else f"{value!r}"


def _record(path: Path, number: int, line: str) -> dict:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise PlannerInputError(
            f"{path}: line {number}: not valid JSON ({error.msg} at column {error.colno}); {_EXPECTED}"
        ) from None
    if not isinstance(record, dict):
        raise PlannerInputError(f"{path}: line {number}: a JSON {type(record).__name__}, not an object; {_EXPECTED}")
    for key in MOONCAKE_KEYS:
        if key not in record:
            raise PlannerInputError(
                f"{path}: line {number}: missing key {key!r} (a Mooncake trace line has {', '.join(MOONCAKE_KEYS)})"
            )
    return record


def _number(path: Path, number: int, record: dict, key: str, expected: str) -> float:
    value = record[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise PlannerInputError(f"{path}: line {number}: {key} {value!r} is not {expected}")
    return float(value)


def _whole(path: Path, number: int, record: dict, key: str, *, minimum: int) -> int:
    value = record[key]
    ok = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    if not ok or value != int(value) or value < minimum:
        raise PlannerInputError(f"{path}: line {number}: {key} {value!r} is not a whole number of tokens >= {minimum}")
    return int(value)


def _block_ids(path: Path, number: int, value) -> list[int]:
    if not isinstance(value, list):
        raise PlannerInputError(
            f"{path}: line {number}: hash_ids {_shown(value)} is not a list of block hashes (whole numbers >= 0)"
        )
    for position, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < 2**63:
            raise PlannerInputError(
                f"{path}: line {number}: hash_ids[{position}] {item!r} is not a block hash "
                "(a whole number from 0 to 2**63 - 1)"
            )
    return value


def _shown(value) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."
