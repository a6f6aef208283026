"""The ``release`` module names the one vLLM release the planner and the book follow by default.

Every default that depends on vLLM's version (the KV sizing rule of
:mod:`planner.capacity.kv_cache`, the metric names of :mod:`planner.vllm.metric_versions`,
the book's ``vllm_version`` parameters) reads :data:`CURRENT_VLLM_VERSION`,
so a new release is adopted in one place. It is the newest release whose
source the rules were read from; the metric history runs up to it too.
"""

from __future__ import annotations

__all__ = ["CURRENT_VLLM_VERSION"]

# Newest vLLM release on PyPI when the sizing rules and metric history were last checked.
CURRENT_VLLM_VERSION = "0.34.0"
