"""The ``traffic`` module holds the request trace every simulator engine replays."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from planner.errors import PlannerInputError


@dataclass(frozen=True)
class RequestTrace:
    """Requests in arrival order.

    Attributes
    ----------
    arrival_s : numpy.ndarray of float
        Arrival time of each request from the start of the trace, sorted. [s]
    input_tokens : numpy.ndarray of int
        Prompt length of each request. [tokens]
    output_tokens : numpy.ndarray of int
        Generated length of each request (at least 1). [tokens]
    source : str
        Where the trace came from (a file, or a scenario's name and seed).
    """

    arrival_s: np.ndarray
    input_tokens: np.ndarray
    output_tokens: np.ndarray
    source: str = ""

    def __post_init__(self) -> None:
        n = len(self.arrival_s)
        if len(self.input_tokens) != n or len(self.output_tokens) != n:
            raise PlannerInputError(
                f"{self.source or 'trace'}: arrival_s, input_tokens and output_tokens must have one "
                f"entry per request, got {n}, {len(self.input_tokens)} and {len(self.output_tokens)}"
            )

    @property
    def duration_s(self) -> float:
        """Time from zero to the last arrival. [s]"""
        return float(self.arrival_s[-1]) if len(self.arrival_s) else 0.0

    def __len__(self) -> int:
        return len(self.arrival_s)
