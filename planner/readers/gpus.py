"""Read the GPU memory table (``data/gpus.csv``)."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from planner.errors import PlannerInputError

__all__ = ["GpuMemory", "gpu_memory", "read_gpu_table"]


@dataclass(frozen=True)
class GpuMemory:
    """One GPU's memory: nominal, and as CUDA reports it where a public log shows it. [GiB]"""

    name: str
    memory_gib: float
    reported_gib: float | None

    @property
    def usable_gib(self) -> float:
        """What vLLM multiplies by ``gpu_memory_utilization``: the reported total if known. [GiB]"""
        return self.reported_gib if self.reported_gib is not None else self.memory_gib


def read_gpu_table(path) -> dict[str, GpuMemory]:
    """Read a GPU table with columns ``name``, ``memory_gib`` and optional ``reported_gib``.

    Returns
    -------
    dict
        GPUs by lower-case name.
    """
    path = Path(path)
    try:
        with path.open(newline="", encoding="utf-8") as handle:
            rows = list(csv.DictReader(handle))
    except FileNotFoundError:
        raise PlannerInputError(f"{path}: no such file (the GPU memory table)") from None
    table = {}
    for number, row in enumerate(rows, start=2):
        name = (row.get("name") or "").strip()
        if not name:
            raise PlannerInputError(f"{path}, row {number}: column 'name' is empty")
        values: dict[str, float | None] = {}
        for column in ("memory_gib", "reported_gib"):
            text = (row.get(column) or "").strip()
            if not text:
                values[column] = None
                continue
            try:
                value = float(text)
            except ValueError:
                raise PlannerInputError(
                    f"{path}, row {number}: column '{column}' must be a number, got {text!r}"
                ) from None
            if not value > 0:
                raise PlannerInputError(f"{path}, row {number}: column '{column}' must be > 0, got {text!r}")
            values[column] = value
        memory_gib = values["memory_gib"]
        if memory_gib is None:
            raise PlannerInputError(f"{path}, row {number}: column 'memory_gib' is empty")
        table[name.lower()] = GpuMemory(name, memory_gib, values["reported_gib"])
    return table


def gpu_memory(name: str, path) -> GpuMemory:
    """One GPU from the table, by name (case-insensitive); a clear error for unknown names."""
    table = read_gpu_table(path)
    try:
        return table[name.strip().lower()]
    except KeyError:
        known = ", ".join(g.name for g in table.values())
        raise PlannerInputError(f"unknown GPU {name!r}; {path} lists: {known}") from None
