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


def test_backlog_explorer_says_how_each_router_drains_the_per_replica_queues():
    box = backlog_explorer()
    summary = box.children[-1]
    # 447 per old replica; round robin about 447 / (4 - 75 / 23) s, least-loaded about as fast as one queue.
    assert "about 447 in each replica's own queue" in summary.value
    assert "round robin it clears in <b>605 s</b>" in summary.value
    assert "least-loaded gateway in <b>218 s</b>" in summary.value and "in 241 s" in summary.value
    box.children[1].value = 20.0  # a step the fleet absorbs
    assert "queues nothing" in summary.value
