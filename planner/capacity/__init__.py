"""What one replica holds and serves: KV cache, weights, step time, Little's law, headroom, the knee."""
