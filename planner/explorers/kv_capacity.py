"""Live explorer for KV capacity: memory, tensor parallelism, KV dtype, request length."""

from __future__ import annotations

from dataclasses import replace

import ipywidgets as widgets

from planner.errors import PlannerInputError
from planner.kv_cache import GIB_BYTES, ModelSpec, ServingSpec, concurrent_requests, kv_capacity


def kv_capacity_explorer(model: ModelSpec, serving: ServingSpec, available_kv_gib: float,
                         tokens_per_request: float) -> widgets.VBox:
    """Sliders for the chapter's inputs and a live summary computed by the planner."""
    memory = widgets.FloatSlider(value=available_kv_gib, min=0.5, max=160, step=0.25,
                                 description="KV GiB/GPU")
    tp = widgets.Dropdown(options=[1, 2, 4, 8], value=serving.tensor_parallel_size,
                          description="TP")
    dtype = widgets.Dropdown(options=["auto", "fp8"], value=serving.kv_cache_dtype
                             if serving.kv_cache_dtype in ("auto", "fp8") else "auto",
                             description="KV dtype")
    length = widgets.FloatSlider(value=tokens_per_request, min=64, max=32768, step=64,
                                 description="tokens/req")
    summary = widgets.HTML()

    def update(_change=None) -> None:
        chosen = replace(serving, tensor_parallel_size=tp.value, kv_cache_dtype=dtype.value)
        try:
            capacity = kv_capacity(model, chosen, memory.value * GIB_BYTES)
            requests = concurrent_requests(model, chosen, memory.value * GIB_BYTES, length.value)
        except PlannerInputError as error:
            summary.value = f"<p>{error}</p>"
            return
        summary.value = (
            f"<p>{capacity.bytes_per_token:,} bytes per token per GPU; GPU KV cache size "
            f"<b>{capacity.kv_tokens:,}</b> tokens; maximum concurrency "
            f"{capacity.max_concurrency:.2f}x at {capacity.max_model_len:,} tokens; "
            f"<b>{requests:,.0f}</b> requests of {length.value:,.0f} tokens.</p>")

    for control in (memory, tp, dtype, length):
        control.observe(update, names="value")
    update()
    return widgets.VBox([memory, tp, dtype, length, summary])
