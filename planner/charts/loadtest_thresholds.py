"""Charts for the chapter "From a load test to thresholds"."""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd

from planner.step_time import StepTimeFit

__all__ = ["latency_chart", "latency_long", "step_time_chart", "step_time_points"]

_STEP_TITLES = {
    "concurrency": "Concurrency (requests)",
    "request_rate_rps": "Request rate (requests/s)",
    "mean_concurrency": "Mean requests in flight",
}


def latency_long(steps: pd.DataFrame, step_variable: str, itl_column_prefix: str = "itl") -> pd.DataFrame:
    """Percentiles per step in long form: ``step``, ``metric``, ``percentile``, ``latency_ms``.

    ``itl_column_prefix`` is ``itl`` or ``tpot`` (when the file has no ITL).
    Steps at an infinite rate are left out (they have no place on an axis).
    """
    rows = []
    for metric, prefix in (("TTFT", "ttft"), ("ITL" if itl_column_prefix == "itl" else "TPOT", itl_column_prefix)):
        for stat in ("p50", "p90", "p99"):
            values = steps[f"{prefix}_{stat}_ms"]
            rows.append(pd.DataFrame({
                "step": steps[step_variable].to_numpy(dtype=float),
                "metric": metric,
                "percentile": stat,
                "latency_ms": values.to_numpy(dtype=float),
            }))
    long = pd.concat(rows, ignore_index=True)
    return long[np.isfinite(long["step"]) & np.isfinite(long["latency_ms"])].reset_index(drop=True)


def latency_chart(long: pd.DataFrame, step_variable: str, knee_step: float, ttft_p99_slo_ms: float,
                  itl_p99_slo_ms: float) -> alt.HConcatChart:
    """TTFT and inter-token percentiles against load, with the objectives and the knee marked."""
    panels = []
    for metric, slo in ((long["metric"].iloc[0], ttft_p99_slo_ms), (long["metric"].iloc[-1], itl_p99_slo_ms)):
        data = long[long["metric"] == metric]
        base = alt.Chart(data)
        lines = base.mark_line(point=True).encode(
            x=alt.X("step:Q", title=_STEP_TITLES.get(step_variable, step_variable)),
            y=alt.Y("latency_ms:Q", title=f"{metric} (ms)", scale=alt.Scale(type="log")),
            color=alt.Color("percentile:N", title="Percentile", sort=["p50", "p90", "p99"]),
            tooltip=[alt.Tooltip("step:Q", title="step"), "percentile:N",
                     alt.Tooltip("latency_ms:Q", title="latency (ms)", format=",.1f")],
        )
        slo_rule = alt.Chart(pd.DataFrame({"latency_ms": [slo], "label": [f"p99 objective {slo:g} ms"]})).mark_rule(
            color="firebrick", strokeDash=[6, 3]).encode(y="latency_ms:Q", tooltip=["label:N"])
        knee_rule = alt.Chart(pd.DataFrame({"step": [knee_step], "label": [f"knee {knee_step:g}"]})).mark_rule(
            color="black").encode(x="step:Q", tooltip=["label:N"])
        panels.append(alt.layer(lines, slo_rule, knee_rule).properties(width=300, height=240, title=metric))
    return alt.hconcat(*panels).properties(title="Latency percentiles against load")


def step_time_points(batch, measured_ms, fit: StepTimeFit) -> pd.DataFrame:
    """Measured and fitted step times per batch size, long form: ``batch``, ``source``, ``step_ms``."""
    batch = np.asarray(batch, dtype=float)
    measured = np.asarray(measured_ms, dtype=float)
    keep = np.isfinite(batch) & np.isfinite(measured)
    return pd.concat([
        pd.DataFrame({"batch": batch[keep], "source": "measured", "step_ms": measured[keep]}),
        pd.DataFrame({"batch": batch[keep], "source": "fitted a + b x batch", "step_ms": fit.predict_ms(batch[keep])}),
    ], ignore_index=True)


def step_time_chart(points: pd.DataFrame, title: str) -> alt.LayerChart:
    """Measured step times (points) and the fitted line."""
    base = alt.Chart(points).encode(
        x=alt.X("batch:Q", title="Batch (mean requests in flight)"),
        y=alt.Y("step_ms:Q", title="Step time (ms)"),
        tooltip=["source:N", alt.Tooltip("batch:Q", format=",.1f"), alt.Tooltip("step_ms:Q", format=",.2f")],
    )
    measured = base.transform_filter(alt.datum.source == "measured").mark_point(filled=True, size=60)
    fitted = base.transform_filter(alt.datum.source != "measured").mark_line(color="gray")
    return alt.layer(fitted, measured).properties(width=420, height=240, title=title)
