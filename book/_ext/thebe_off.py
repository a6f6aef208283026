"""Sphinx extension: keep sphinx-thebe's scripts off the book's pages.

Jupyter Book 1 always loads ``sphinx_thebe``, even with ``launch_buttons.thebe``
off. Under Sphinx 7, sphinx-thebe 0.3.1 adds its inline ``const THEBE_JS_URL``
script to every page twice, so every page logs "Identifier 'THEBE_JS_URL' has
already been declared", and it also appends a Binder config block to every
page. The book has no live kernel, so this extension removes the two handlers
that write thebe into pages, and nothing else.
"""

from __future__ import annotations

from sphinx.application import Sphinx

# sphinx-thebe's event handlers that put thebe scripts and config into pages.
_PAGE_HANDLERS = {"init_thebe_core", "update_thebe_context"}


def setup(app: Sphinx) -> dict:
    app.setup_extension("sphinx_thebe")
    for listeners in list(app.events.listeners.values()):
        for listener in list(listeners):
            handler = listener.handler
            if getattr(handler, "__module__", "") == "sphinx_thebe" and handler.__name__ in _PAGE_HANDLERS:
                app.disconnect(listener.id)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
