"""Facts about vLLM the planner follows: its release, its metric names across versions, PromQL for them."""
