"""Compositions a team runs end to end: the plan, the lab, flapping studies, reports."""
