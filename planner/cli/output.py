"""Shared output helpers for the subcommands: JSON and plain tables."""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path


def print_json(payload: Mapping) -> None:
    """Print one JSON object on stdout; NaN and infinity become null."""
    print(json.dumps(_clean(payload), indent=2, sort_keys=False))


def print_table(rows: Iterable[tuple[str, object]], title: str | None = None, file=None) -> None:
    """Print ``(label, value)`` rows as two aligned columns."""
    file = file or sys.stdout
    rows = [(str(label), _format(value)) for label, value in rows]
    if title:
        print(title, file=file)
    width = max((len(label) for label, _ in rows), default=0)
    for label, value in rows:
        print(f"  {label:<{width}}  {value}", file=file)


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file beside it and a rename.

    A reader never sees half a file, and a failure leaves no partial output.
    """
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8", newline="") as stream:
            stream.write(text)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _format(value: object) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "n/a"
        if value == int(value) and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.4g}" if abs(value) < 1e4 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return _clean(value.item())
    return value
