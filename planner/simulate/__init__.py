"""Replay traffic through a model of a vLLM fleet driven by the planner's own HPA/KEDA port.

The modules follow the data, top to bottom: ``traffic`` (requests in),
``replica`` and ``fleet`` (vLLM continuous batching, cold starts, drain),
``metrics`` (what Prometheus would scrape and the queries return),
``control`` (the manifest's HPA or ScaledObject, decided exactly by
:mod:`planner.autoscaler.horizontal` and :mod:`planner.autoscaler.keda`) and ``outcome``
(attainment, cost, scale events). ``reference`` is the per-tick engine that
strings them together and is the specification; ``discrete_event`` re-runs
the replica model event by event (SimPy) to measure the tick's
approximation, and ``calibration`` drives one replica as a load-test client
does, to check the model against real sweeps.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from planner.autoscaler.spec import Autoscaler
    from planner.simulate.fleet import FleetSpec
    from planner.simulate.outcome import Outcome
    from planner.simulate.traffic import RequestTrace

__all__ = ["ENGINES", "simulate"]

ENGINES = ("fast", "reference")
"""``fast`` (compiled, the default) computes exactly what ``reference`` (the per-tick specification) does."""


def simulate(
    trace: RequestTrace,
    autoscaler: Autoscaler,
    fleet_spec: FleetSpec | None = None,
    *,
    engine: str = "fast",
    duration_s: float | None = None,
) -> Outcome:
    """Replay ``trace`` through a fleet scaled by ``autoscaler``: the one entry point to the simulator.

    Parameters
    ----------
    trace : RequestTrace
        The requests, with their arrival times and token counts.
    autoscaler : Autoscaler
        The manifest's HPA or ScaledObject.
    fleet_spec : FleetSpec, optional
        The fleet: replica model, warmup, scrape interval, price. Default :class:`FleetSpec`.
    engine : {"fast", "reference"}
        ``fast`` runs the compiled kernels (or, for autoscalers they do not
        cover, the reference's code in lockstep); ``reference`` runs the
        per-tick engine the fast one is tested against. Both give identical
        outcomes; ``reference`` is for reading and checking, not for speed.
    duration_s : float, optional
        Simulated time; default until the last request has finished. [s]

    Returns
    -------
    Outcome
        Scale events, replica trajectories, time series, per-request latencies, cost.

    Raises
    ------
    PlannerInputError
        An unknown engine name, or an autoscaler or fleet the simulator refuses.

    For many configurations at once, use :func:`planner.simulate.sweep.run_sweep`.
    """
    if engine == "fast":
        from planner.simulate import fast

        return fast.simulate(trace, autoscaler, fleet_spec, duration_s=duration_s)
    if engine == "reference":
        from planner.simulate import reference

        return reference.simulate(trace, autoscaler, fleet_spec, duration_s=duration_s)
    from planner.errors import PlannerInputError

    raise PlannerInputError(f"engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
