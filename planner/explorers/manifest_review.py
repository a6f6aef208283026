"""Live explorer for "Reviewing the manifests you run": move the numbers the rules compare against."""

from __future__ import annotations

import dataclasses
import html
from pathlib import Path

import ipywidgets as widgets

from planner.manifests.lint import LintSettings, lint
from planner.readers.workload import ManifestSet

__all__ = ["lint_explorer"]


def lint_explorer(manifests: ManifestSet, settings: LintSettings) -> widgets.VBox:
    """Sliders for the warmup, the longest answer and the drain ITL; the list re-runs the linter.

    Parameters
    ----------
    manifests : ManifestSet
        What :func:`planner.readers.workload.read_manifest_set` read.
    settings : LintSettings
        The starting numbers, so the list opens on the chapter's findings. A
        ``max_tokens`` or ``itl_ms`` of ``None`` (read from the manifests, or
        the rule's default) is the slider's 0.
    """
    sliders = {
        "warmup_s": widgets.FloatSlider(
            value=settings.warmup_s, min=0.0, max=900.0, step=15.0, description="warmup (s)", continuous_update=False
        ),
        "max_tokens": widgets.IntSlider(
            value=int(settings.max_tokens or 0),
            min=0,
            max=32_768,
            step=256,
            description="max_tokens",
            continuous_update=False,
        ),
        "itl_ms": widgets.FloatSlider(
            value=settings.itl_ms or 0.0, min=0.0, max=200.0, step=5.0, description="ITL (ms)", continuous_update=False
        ),
    }
    summary = widgets.HTML()

    def update(_change=None) -> None:
        v = {name: slider.value for name, slider in sliders.items()}
        chosen = dataclasses.replace(
            settings, warmup_s=v["warmup_s"], max_tokens=v["max_tokens"] or None, itl_ms=v["itl_ms"] or None
        )
        findings = lint(manifests, chosen)
        rows = "".join(
            f"<li><b>{html.escape(f.rule)}</b> ({f.severity}) {html.escape(Path(f.file).name)}:{f.line}</li>"
            for f in findings
        )
        errors = sum(f.severity == "error" for f in findings)
        tokens = "max_tokens from the manifests" if chosen.max_tokens is None else f"{chosen.max_tokens:,} max_tokens"
        itl = "the rule's default ITL" if chosen.itl_ms is None else f"{chosen.itl_ms:g} ms ITL"
        summary.value = (
            f"<p>{len(findings)} finding(s), {errors} error(s), at a {chosen.warmup_s:g} s warmup, "
            f"{tokens} and {itl} (a slider at 0 leaves the value to the manifests or the rule):</p><ul>{rows}</ul>"
        )

    for slider in sliders.values():
        slider.observe(update, names="value")
    update()
    return widgets.VBox([*sliders.values(), summary])
