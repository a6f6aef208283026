"""Altair chart functions for the book: each takes a tidy DataFrame and returns a chart.

Sliders that must work in the static book filter grids precomputed by the
planner's maths; no chart re-implements that maths in a Vega expression.
"""

from __future__ import annotations

import altair as alt
import numpy as np

__all__ = ["grid_slider"]


def grid_slider(name: str, values, initial: float, label: str, *, default_step: float = 1.0):
    """A range slider over the distinct values of a precomputed grid column.

    Parameters
    ----------
    name : str
        The Vega-Lite parameter name the chart's filters refer to.
    values : array_like
        The grid column the slider walks (its distinct values, evenly spaced).
    initial : float
        Where the slider starts; should be one of ``values``.
    label : str
        Text shown beside the slider.
    default_step : float, optional
        Step when the column holds a single value.

    Returns
    -------
    tuple of (altair.Parameter, float)
        The parameter, and its step (filters that compare floats match
        within half a step, since the browser computes slider positions in
        floating point).
    """
    positions = np.sort(np.unique(np.asarray(values, dtype=float)))
    # Rounded so float noise in the grid does not make the slider step odd.
    step = float(np.round(np.min(np.diff(positions)), 6)) if positions.size > 1 else float(default_step)
    param = alt.param(
        name=name,
        value=float(initial),
        bind=alt.binding_range(min=float(positions.min()), max=float(positions.max()), step=step, name=label),
    )
    return param, step
