"""Charts for the chapter "How many requests fit in the KV cache": KV capacity by architecture and memory."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

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

__all__ = [
    "REFERENCE_SETUPS",
    "architecture_chart",
    "architecture_grid",
    "comparison_setups",
    "comparison_table",
    "geometry_text",
]

# The bundled configs the comparison sets beside the user's model: label, config
# stem (see planner.readers.model_config.read_bundled_model_config), KV dtype.
REFERENCE_SETUPS: tuple[tuple[str, str, str], ...] = (
    ("GQA (Llama 3.1 8B)", "llama-3.1-8b-instruct", "auto"),
    ("GQA + fp8 KV (Llama 3.1 8B)", "llama-3.1-8b-instruct", "fp8"),
    ("MLA (DeepSeek-V2-Lite)", "deepseek-v2-lite", "auto"),
    ("Sliding 1:1 (gpt-oss-20b)", "gpt-oss-20b", "auto"),
    ("Sliding 5:1 (Gemma 3 27B)", "gemma-3-27b-it", "auto"),
)

_TABLE_COLUMNS = {"setup": "set-up", "bytes_per_token": "bytes/token/GPU",
                  "kv_tokens": "GPU KV cache size (tokens)",
                  "concurrent_requests": "requests held"}


def comparison_setups(label: str, model: ModelSpec, serving: ServingSpec,
                      references: Mapping[str, ModelSpec]) -> dict[str, tuple[ModelSpec, ServingSpec]]:
    """The page's model (as served, and with an fp8 cache) beside the reference architectures.

    Parameters
    ----------
    label : str
        The page's model name.
    model, serving : ModelSpec, ServingSpec
        The page's model and settings.
    references : mapping of str to ModelSpec
        The bundled configs by stem (see :data:`REFERENCE_SETUPS`); each is
        served at one GPU with the page's max length, budget and vLLM release.

    Returns
    -------
    dict of str to (ModelSpec, ServingSpec)
    """
    setups = {f"This model ({label})": (model, serving)}
    if serving.kv_cache_dtype != "fp8":
        setups["This model, fp8 KV"] = (model, replace(serving, kv_cache_dtype="fp8"))
    for name, stem, dtype in REFERENCE_SETUPS:
        setups[name] = (references[stem], ServingSpec(
            kv_cache_dtype=dtype, max_model_len=serving.max_model_len or model.max_position_embeddings,
            max_num_batched_tokens=serving.max_num_batched_tokens,
            vllm_version=serving.vllm_version))
    return setups


def comparison_table(grid: pd.DataFrame, memory_gib: float):
    """The grid's rows at the memory nearest ``memory_gib``, as a table without row numbers.

    Returns
    -------
    pandas.io.formats.style.Styler
        Set-up, bytes per token per GPU, tokens and requests held, with the
        DataFrame index hidden.
    """
    memories = np.sort(grid["memory_gib"].unique())
    nearest = memories[np.argmin(np.abs(memories - memory_gib))]
    rows = grid.loc[grid["memory_gib"] == nearest, list(_TABLE_COLUMNS)].rename(
        columns=_TABLE_COLUMNS)
    return rows.style.hide(axis="index").format(
        {"bytes/token/GPU": "{:,}", "GPU KV cache size (tokens)": "{:,}",
         "requests held": "{:,.1f}"})


def geometry_text(model: ModelSpec) -> str:
    """The model's attention geometry in words, for the page's prose."""
    if model.use_mla:
        kind = f"one latent vector of {model.head_dim} values per layer (MLA)"
    else:
        kind = f"{model.num_kv_heads} KV heads of {model.head_dim}"
    text = f"{model.num_layers} layers, {kind}"
    sliding = sum(1 for k in model.kinds if k == "sliding")
    if sliding:
        text += f"; {sliding} layers keep a {model.sliding_window:,}-token window"
    return text


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
        y=alt.Y("setup:N", title=None, sort="-x", axis=alt.Axis(labelLimit=220)),
        color=alt.Color("setup:N", legend=None),
        tooltip=[
            alt.Tooltip("setup:N", title="set-up"),
            alt.Tooltip("bytes_per_token:Q", title="bytes/token/GPU", format=","),
            alt.Tooltip("kv_tokens:Q", title="GPU KV cache size (tokens)", format=","),
            alt.Tooltip("max_concurrency:Q", title="max concurrency (vLLM)", format=".2f"),
            alt.Tooltip("concurrent_requests:Q", title="requests", format=",.0f"),
        ],
    ).add_params(memory).properties(
        width=380, height=240, title="Same memory, different architectures")
