// Draws the book's altair charts (planner/charts/viz.py) so that each fits the width of its column.
//
// A chart is drawn at the size its author gave it. When that is wider than the
// column (a phone), its titles wrap to the column and its legends move under the
// plot, then the panels narrow until the widest row of them fits (x-axis titles
// wrap to their plot), so text, legends
// and sliders keep their size and the plot areas shrink; panels side by side that
// would get narrower than MIN_PANEL_PX are stacked instead. This works
// for single views, layers, concatenations, facets and repeats alike, which
// Vega-Lite's width "container" does not. The chart is redrawn when the window's
// width changes, keeping the values its sliders were moved to.
(function () {
  "use strict";
  var MIN_PANEL_PX = 160; // narrower panels are stacked rather than squeezed
  var MIN_WIDTH_PX = 60;
  var DEFAULT_WIDTH_PX = 300; // Vega-Lite's continuousWidth when a view sets none
  var ATTEMPTS = 6;

  function clone(value) { return JSON.parse(JSON.stringify(value)); }

  function defaultWidth(spec) {
    var view = (spec.config && spec.config.view) || {};
    return typeof view.continuousWidth === "number" ? view.continuousWidth : DEFAULT_WIDTH_PX;
  }

  function stepWidth(view) {
    return view.width && typeof view.width.step === "number" ? view.width.step : null;
  }

  // The width of the widest row of plot areas: a view's own width, summed across
  // hconcat (and concat's columns), the largest down vconcat.
  function plotWidth(view, fallback) {
    var widths;
    if (view.hconcat) {
      return view.hconcat.reduce(function (sum, v) { return sum + plotWidth(v, fallback); }, 0);
    }
    if (view.vconcat) {
      return Math.max.apply(null, view.vconcat.map(function (v) { return plotWidth(v, fallback); }));
    }
    if (view.concat) {
      widths = view.concat.map(function (v) { return plotWidth(v, fallback); });
      var columns = view.columns || widths.length, widest = 0;
      for (var i = 0; i < widths.length; i += columns) {
        widest = Math.max(widest, widths.slice(i, i + columns).reduce(function (a, b) { return a + b; }, 0));
      }
      return widest;
    }
    if (view.spec && (view.facet || view.repeat)) {
      return plotWidth(view.spec, fallback) * (view.columns || 1);
    }
    if (typeof view.width === "number") return view.width;
    if (stepWidth(view) !== null) return stepWidth(view) * 10;
    return fallback;
  }

  // Fit every row of panels into budget px of plot width: panels side by side share
  // it in proportion to their widths, panels under each other each get all of it,
  // and no panel grows. Side-by-side panels that would get narrower than
  // MIN_PANEL_PX go under each other instead.
  function fit(view, budget, fallback) {
    var children, total, share;
    if (view.hconcat) {
      total = plotWidth(view, fallback);
      share = Math.min(1, budget / total);
      var narrowest = Math.min.apply(null, view.hconcat.map(function (v) { return plotWidth(v, fallback); }));
      if (share < 1 && narrowest * share < MIN_PANEL_PX) {
        view.vconcat = view.hconcat;
        delete view.hconcat;
        return fit(view, budget, fallback);
      }
      view.hconcat.forEach(function (v) { fit(v, plotWidth(v, fallback) * share, fallback); });
    } else if (view.vconcat) {
      view.vconcat.forEach(function (v) { fit(v, budget, fallback); });
    } else if (view.concat) {
      total = plotWidth(view, fallback);
      share = Math.min(1, budget / total);
      var widest = Math.max.apply(null, view.concat.map(function (v) { return plotWidth(v, fallback); }));
      if (share < 1 && (view.columns || view.concat.length) > 1 && widest * share < MIN_PANEL_PX) {
        view.columns = 1;
        share = Math.min(1, budget / plotWidth(view, fallback));
      }
      view.concat.forEach(function (v) { fit(v, plotWidth(v, fallback) * share, fallback); });
    } else if (view.spec && (view.facet || view.repeat)) {
      var columns = view.columns || 1;
      if (columns > 1 && plotWidth(view.spec, fallback) * columns > budget &&
          budget / columns < MIN_PANEL_PX) {
        view.columns = columns = 1;
      }
      fit(view.spec, budget / columns, fallback);
    } else if (view.width === "container") {
      return;
    } else {
      children = plotWidth(view, fallback);
      if (budget >= children) return;
      if (stepWidth(view) !== null) {
        view.width = {step: Math.max(2, stepWidth(view) * budget / children)};
      } else {
        view.width = Math.max(MIN_WIDTH_PX, Math.floor(budget));
        wrapXTitles(view, view.width);
      }
    }
  }

  // An x-axis title wider than its plot widens the chart: wrap it to the plot.
  function wrapXTitles(view, width) {
    var encoding = view.encoding || {};
    ["x", "x2"].forEach(function (channel) {
      var enc = encoding[channel];
      if (!enc || typeof enc !== "object") return;
      if (typeof enc.title === "string" || Array.isArray(enc.title)) enc.title = wrapTitle(enc.title, width, 11);
      if (enc.axis && (typeof enc.axis.title === "string" || Array.isArray(enc.axis.title))) {
        enc.axis = Object.assign({}, enc.axis, {title: wrapTitle(enc.axis.title, width, 11)});
      }
    });
    (view.layer || []).forEach(function (layer) { wrapXTitles(layer, width); });
  }

  function fitted(spec, budget) {
    var next = clone(spec);
    fit(next, budget, defaultWidth(spec));
    return next;
  }

  // Break text into lines of at most maxChars characters, at spaces.
  function wrap(text, maxChars) {
    var lines = [], line = "";
    String(text).split(/\s+/).forEach(function (word) {
      if (line && (line + " " + word).length > maxChars) { lines.push(line); line = word; }
      else line = line ? line + " " + word : word;
    });
    if (line) lines.push(line);
    return lines.length > 1 ? lines : lines[0] || "";
  }

  function wrapTitle(title, room, fontSize) {
    if (title === null || title === undefined) return title;
    if (typeof title === "string" || Array.isArray(title)) {
      return wrap([].concat(title).join(" "), Math.max(12, Math.floor(room / ((fontSize || 13) * 0.65))));
    }
    if (typeof title === "object" && title.text !== undefined) {
      var size = typeof title.fontSize === "number" ? title.fontSize : 13;
      title = Object.assign({}, title, {anchor: "start", frame: "bounds", text: wrap([].concat(title.text).join(" "),
                                                   Math.max(12, Math.floor(room / (size * 0.65))))});
      if (title.subtitle !== undefined) {
        title.subtitle = wrap([].concat(title.subtitle).join(" "), Math.max(12, Math.floor(room / (11 * 0.6))));
      }
    }
    return title;
  }

  // What does not shrink with the plots: titles wrap to the column and start at its
  // left edge, legends go under
  // the plot, one entry a line, and y-axis labels are cut at
  // 40 % of the column (vega ends a cut label with an ellipsis; the tooltip has it whole).
  function narrowed(spec, room) {
    var next = clone(spec);
    (function walk(view) {
      if (!view || typeof view !== "object") return;
      if (view.title !== undefined) view.title = wrapTitle(view.title, room);
      var encoding = view.encoding || {};
      Object.keys(encoding).forEach(function (channel) {
        var enc = encoding[channel];
        if (!enc || typeof enc !== "object") return;
        if (enc.legend && typeof enc.legend === "object") {
          var labelLimit = enc.legend.labelLimit;
          enc.legend = Object.assign({}, enc.legend, {orient: "bottom", direction: "vertical", columns: 1,
            labelLimit: labelLimit && labelLimit < room - 60 ? labelLimit : Math.max(80, room - 60)});
        }
        if ((channel === "y" || channel === "y2") && enc.axis && typeof enc.axis === "object" &&
            (!enc.axis.labelLimit || enc.axis.labelLimit > room * 0.4)) {
          enc.axis = Object.assign({}, enc.axis, {labelLimit: Math.floor(room * 0.4)});
        }
      });
      ["hconcat", "vconcat", "concat", "layer"].forEach(function (key) { (view[key] || []).forEach(walk); });
      if (view.spec) walk(view.spec);
    })(next);
    next.config = Object.assign({}, next.config);
    // A title centred on a narrow plot overhangs it: start it at the chart's left edge.
    next.config.title = Object.assign({}, next.config.title, {anchor: "start", frame: "bounds"});
    next.config.axisY = Object.assign({}, next.config.axisY, {labelLimit: Math.floor(room * 0.4)});
    next.config.legend = Object.assign({}, next.config.legend, {
      orient: "bottom", direction: "vertical", labelLimit: Math.max(80, room - 60), titleLimit: Math.max(80, room - 20),
    });
    return next;
  }

  // Values of the bound parameters (sliders, menus) as the reader left them.
  function keepParams(spec, view) {
    (function walk(node) {
      if (!node || typeof node !== "object") return;
      if (Array.isArray(node.params)) {
        node.params.forEach(function (param) {
          if (!param.bind || param.select) return;
          try { param.value = view.signal(param.name); } catch (e) { /* not a signal here */ }
        });
      }
      ["hconcat", "vconcat", "concat", "layer"].forEach(function (key) {
        (node[key] || []).forEach(walk);
      });
      if (node.spec) walk(node.spec);
    })(spec);
  }

  function available(el) {
    var parent = el.parentElement;
    if (!parent) return Infinity;
    var style = getComputedStyle(parent);
    return parent.clientWidth - parseFloat(style.paddingLeft || 0) - parseFloat(style.paddingRight || 0);
  }

  function drawnWidth(el) {
    var drawn = el.querySelector("svg, canvas");
    var width = drawn ? drawn.getBoundingClientRect().width : 0;
    var bindings = el.querySelector(".vega-bindings");
    return Math.max(width, bindings ? bindings.scrollWidth : 0);
  }

  function Chart(el, spec, options) {
    this.el = el;
    this.spec = spec;
    this.options = options;
    this.result = null;
    this.width = null;
  }

  Chart.prototype.draw = function (spec) {
    var self = this;
    if (self.result) self.result.finalize();
    return window.vegaEmbed(self.el, spec, self.options).then(function (result) {
      self.result = result;
      return result;
    });
  };

  // Draw the original spec, or the largest scaled copy that fits the column.
  Chart.prototype.fit = function () {
    var self = this, el = self.el;
    var room = available(el);
    var spec = clone(self.spec);
    if (self.result) keepParams(spec, self.result.view);
    var fallback = defaultWidth(spec), natural = plotWidth(spec, fallback);
    var budget = natural, base = spec;
    self.width = room;
    el.dataset.layout = "fitting";
    delete el.dataset.scale;
    function attempt(k, current) {
      return self.draw(current).then(function () {
        var excess = drawnWidth(el) - room;
        if (excess <= 0.5 || k + 1 >= ATTEMPTS) return;
        if (base === spec) {  // first wrap the titles and move the legends, then narrow the plots
          base = narrowed(spec, room);
          return attempt(k + 1, base);
        }
        // The widest row of plots gives up the excess (and 2 px for rounding).
        budget = Math.max(MIN_WIDTH_PX, Math.min(budget, plotWidth(current, fallback)) - excess - 2);
        return attempt(k + 1, fitted(base, budget));
      });
    }
    return attempt(0, spec).then(function () {
      el.dataset.layout = drawnWidth(el) <= room + 0.5 ? "fits" : "too-wide";
      if (budget < natural) el.dataset.scale = (budget / natural).toFixed(3);
    });
  };

  var charts = [];
  var pending = null;
  window.addEventListener("resize", function () {
    clearTimeout(pending);
    pending = setTimeout(function () {
      charts.forEach(function (chart) {
        if (Math.abs(available(chart.el) - chart.width) > 1) chart.fit().catch(function () {});
      });
    }, 250);
  });

  window.plannerCharts = {
    embed: function (el, spec, options) {
      var chart = new Chart(el, spec, options);
      charts.push(chart);
      return chart.fit();
    },
    plotWidth: plotWidth,
    fitted: fitted,
    narrowed: narrowed,
  };
})();
