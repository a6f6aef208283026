"""The backlog and GPU-utilization explorers open on the page's inputs and react to their sliders."""

from planner.explorers.backlog import backlog_explorer
from planner.explorers.gpu_utilization import gpu_utilization_explorer


def test_backlog_explorer_opens_on_the_inputs_and_follows_the_cold_start():
    box = backlog_explorer()
    summary = box.children[-1]
    assert "reaction time <b>105 s</b>" in summary.value and "<b>4,095</b>" in summary.value
    box.children[0].value = 0.0
    assert "reaction time <b>45 s</b>" in summary.value and "<b>1,755</b>" in summary.value


def test_gpu_explorer_flips_from_max_to_static_at_a_high_target():
    box = gpu_utilization_explorer()
    summary = box.children[-1]
    assert "holds <b>16</b>" in summary.value
    box.children[0].value = 95.0
    assert "holds <b>4</b>" in summary.value
