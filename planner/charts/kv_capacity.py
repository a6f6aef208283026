"""Charts for the chapter "How many requests fit": KV capacity by architecture and memory."""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import numpy as np
import pandas as pd

from planner.charts import grid_slider
from planner.kv_cache import (
    GIB_BYTES,
    ModelSpec,
    ServingSpec,
    concurrent_requests,
    kv_bytes_per_token,
    kv_capacity,
)

__all__ = ["architecture_chart", "architecture_grid"]


def architecture_grid(setups: Mapping[str, tuple[ModelSpec, ServingSpec]], memories_gib,
                      tokens_per_request: float) -> pd.DataFrame:
    """KV capacity of several model set-ups at each amount of available KV memory.

    Parameters
    ----------
    setups : mapping of str to (ModelSpec, ServingSpec)
        A label per set-up (architecture, KV dtype) and how it is served.
    memories_gib : array_like
        Available KV memory per GPU to evaluate. [GiB]
    tokens_per_request : float
        Mean prompt + output tokens of a request. [tokens]

    Returns
    -------
    pandas.DataFrame
        Columns ``setup``, ``memory_gib``, ``bytes_per_token``, ``kv_tokens``,
        ``max_concurrency``, ``concurrent_requests``; one row per set-up and memory.
    """
    rows = []
    for label, (model, serving) in setups.items():
        per_token = kv_bytes_per_token(model, serving)
        for memory_gib in np.asarray(memories_gib, dtype=float):
            capacity = kv_capacity(model, serving, memory_gib * GIB_BYTES)
            rows.append({
                "setup": label,
                "memory_gib": float(memory_gib),
                "bytes_per_token": per_token,
                "kv_tokens": capacity.kv_tokens,
                "max_concurrency": capacity.max_concurrency,
                "concurrent_requests": concurrent_requests(
                    model, serving, memory_gib * GIB_BYTES, tokens_per_request),
            })
    return pd.DataFrame(rows)


def architecture_chart(grid: pd.DataFrame, initial_memory_gib: float,
                       tokens_per_request: float) -> alt.Chart:
    """Requests of a mean length each set-up holds, at a memory chosen with a slider.

    The slider only selects rows of ``grid``, which the planner computed.
    """
    memory, _ = grid_slider("memory", grid["memory_gib"], initial_memory_gib,
                            "Available KV memory per GPU (GiB) ")
    return alt.Chart(grid).transform_filter(alt.datum.memory_gib == memory).mark_bar().encode(
        x=alt.X("concurrent_requests:Q",
                title=f"Requests of {tokens_per_request:,.0f} tokens held at once"),
        y=alt.Y("setup:N", title=None, sort="-x"),
        color=alt.Color("setup:N", legend=None),
        tooltip=[
            alt.Tooltip("setup:N", title="set-up"),
            alt.Tooltip("bytes_per_token:Q", title="bytes/token/GPU", format=","),
            alt.Tooltip("kv_tokens:Q", title="GPU KV cache size (tokens)", format=","),
            alt.Tooltip("max_concurrency:Q", title="max concurrency (vLLM)", format=".2f"),
            alt.Tooltip("concurrent_requests:Q", title="requests", format=",.0f"),
        ],
    ).add_params(memory).properties(
        width=520, height=220, title="Same memory, different architectures")
