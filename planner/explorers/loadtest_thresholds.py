"""Live explorer for the knee and the autoscaling targets of one load test."""

from __future__ import annotations

import html
import math

import ipywidgets as widgets
import numpy as np
import pandas as pd

from planner.capacity.knee import knee_finding, thresholds_from_loadtest


def _slider_range_ms(measured_ms: pd.Series, objective_ms: float) -> tuple[float, float]:
    # From under the lightest step's p99 (nothing passes) to over the heaviest (everything passes).
    measured = measured_ms.to_numpy(dtype=float)
    measured = measured[np.isfinite(measured) & (measured > 0)]
    low = min(float(measured.min()), objective_ms) if measured.size else objective_ms
    high = max(float(measured.max()), objective_ms) if measured.size else objective_ms
    return 0.5 * low, 1.5 * high


_LOG_STEP = 0.01  # TTFT slider step in log10 units: about 2.3 % per notch


def _on_log_grid(end_ms: float, objective_ms: float, direction: int) -> float:
    # A slider end a whole number of notches from the objective, so the slider opens exactly on it.
    notches = math.ceil(abs(math.log10(end_ms) - math.log10(objective_ms)) / _LOG_STEP)
    return math.log10(objective_ms) + direction * notches * _LOG_STEP


def loadtest_thresholds_explorer(
    steps: pd.DataFrame,
    ttft_p99_slo_ms: float = 2000.0,
    itl_p99_slo_ms: float = 50.0,
    growth_frac: float = 0.2,
    queue_wait_budget_s: float | None = 5.0,
    kv_margin_frac: float = 0.05,
    interpolate: bool = False,
    mean_output_tokens: float | None = None,
) -> widgets.VBox:
    """Sliders for the objectives and the growth, with the knee and targets recomputed by the planner.

    Parameters
    ----------
    steps : pandas.DataFrame
        The table :func:`planner.readers.loadtest.read_loadtest` returns.
    ttft_p99_slo_ms, itl_p99_slo_ms : float
        Objectives the sliders open at. [ms]
    growth_frac : float
        Expected growth in load during one warmup the sliders open at. [fraction]
    queue_wait_budget_s, kv_margin_frac, interpolate, mean_output_tokens
        Passed to :func:`planner.capacity.knee.thresholds_from_loadtest` unchanged.
    """
    itl_column = "itl_p99_ms" if steps["itl_p99_ms"].notna().all() else "tpot_p99_ms"
    ttft_low, ttft_high = _slider_range_ms(steps["ttft_p99_ms"], ttft_p99_slo_ms)
    itl_low, itl_high = _slider_range_ms(steps[itl_column], itl_p99_slo_ms)
    style = {"description_width": "14em"}
    layout = widgets.Layout(width="36em")
    sliders = {
        # TTFT p99 spans orders of magnitude between a light and an overloaded step.
        "ttft_p99_slo_ms": widgets.FloatLogSlider(
            value=ttft_p99_slo_ms,
            base=10,
            min=_on_log_grid(ttft_low, ttft_p99_slo_ms, -1),
            max=_on_log_grid(ttft_high, ttft_p99_slo_ms, 1),
            step=_LOG_STEP,
            description="TTFT p99 objective (ms)",
            readout_format=",.0f",
            style=style,
            layout=layout,
        ),
        "itl_p99_slo_ms": widgets.FloatSlider(
            value=itl_p99_slo_ms,
            min=math.floor(2 * itl_low) / 2,
            max=math.ceil(2 * itl_high) / 2,
            step=0.5,
            description=f"{'ITL' if itl_column == 'itl_p99_ms' else 'TPOT'} p99 objective (ms)",
            style=style,
            layout=layout,
        ),
        "growth_frac": widgets.FloatSlider(
            value=growth_frac,
            min=0.0,
            max=2.0,
            step=0.05,
            description="growth during a warmup",
            readout_format=".0%",
            style=style,
            layout=layout,
        ),
    }
    summary = widgets.HTML()

    def update(_change=None) -> None:
        values = {name: slider.value for name, slider in sliders.items()}
        result = thresholds_from_loadtest(
            steps,
            **values,
            queue_wait_budget_s=queue_wait_budget_s,
            kv_margin_frac=kv_margin_frac,
            interpolate=interpolate,
            mean_output_tokens=mean_output_tokens,
        )
        finding = html.escape(knee_finding(result, steps))
        if not result.knee.found:
            summary.value = f"<p><b>No knee:</b> {finding}</p>"
            return
        rows = [
            ("knee K", f"{result.knee_concurrency:,.1f}", "requests in flight"),
            ("concurrency target T", f"{result.concurrency_target:,.1f}", "requests in flight"),
            ("KV usage target", f"{result.kv_usage_target_frac:.3f}", "fraction"),
            ("drain rate mu", f"{result.drain_rate_rps:,.2f}", "requests/s"),
            ("queue threshold", f"{result.queue_threshold_requests:,.0f}", "waiting requests"),
        ]
        table = "".join(
            f"<tr><td>{name}</td><td style='text-align:right'>{value}</td><td>{unit}</td></tr>"
            for name, value, unit in rows
        )
        summary.value = (
            f"<p>{finding}</p><table>{table}</table>"
            "<p>NaN: the load test did not measure it, or the sweep is too short for a target.</p>"
        )

    for slider in sliders.values():
        slider.observe(update, names="value")
    update()
    return widgets.VBox([*sliders.values(), summary])
