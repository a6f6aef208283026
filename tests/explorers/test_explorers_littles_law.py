"""The Little's law explorer opens on the page's inputs and says where the backlog waits."""

from planner.explorers.littles_law import littles_law_explorer


def test_explorer_gives_the_per_replica_drain_behind_each_router():
    box = littles_law_explorer()
    summary = box.children[-1]
    assert "<b>960</b>" in summary.value  # W14
    # 312 per old replica (320 less the 8 slots each had free); round robin 312 / (4 - 16 / 5) s.
    assert "About 312 wait in each old replica's own queue" in summary.value
    assert "one shared queue 240 s, round robin 390 s, least-loaded 217 s" in summary.value
    box.children[4].value = 10.0  # no step: nothing queues, nothing to drain
    assert "own queue" not in summary.value
