"""ipywidgets explorers for JupyterLab: sliders that call the planner live.

In the static book they show their first state only (no kernel runs
behind the page); the book's own sliders are altair parameters instead.
"""
