"""The ``fast`` engine: the reference engine's model, compiled, for one configuration or a sweep.

It computes exactly what :mod:`planner.simulate.reference` computes (the
differential test in ``tests/test_simulate_fast.py`` holds it to that:
identical scale events and replica trajectories, attainment and cost within
1e-9). Configurations the compiled kernels cover run there; any other runs
through :mod:`planner.simulate.fast.lockstep`, the reference's own code with
its pod sets indexed, so the contract holds for every manifest the simulator
accepts.
"""

from planner.simulate.fast.lockstep import Configuration, simulate, simulate_many

__all__ = ["Configuration", "simulate", "simulate_many"]
