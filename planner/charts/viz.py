"""The ``viz`` module renders altair charts for the offline book and for JupyterLab.

Call :func:`enable` once at the top of a notebook. In the static book (and
under papermill and nbval, which run kernels without a JupyterLab server) it
selects the ``planner`` renderer: a deterministic ``text/html`` snippet that
draws with the page-global ``vegaEmbed`` the book loads from its own vendored
copy of vega, through the book's ``charts.js`` (book/_js), which scales the
chart's panels down to the width of its column on narrow screens. Inside JupyterLab, with the
``lab`` extra installed, it selects altair's ``jupyter`` renderer in offline mode.
"""

from __future__ import annotations

import html
import importlib.util
import json
import os

import altair as alt

RENDERER_NAME = "planner"

# data-title keeps the chart's name for checks and readers' tools: vega-embed
# replaces aria-label with a generic one when it draws.
_SNIPPET = """<div class="planner-altair" role="figure" aria-label="{label}" data-title="{label}"></div>
<script type="text/javascript">
(function (spec, options) {{
  var el = document.currentScript.previousElementSibling;
  if (typeof window.vegaEmbed !== "function") {{
    el.textContent = "[chart not drawn: vega-embed is not loaded on this page]";
    return;
  }}
  // The book's charts.js fits the chart to its column; without it, vega-embed draws it as is.
  var draw = window.plannerCharts ? window.plannerCharts.embed : window.vegaEmbed;
  draw(el, spec, options).catch(function (err) {{
    el.textContent = "[chart not drawn: " + err + "]";
  }});
}})({spec}, {options});
</script>"""


def offline_renderer(spec: dict, **metadata) -> dict:
    """Return a mimebundle that draws ``spec`` with the page's own vega-embed.

    The output depends only on the spec (keys sorted, no random ids), so
    notebook outputs are reproducible and nbval can compare them.
    """
    options = {"mode": "vega-lite", "actions": False, **(metadata.get("embed_options") or {})}
    title = spec.get("title")
    if isinstance(title, dict):
        title = title.get("text")
    label = html.escape(str(title or spec.get("description") or "chart"), quote=True)
    snippet = _SNIPPET.format(
        label=label,
        spec=_script_safe(json.dumps(spec, sort_keys=True)),
        options=_script_safe(json.dumps(options, sort_keys=True)),
    )
    return {"text/html": snippet, "text/plain": f"<altair chart: {label}>"}


alt.renderers.register(RENDERER_NAME, offline_renderer)


def enable(mode: str | None = None) -> str:
    """Choose the altair renderer for where the kernel runs and return its name.

    Parameters
    ----------
    mode : {"book", "jupyter"}, optional
        Force a renderer. By default the environment variable
        ``PLANNER_ALTAIR`` decides, then auto-detection: kernels started by a
        Jupyter server carry ``JPY_SESSION_NAME``; kernels started by
        myst-nb, papermill or nbval do not.

    Returns
    -------
    str
        ``"book"`` or ``"jupyter"``.
    """
    global _mode
    mode = mode or _detected_mode()
    if mode == "jupyter":
        if _has_lab_extras():
            alt.renderers.enable("jupyter", offline=True)
        else:
            # Without the lab extra there is no offline vega in JupyterLab;
            # altair's default renderer then fetches vega from its CDN.
            alt.renderers.enable("default")
    elif mode == "book":
        alt.renderers.enable(RENDERER_NAME)
    else:
        raise ValueError(f"mode must be 'book' or 'jupyter', got {mode!r}")
    _mode = mode
    return mode


def current_mode() -> str:
    """``"book"`` or ``"jupyter"``: what :func:`enable` chose last, or would choose now.

    Explorers (:mod:`planner.explorers`) ask it to decide whether their widgets
    can run (``"jupyter"``) or must be shown as a static snapshot (``"book"``).
    """
    return _mode or _detected_mode()


_mode: str | None = None


def _detected_mode() -> str:
    mode = os.environ.get("PLANNER_ALTAIR")
    if mode is None:
        mode = "jupyter" if os.environ.get("JPY_SESSION_NAME") else "book"
    return mode


def _has_lab_extras() -> bool:
    return all(importlib.util.find_spec(name) for name in ("anywidget", "vl_convert"))


def _script_safe(text: str) -> str:
    # A "</script>" inside a title would end the script element early.
    return text.replace("</", "<\\/")
