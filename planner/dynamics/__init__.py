"""How a fleet moves in time: KV ramps, HPA ramps, GPU utilization, backlog in replica queues,
grace periods and drains.
"""
