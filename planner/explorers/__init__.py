"""ipywidgets explorers for JupyterLab: sliders that call the planner live.

Each explorer returns an ipywidgets box whose callbacks re-run the planner, so
it needs a kernel. In JupyterLab it is the live widget. In the static book (and
under papermill and nbval, where no Jupyter server runs the kernel; see
:func:`planner.charts.viz.current_mode`) nothing could answer its controls, so it is
shown as a snapshot instead (:func:`static_html`): the values it opens with,
what the planner computed for them, and where to run it live. The book's own
sliders, which do work on a static page, are altair parameters over grids the
planner precomputed.

Importing this package registers the snapshot with IPython's display machinery
for every widget (:func:`register_static_display`); a widget shown in JupyterLab
keeps its own display.
"""

from __future__ import annotations

import html

import ipywidgets as widgets

__all__ = ["LIVE_NOTE", "SETTINGS_NOTE", "register_static_display", "static_html", "static_mimebundle"]

LIVE_NOTE = (
    "<strong>Snapshot.</strong> The values this explorer opens with, and what the planner computes for them. "
    "Its controls run in JupyterLab (<code>make lab</code>), where every change re-runs the planner; "
    "a static page has no Python behind it."
)
"""The line above an explorer snapshot that shows results."""

SETTINGS_NOTE = (
    "<strong>Snapshot.</strong> The values this explorer opens with. It runs the planner on them, and on "
    "every change, only in JupyterLab (<code>make lab</code>); a static page has no Python behind it."
)
"""The line above the snapshot of an explorer that computes nothing until it is used (e.g. a simulation)."""


def static_html(widget: widgets.Widget) -> str:
    """An HTML snapshot of ``widget``: its controls' values and its outputs, in order.

    Controls (sliders, menus, text boxes, check boxes) become a list of
    ``description: value`` pairs, shown as the widget would show them; HTML and
    labels are kept; an Output widget's captured outputs are kept (HTML, else
    text); buttons, which only act, are left out.
    """
    parts: list[str] = []
    settings: list[tuple[str, str]] = []

    def flush() -> None:
        if settings:
            rows = "".join(f"<dt>{name}</dt><dd>{value}</dd>" for name, value in settings)
            parts.append(f'<dl class="planner-explorer-settings">{rows}</dl>')
            settings.clear()

    def visit(node: widgets.Widget) -> None:
        if isinstance(node, widgets.Box):
            for child in node.children:
                visit(child)
        elif isinstance(node, (widgets.HTML, widgets.HTMLMath)):
            flush()
            if node.value:
                parts.append(f"<div>{node.value}</div>")
        elif isinstance(node, widgets.Label):
            flush()
            if node.value:
                parts.append(f"<p>{html.escape(node.value)}</p>")
        elif isinstance(node, widgets.Output):
            flush()
            parts.extend(_output_html(output) for output in node.outputs)
        elif isinstance(node, widgets.Button):
            return
        elif isinstance(node, widgets.ValueWidget):
            settings.append((html.escape(_description(node)), html.escape(_shown_value(node))))

    visit(widget)
    flush()
    results = any(not part.startswith('<dl class="planner-explorer-settings">') for part in parts)
    note = f'<p class="planner-explorer-note">{LIVE_NOTE if results else SETTINGS_NOTE}</p>'
    return f'<div class="planner-explorer-static">{note}{"".join(parts)}</div>'


def static_mimebundle(widget: widgets.Widget) -> dict[str, str]:
    """The display data of a widget snapshot: ``text/html`` and a one-line ``text/plain``."""
    return {"text/html": static_html(widget), "text/plain": f"<explorer snapshot: {type(widget).__name__}>"}


def _display_widget(widget: widgets.Widget, include=None, exclude=None):
    # Imported here: planner.charts.viz imports altair, which this package does not otherwise need.
    from planner.charts.viz import current_mode

    if current_mode() == "book":
        return static_mimebundle(widget)
    return widget._repr_mimebundle_(include=include, exclude=exclude)


def register_static_display(shell=None) -> bool:
    """Show widgets as snapshots wherever :func:`planner.charts.viz.current_mode` is ``"book"``.

    Registers with ``shell`` (by default the running IPython, if any) a display
    function for :class:`ipywidgets.Widget` that takes precedence over the
    widget's own; in JupyterLab it hands over to the widget. Returns whether an
    IPython shell was there to register with.
    """
    if shell is None:
        try:
            from IPython import get_ipython
        except ImportError:  # pragma: no cover - IPython comes with ipywidgets
            return False
        shell = get_ipython()
    if shell is None:
        return False
    shell.display_formatter.mimebundle_formatter.for_type(widgets.Widget, _display_widget)
    return True


_DEFAULT_FLOAT_FORMAT = widgets.FloatSlider().readout_format


def _description(widget: widgets.Widget) -> str:
    text = getattr(widget, "description", "") or getattr(widget, "tooltip", "") or type(widget).__name__
    return text.rstrip(":")


def _shown_value(widget: widgets.Widget) -> str:
    """The value as the widget itself shows it (its readout format, its option label)."""
    if hasattr(widget, "label") and hasattr(widget, "options"):  # Dropdown, RadioButtons, ...
        label = widget.label
        return "" if label is None else str(label)
    value = widget.value
    if isinstance(value, bool):
        return "on" if value else "off"
    fmt = getattr(widget, "readout_format", None)
    if fmt == _DEFAULT_FLOAT_FORMAT:
        fmt = ",.6g"  # ipywidgets' default pads whole seconds to "30.00"; the explorer set no format
    if fmt and isinstance(value, (int, float)):
        try:
            return format(value, fmt)
        except (ValueError, TypeError):
            return str(value)
    if isinstance(value, float) and not fmt:  # text boxes: 40.0 reads as 40
        return format(value, ",.6g")
    if isinstance(value, tuple) and fmt:  # range sliders
        try:
            return " to ".join(format(v, fmt) for v in value)
        except (ValueError, TypeError):
            return str(value)
    return str(value)


def _output_html(output: dict) -> str:
    data = output.get("data") or {}
    if "text/html" in data:
        return f"<div>{_joined(data['text/html'])}</div>"
    if "text/plain" in data:
        return f"<pre>{html.escape(_joined(data['text/plain']))}</pre>"
    if output.get("output_type") == "stream":
        return f"<pre>{html.escape(_joined(output.get('text', '')))}</pre>"
    return ""


def _joined(text) -> str:
    return "".join(text) if isinstance(text, list) else str(text)


register_static_display()
