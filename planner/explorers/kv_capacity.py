"""Live explorer for KV capacity: memory, tensor parallelism, KV dtype, request length."""

from __future__ import annotations

from dataclasses import replace

import ipywidgets as widgets

from planner.capacity.kv_cache import GIB_BYTES, concurrent_requests, kv_capacity
from planner.capacity.replica_kv import ReplicaKv
from planner.errors import PlannerInputError

# Fine enough that the page's own inputs (13.76 GiB, 1,000 tokens) are slider positions.
MEMORY_STEP_GIB = 0.01
TOKENS_STEP = 1.0


def kv_capacity_explorer(replica: ReplicaKv) -> widgets.VBox:
    """Controls that open on the page's replica and a live summary computed by the planner.

    The memory slider moves the smallest stage's memory; other pipeline stages
    keep their difference from it, as in the log the page read.
    """
    serving = replica.serving
    start_gib = replica.available_kv_gib
    tokens = replica.tokens_per_request or 1000.0
    offsets = [g - start_gib for g in replica.available_kv_gib_per_stage]
    memory = widgets.FloatSlider(
        value=start_gib,
        min=MEMORY_STEP_GIB,
        max=max(160.0, 2 * start_gib),
        step=MEMORY_STEP_GIB,
        readout_format=".2f",
        description="KV GiB/GPU",
    )
    tp = widgets.Dropdown(
        options=sorted({1, 2, 4, 8, serving.tensor_parallel_size}), value=serving.tensor_parallel_size, description="TP"
    )
    dtype = widgets.Dropdown(
        options=sorted({"auto", "fp8", serving.kv_cache_dtype}), value=serving.kv_cache_dtype, description="KV dtype"
    )
    length = widgets.FloatSlider(
        value=tokens,
        min=TOKENS_STEP,
        max=max(32768.0, tokens),
        step=TOKENS_STEP,
        readout_format=",.0f",
        description="tokens/req",
    )
    summary = widgets.HTML()

    def update(_change=None) -> None:
        chosen = replace(serving, tensor_parallel_size=tp.value, kv_cache_dtype=dtype.value)
        if memory.value == start_gib:  # exactly the page's figures, no float round trip
            per_stage = [g * GIB_BYTES for g in replica.available_kv_gib_per_stage]
        else:
            per_stage = [(memory.value + offset) * GIB_BYTES for offset in offsets]
        try:
            capacity = kv_capacity(replica.model, chosen, per_stage)
            requests = concurrent_requests(replica.model, chosen, per_stage, length.value)
        except PlannerInputError as error:
            summary.value = f"<p>{error}</p>"
            return
        summary.value = (
            f"<p>{capacity.bytes_per_token:,} bytes per token per GPU; GPU KV cache size "
            f"<b>{capacity.kv_tokens:,}</b> tokens; maximum concurrency "
            f"{capacity.max_concurrency:.2f}x at {capacity.max_model_len:,} tokens; "
            f"<b>{requests:,.0f}</b> requests of {length.value:,.0f} tokens.</p>"
        )

    for control in (memory, tp, dtype, length):
        control.observe(update, names="value")
    update()
    return widgets.VBox([memory, tp, dtype, length, summary])
