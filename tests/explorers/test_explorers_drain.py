"""The drain explorer opens on the page's inputs, echoes them, and follows its sliders."""

from planner.explorers.drain import drain_explorer


def test_drain_explorer_echoes_inputs_and_reacts():
    box = drain_explorer(output_length_shape="max")
    summary = box.children[-1]
    assert "Grace 30 s, --shutdown-timeout 0 s, preStop 0 s; 4,096 tokens at 50 ms" in summary.value
    assert "needs <b>204.8 s</b>" in summary.value and "cuts <b>100.0%</b>" in summary.value
    assert "--shutdown-timeout is 0" in summary.value
    box.children[1].value = 226.0  # shutdown timeout
    box.children[0].value = 241.0  # grace period
    assert "Grace 241 s, --shutdown-timeout 226 s" in summary.value
    assert "cuts <b>0.0%</b>" in summary.value and "These settings cut nothing." in summary.value
    box.children[0].value = 30.0
    assert "get <b>30 s</b>" in summary.value and f"cuts <b>{1 - 30 / 204.8:.1%}</b>" in summary.value


def test_recorded_lengths_replace_the_model_and_follow_the_cap():
    box = drain_explorer(
        output_tokens=[100] * 3 + [4000], termination_grace_period_s=300.0, shutdown_timeout_s=5.0, itl_ms=10.0
    )
    summary = box.children[-1]
    assert "(4 recorded lengths)" in summary.value
    # 5 s of drain: only the 4,000-token answer (40 s) outlasts it.
    assert f"cuts <b>{(40 - 5) / (3 * 1 + 40):.1%}</b>" in summary.value
    box.children[4].value = 96  # max tokens: every answer now fits in 0.96 s
    assert "cuts <b>0.0%</b>" in summary.value


def test_explorer_recommends_what_the_chapter_table_does():
    # The chapter plans for a 10 s preStop while the current one is 0: the explorer once said 231 s
    # (planning with the current preStop) where the table said 241 s.
    summary = drain_explorer().children[-1]
    assert "--shutdown-timeout 226 s, preStop 10 s, terminationGracePeriodSeconds 241 s" in summary.value
    box = drain_explorer(planned_pre_stop_s=15.0, margin_frac=0.2)
    assert "with a 15 s preStop and a 20% margin" in box.children[-1].value
