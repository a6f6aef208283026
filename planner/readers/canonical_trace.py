"""Read the canonical request trace: a CSV ``arrival_s,input_tokens,output_tokens``, sorted by arrival.

One request per row: arrival time from the start of the trace [s], prompt
tokens, output tokens (at least 1). Extra columns after the three are
ignored; a UTF-8 byte-order mark is accepted. Every problem is a
:class:`~planner.errors.PlannerInputError` naming the file, the row (the
header is row 1) and the column.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np

from planner.errors import PlannerInputError
from planner.simulate.traffic import RequestTrace

__all__ = ["TRACE_COLUMNS", "read_canonical_trace"]

TRACE_COLUMNS = ("arrival_s", "input_tokens", "output_tokens")


def read_canonical_trace(path: str | Path) -> RequestTrace:
    """Read the canonical trace CSV into a :class:`RequestTrace`, naming the row and column of any problem."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise PlannerInputError(f"{path}: not a UTF-8 text file; expected a CSV trace") from None
    reader = csv.reader(text.splitlines())
    header = next(reader, None)
    if header is None:
        raise PlannerInputError(f"{path}: empty file; expected a header {','.join(TRACE_COLUMNS)}")
    names = [h.strip() for h in header]
    if names[:3] != list(TRACE_COLUMNS):
        raise PlannerInputError(f"{path}: header {','.join(names)!r}; expected {','.join(TRACE_COLUMNS)}")
    arrival, inputs, outputs = [], [], []
    for row_number, row in enumerate(reader, start=2):
        if not row or all(not cell.strip() for cell in row):
            continue
        if len(row) < 3:
            raise PlannerInputError(f"{path}: row {row_number}: expected 3 values, got {len(row)}")
        values = []
        for column, cell in zip(TRACE_COLUMNS, row[:3], strict=True):
            try:
                value = float(cell)
            except ValueError:
                raise PlannerInputError(f"{path}: row {row_number}: {column}: not a number: {cell!r}") from None
            if not math.isfinite(value) or value < 0:
                raise PlannerInputError(f"{path}: row {row_number}: {column}: expected a finite number "
                                        f">= 0, got {cell!r}")
            values.append(value)
        if values[2] < 1:
            raise PlannerInputError(f"{path}: row {row_number}: output_tokens: expected at least 1")
        if values[1] != int(values[1]) or values[2] != int(values[2]):
            raise PlannerInputError(f"{path}: row {row_number}: token counts must be whole numbers")
        if arrival and values[0] < arrival[-1]:
            raise PlannerInputError(f"{path}: row {row_number}: arrival_s {values[0]:g} is before the previous "
                                    f"row's {arrival[-1]:g}; the trace must be sorted by arrival")
        arrival.append(values[0])
        inputs.append(int(values[1]))
        outputs.append(int(values[2]))
    if not arrival:
        raise PlannerInputError(f"{path}: the trace has no requests")
    return RequestTrace(np.array(arrival), np.array(inputs, dtype=np.int64), np.array(outputs, dtype=np.int64),
                        str(path))
