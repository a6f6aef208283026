"""The flapping chapter's fixed-point chart: one panel per signal, answers drawn as steps."""

import pandas as pd

from planner.charts.flapping import fixed_point_chart, recommendation_table

FRAME = pd.DataFrame(
    {
        "signal": ["waiting"] * 3 + ["kv sum"] * 3 + ["kv avg"] * 3,
        "replicas": [1, 2, 3] * 3,
        "desired_replicas": [3, 1, 1, 2, 2, 2, 2, 1, 1],
        "query_value": [12.0, 0.0, 0.0, 0.9, 0.92, 0.91, 0.9, 0.46, 0.3],
    }
)


def test_each_signal_has_its_own_panel_so_lines_that_agree_do_not_hide_each_other():
    spec = fixed_point_chart(FRAME).to_dict()
    assert spec["facet"]["field"] == "signal" and spec["columns"] == 3
    assert spec["facet"]["sort"] == ["waiting", "kv sum", "kv avg"]  # the order the page gives


def test_answers_are_steps_one_replica_wide_not_lines_between_counts():
    spec = fixed_point_chart(FRAME).to_dict()
    lines = [
        layer for layer in spec["spec"]["layer"] if layer["mark"]["type"] == "line" and layer["mark"].get("interpolate")
    ]
    assert [line["mark"]["interpolate"] for line in lines] == ["step-after"]
    rows = pd.DataFrame(spec["datasets"][spec["data"]["name"]])
    waiting_steps = rows[(rows["part"] == "step") & (rows["signal"] == "waiting")].sort_values("x")
    # Each answer holds from n - 0.5 to n + 0.5: the jump from 3 to 1 is at 1.5, not a slope from 1 to 2.
    assert waiting_steps["x"].tolist() == [0.5, 1.5, 2.5, 3.5]
    assert waiting_steps["y"].tolist() == [3, 1, 1, 1]


def test_only_the_fixed_point_is_ringed():
    spec = fixed_point_chart(FRAME).to_dict()
    rows = pd.DataFrame(spec["datasets"][spec["data"]["name"]])
    fixed = rows[(rows["part"] == "answer") & (rows["fixed"] == True)]  # noqa: E712
    assert fixed[["signal", "replicas"]].values.tolist() == [["kv sum", 2]]
    assert any(
        "datum.fixed" in t.get("filter", "") for layer in spec["spec"]["layer"] for t in layer.get("transform", [])
    )


def test_the_recommendation_table_reads_in_words():
    curves = {signal: FRAME[FRAME["signal"] == signal].drop(columns="signal") for signal in FRAME["signal"].unique()}
    table = recommendation_table(curves)
    assert table.index.names == ["design", "replicas running"]
    assert list(table.columns) == ["query value", "replicas asked for"]
    assert table.loc[("kv sum", 2), "replicas asked for"] == 2
