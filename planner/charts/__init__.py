"""Altair chart functions for the book: each takes a tidy DataFrame and returns a chart.

Sliders that must work in the static book filter grids precomputed by the
planner's maths; no chart re-implements that maths in a Vega expression.
"""
