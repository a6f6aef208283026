"""Charts for the chapter "How many requests fit in the KV cache": KV capacity by architecture and memory."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import altair as alt
import numpy as np
import pandas as pd

from planner.capacity.kv_cache import (
    GIB_BYTES,
    ModelSpec,
    ServingSpec,
    concurrent_requests,
    kv_bytes_per_token,
    kv_capacity,
)
from planner.capacity.prefix_cache import kv_with_shared_prefix, shared_prefix_tokens
from planner.charts import grid_slider

__all__ = [
    "REFERENCE_SETUPS",
    "architecture_chart",
    "architecture_grid",
    "comparison_setups",
    "comparison_table",
    "geometry_text",
    "prefix_sharing_chart",
    "prefix_sharing_grid",
    "rows_at_memory",
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

_TABLE_COLUMNS = {
    "setup": "set-up",
    "bytes_per_token": "bytes/token/GPU",
    "kv_tokens": "GPU KV cache size (tokens)",
    "tokens_over_length": "tokens ÷ length",
    "concurrent_requests": "requests held",
}


def comparison_setups(
    label: str, model: ModelSpec, serving: ServingSpec, references: Mapping[str, ModelSpec]
) -> dict[str, tuple[ModelSpec, ServingSpec]]:
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
        setups[name] = (
            references[stem],
            ServingSpec(
                kv_cache_dtype=dtype,
                max_model_len=serving.max_model_len or model.max_position_embeddings,
                max_num_batched_tokens=serving.max_num_batched_tokens,
                vllm_version=serving.vllm_version,
            ),
        )
    return setups


def comparison_table(grid: pd.DataFrame, memory_gib: float):
    """The grid's rows at the memory nearest ``memory_gib``, as a table without row numbers.

    Returns
    -------
    pandas.io.formats.style.Styler
        Set-up, bytes per token per GPU, tokens and requests held, with the
        DataFrame index hidden.
    """
    rows = rows_at_memory(grid, memory_gib)[list(_TABLE_COLUMNS)].rename(columns=_TABLE_COLUMNS)
    return rows.style.hide(axis="index").format(
        {
            "bytes/token/GPU": "{:,}",
            "GPU KV cache size (tokens)": "{:,}",
            "tokens ÷ length": "{:,.1f}",
            "requests held": "{:,.1f}",
        }
    )


def rows_at_memory(grid: pd.DataFrame, memory_gib: float) -> pd.DataFrame:
    """The rows of :func:`architecture_grid` at the grid memory nearest ``memory_gib``, indexed by set-up."""
    memories = np.sort(grid["memory_gib"].unique())
    nearest = memories[np.argmin(np.abs(memories - memory_gib))]
    return grid.loc[grid["memory_gib"] == nearest].set_index("setup", drop=False)


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


def architecture_grid(
    setups: Mapping[str, tuple[ModelSpec, ServingSpec]], memories_gib, tokens_per_request: float
) -> pd.DataFrame:
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
        ``max_concurrency``, ``tokens_over_length`` (the printed tokens divided
        by the request length, the usual shortcut) and ``concurrent_requests``
        (what the planner counts, group by group); one row per set-up and memory.
    """
    rows = []
    for label, (model, serving) in setups.items():
        per_token = kv_bytes_per_token(model, serving)
        for memory_gib in np.asarray(memories_gib, dtype=float):
            capacity = kv_capacity(model, serving, memory_gib * GIB_BYTES)
            rows.append(
                {
                    "setup": label,
                    "memory_gib": float(memory_gib),
                    "bytes_per_token": per_token,
                    "kv_tokens": capacity.kv_tokens,
                    "max_concurrency": capacity.max_concurrency,
                    "tokens_over_length": capacity.kv_tokens / tokens_per_request,
                    "concurrent_requests": concurrent_requests(
                        model, serving, memory_gib * GIB_BYTES, tokens_per_request
                    ),
                }
            )
    return pd.DataFrame(rows)


def architecture_chart(grid: pd.DataFrame, initial_memory_gib: float, tokens_per_request: float) -> alt.Chart:
    """Requests of a mean length each set-up holds, at a memory chosen with a slider.

    The slider only selects rows of ``grid``, which the planner computed.
    """
    memory, _ = grid_slider("memory", grid["memory_gib"], initial_memory_gib, "Available KV memory per GPU (GiB) ")
    return (
        alt.Chart(grid)
        .transform_filter(alt.datum.memory_gib == memory)
        .mark_bar()
        .encode(
            x=alt.X("concurrent_requests:Q", title=f"Requests of {tokens_per_request:,.0f} tokens held at once"),
            y=alt.Y("setup:N", title=None, sort="-x", axis=alt.Axis(labelLimit=220)),
            color=alt.Color("setup:N", legend=None),
            tooltip=[
                alt.Tooltip("setup:N", title="set-up"),
                alt.Tooltip("bytes_per_token:Q", title="bytes/token/GPU", format=","),
                alt.Tooltip("kv_tokens:Q", title="GPU KV cache size (tokens)", format=","),
                alt.Tooltip("max_concurrency:Q", title="max concurrency (vLLM)", format=".2f"),
                alt.Tooltip("concurrent_requests:Q", title="requests", format=",.0f"),
            ],
        )
        .add_params(memory)
        .properties(width=380, height=240, title="Same memory, different architectures")
    )


PREFIX_CASES = ("hits on prefixes held by requests in flight", "hits on prefixes of finished requests")


def prefix_sharing_grid(kv_tokens: float, tokens_per_request: float, prompt_tokens: float, hit_fracs) -> pd.DataFrame:
    """Requests held at once against the prefix-cache hit fraction, at both ends of what hits can mean.

    Parameters
    ----------
    kv_tokens : float
        Tokens the cache holds. [tokens]
    tokens_per_request : float
        Mean prompt plus output tokens. [tokens]
    prompt_tokens : float
        Mean prompt tokens, the part a hit fraction refers to. [tokens]
    hit_fracs : array_like
        Hit fractions to evaluate, each in [0, 1). [fraction]

    Returns
    -------
    pandas.DataFrame
        Columns ``hit_frac``, ``case`` (one of :data:`PREFIX_CASES`),
        ``requests`` and ``kv_tokens_per_request``: every hit on blocks a
        request in flight holds (the most sharing), or on blocks a finished
        request left (no sharing: the blocks become the new request's own).
    """
    rows = []
    for hit_frac in np.asarray(hit_fracs, dtype=float):
        sharing = kv_with_shared_prefix(
            kv_tokens, tokens_per_request, shared_prefix_tokens(prompt_tokens, prefix_cache_hit_frac=hit_frac)
        )
        rows.append(
            {
                "hit_frac": float(hit_frac),
                "case": PREFIX_CASES[0],
                "requests": sharing.requests_shared,
                "kv_tokens_per_request": sharing.kv_tokens_per_request,
            }
        )
        rows.append(
            {
                "hit_frac": float(hit_frac),
                "case": PREFIX_CASES[1],
                "requests": sharing.requests_unshared,
                "kv_tokens_per_request": sharing.tokens_per_request,
            }
        )
    return pd.DataFrame(rows)


def prefix_sharing_chart(grid: pd.DataFrame, prefix_cache_hit_frac: float) -> alt.LayerChart:
    """Requests held at once against the hit fraction, the two readings of a hit, and the page's hit fraction."""
    color = alt.Color(
        "case:N",
        title=None,
        sort=list(PREFIX_CASES),
        legend=alt.Legend(orient="bottom", direction="vertical", labelLimit=320),
    )
    lines = (
        alt.Chart(grid)
        .mark_line()
        .encode(
            x=alt.X("hit_frac:Q", title="Prefix-cache hit fraction (hits / queries)", axis=alt.Axis(format="%")),
            y=alt.Y("requests:Q", title="Requests held at once"),
            color=color,
            strokeDash=alt.StrokeDash("case:N", sort=list(PREFIX_CASES), legend=None),
            tooltip=[
                alt.Tooltip("hit_frac:Q", title="hit fraction", format=".0%"),
                alt.Tooltip("case:N", title="case"),
                alt.Tooltip("requests:Q", title="requests", format=",.0f"),
                alt.Tooltip("kv_tokens_per_request:Q", title="KV tokens per request", format=",.0f"),
            ],
        )
    )
    marker = (
        alt.Chart(pd.DataFrame({"hit_frac": [prefix_cache_hit_frac]}))
        .mark_rule(color="gray")
        .encode(x="hit_frac:Q", tooltip=[alt.Tooltip("hit_frac:Q", title="this page's hit fraction", format=".1%")])
    )
    return alt.LayerChart(layer=[lines, marker]).properties(
        width=380, height=240, title="Requests held as prompts share more of their prefix"
    )
