"""Replay traffic through a model of a vLLM fleet driven by the planner's own HPA/KEDA port.

The modules follow the data, top to bottom: ``traffic`` (requests in),
``replica`` and ``fleet`` (vLLM continuous batching, cold starts, drain),
``metrics`` (what Prometheus would scrape and the queries return),
``control`` (the manifest's HPA or ScaledObject, decided exactly by
:mod:`planner.hpa_controller` and :mod:`planner.keda`) and ``outcome``
(attainment, cost, scale events). ``reference`` is the per-tick engine that
strings them together and is the specification; ``discrete_event`` re-runs
the replica model event by event (SimPy) to measure the tick's
approximation, and ``calibration`` drives one replica as a load-test client
does, to check the model against real sweeps.
"""
