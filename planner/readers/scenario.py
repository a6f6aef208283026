"""Read a traffic scenario from a YAML file (one mapping of :class:`~planner.simulate.scenario.Scenario` fields).

Example::

    kind: launch_spike
    duration_s: 1200
    rate_rps: 30
    spike_at_s: 300      # 30 -> 75 req/s over rise_s (20 s by default)
    mean_output_tokens: 240
"""

from __future__ import annotations

from pathlib import Path

import yaml

from planner.errors import PlannerInputError
from planner.simulate.scenario import Scenario, scenario_from_dict

__all__ = ["read_scenario"]


def read_scenario(path: str | Path) -> Scenario:
    """The scenario in ``path``.

    Raises
    ------
    PlannerInputError
        Missing file, invalid YAML, or a scenario error naming the key.
    """
    path = Path(path)
    if not path.is_file():
        raise PlannerInputError(f"{path}: no such file")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise PlannerInputError(f"{path}: not valid YAML{where}") from None
    if data is None:
        raise PlannerInputError(f"{path}: empty file; expected a scenario mapping with kind, duration_s and rate_rps")
    return scenario_from_dict(data, where=str(path))
