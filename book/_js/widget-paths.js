// Loaded between require.js and the ipywidgets embed manager on pages with widgets.
// The manager finds its Font Awesome files relative to its own module id
// ("@jupyter-widgets/..."), which require.js resolves against the page's folder,
// where nothing is. Point those ids at the folder the manager was served from,
// where book/_js/vendor.sh put the fonts.
(function () {
  var script = document.querySelector('script[src*="widgets/require.js"]');
  if (!script || typeof window.require === "undefined") return;
  var folder = script.src.slice(0, script.src.lastIndexOf("/"));
  window.require.config({
    paths: {"@jupyter-widgets/html-manager/dist": folder, "@jupyter-widgets": folder},
  });
})();
