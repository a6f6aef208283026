"""Capacity planning for autoscaling LLM inference.

The maths modules are pure functions over floats and numpy arrays, with units
in their parameter names. Reading files and the command line live at the
edges, in :mod:`planner.readers` and :mod:`planner.cli`.
"""

from planner.errors import PlannerInputError

__all__ = ["PlannerInputError"]
__version__ = "0.1.0"
