"""Live explorer: what one scale-down cuts, for a grace period, a shutdown timeout and a preStop."""

from __future__ import annotations

import ipywidgets as widgets

from planner.dynamics.drain import empirical_output_lengths, output_lengths, review_drain


def drain_explorer(
    max_output_tokens: int = 4096,
    itl_ms: float = 50.0,
    ttft_ms: float = 0.0,
    output_length_shape: str = "geometric",
    mean_output_tokens: float = 512.0,
    in_flight_requests: float = 40.0,
    termination_grace_period_s: float = 30.0,
    shutdown_timeout_s: float = 0.0,
    pre_stop_s: float = 0.0,
    output_tokens=None,
    planned_pre_stop_s: float = 10.0,
    margin_frac: float = 0.1,
) -> widgets.VBox:
    """Sliders for the settings and the ITL; the summary reruns the planner and echoes them.

    ``output_tokens``, one recorded length per request (e.g. a trace's), replaces the
    ``output_length_shape`` model; the ``max tokens`` slider caps it. The recommendation
    is :func:`planner.dynamics.drain.review_drain`'s, with ``planned_pre_stop_s`` and
    ``margin_frac``, as in the chapter's table.
    """
    sliders = {
        "termination_grace_period_s": widgets.FloatSlider(
            value=termination_grace_period_s, min=1, max=900, step=1, description="grace (s)"
        ),
        "shutdown_timeout_s": widgets.FloatSlider(
            value=shutdown_timeout_s, min=0, max=900, step=1, description="shutdown (s)"
        ),
        "pre_stop_s": widgets.FloatSlider(value=pre_stop_s, min=0, max=120, step=1, description="preStop (s)"),
        "itl_ms": widgets.FloatSlider(value=itl_ms, min=1, max=200, step=1, description="ITL (ms)"),
        "max_output_tokens": widgets.IntSlider(
            value=max_output_tokens, min=16, max=32768, step=16, description="max tokens"
        ),
    }
    summary = widgets.HTML()
    shape_text = output_length_shape if output_tokens is None else f"{len(output_tokens):,} recorded"

    def update(_change=None) -> None:
        v = {name: slider.value for name, slider in sliders.items()}
        if output_tokens is None:
            lengths = output_lengths(v["max_output_tokens"], output_length_shape, mean_output_tokens)
        else:
            lengths = empirical_output_lengths(output_tokens, v["max_output_tokens"])
        review = review_drain(
            lengths,
            max_output_tokens=v["max_output_tokens"],
            itl_ms=v["itl_ms"],
            ttft_ms=ttft_ms,
            in_flight_requests=in_flight_requests,
            termination_grace_period_s=v["termination_grace_period_s"],
            shutdown_timeout_s=v["shutdown_timeout_s"],
            pre_stop_s=v["pre_stop_s"],
            planned_pre_stop_s=planned_pre_stop_s,
            margin_frac=margin_frac,
        )
        longest_s, window_s, frac, check, plan = (
            review.longest_s,
            review.window_s,
            review.cut_frac,
            review.current,
            review.plan,
        )
        problems = "".join(f"<li>{p}</li>" for p in check.problems)
        summary.value = (
            f"<p>Grace {v['termination_grace_period_s']:.0f} s, --shutdown-timeout {v['shutdown_timeout_s']:.0f} s, "
            f"preStop {v['pre_stop_s']:.0f} s; {v['max_output_tokens']:,} tokens at {v['itl_ms']:.0f} ms "
            f"({shape_text} lengths): the longest generation needs <b>{longest_s:g} s</b>, in-flight "
            f"requests get <b>{window_s:g} s</b>, and a scale-down cuts <b>{frac:.1%}</b> of them "
            f"({review.cut_requests:.1f} of {in_flight_requests:g}).</p>"
            f"<p>{'These settings cut nothing.' if check.ok else 'Problems:'}</p>"
            + (f"<ul>{problems}</ul>" if problems else "")
            + f"<p>Recommended, with a {plan.pre_stop_s} s preStop and a {margin_frac:.0%} margin: "
            f"--shutdown-timeout {plan.shutdown_timeout_s} s, preStop {plan.pre_stop_s} s, "
            f"terminationGracePeriodSeconds {plan.termination_grace_period_s} s.</p>"
        )

    for slider in sliders.values():
        slider.observe(update, names="value")
    update()
    return widgets.VBox([*sliders.values(), summary])
