"""The ``cost`` module holds the book's one default GPU price.

Every priced run in the book (the lab, the drain replay, flapping, your
plan) uses this price unless its inputs give another, so the same replay
costs the same on every page. The number is illustrative: an on-demand
data-centre GPU-hour. Put your own in FLEET.yaml (``usd_per_gpu_hour``) or
in a chapter's parameters.
"""

from __future__ import annotations

__all__ = ["DEFAULT_USD_PER_GPU_HOUR"]

DEFAULT_USD_PER_GPU_HOUR = 4.0
"""Price of one GPU-hour when no input sets one. [$/GPU-hour]

:class:`planner.simulate.fleet.FleetSpec`'s ``usd_per_gpu_hour`` default must
equal it (``tests/capacity/test_cost.py`` checks it, and every notebook's literal).
"""
