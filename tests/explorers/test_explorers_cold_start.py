"""The cold-start explorer opens on the page's phases and follows its controls."""

from planner.explorers.cold_start import cold_start_explorer


def test_the_explorer_opens_on_kaito_2325_and_follows_each_phase():
    box = cold_start_explorer(spare_rps=30.0 * (64 / 44 - 1))
    summary = box.children[-1]
    assert "a new node (cluster-autoscaler)</td><td><b>996 s</b></td><td>263</td>" in summary.value
    assert "image not on the node</td><td><b>556 s</b></td><td>0</td>" in summary.value
    assert "image on the node</td><td><b>455 s</b></td><td>0</td>" in summary.value
    box.children[0].value = 0.0  # provision: the node registers at once
    assert "<b>712 s</b>" in summary.value
    box.children[5].value = "karpenter"  # its 1 s batch instead of the 30 s GPU buffer
    assert "a new node (karpenter)</td><td><b>683 s</b>" in summary.value


def test_the_growth_slider_is_in_requests_per_second_per_minute():
    box = cold_start_explorer()
    summary = box.children[-1]
    assert "Growing 1.0 requests/s per minute from 0.0" in summary.value
    # No spare capacity: the queue is half the growth times the time squared, (1/60) / 2 x 996^2.
    assert "<td>8,267</td>" in summary.value
    box.children[6].value = 0.0
    assert "<td>8,267</td>" not in summary.value and "Growing 0.0" in summary.value
