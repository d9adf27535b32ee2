"""What an explorer needs in the page besides its own HTML: plotly.js, the runtime that
moves the figure, the style.

plotly.js is not in any explorer's output. The site's post-render step has each page
with an explorer ask for the vendored cartesian bundle (``vendor/``: scatter, bar and
heatmap are all the explorers draw) once the page is parsed, so the text renders and
the page is interactive before the 1.5 MB script is parsed, and the browser caches it
once for the whole book. Quarto 1.10 would hoist any output holding plotly.js into the
page's head (``src/core/jupyter/widgets.ts``), explorer and all. The runtime draws the
figure as soon as ``window.Plotly`` exists; where it never comes (a notebook exported
to HTML), the controls still change the caption, the panels and the table.
"""

import functools
import hashlib
import json
from importlib import resources

PLOTLY_FILE = "plotly-cartesian.min.js"
# npm plotly.js-cartesian-dist-min 4.1.1 (vendor/README.md says how to update it).
PLOTLY_SHA256 = "79542150855a52c567260e3137095dbe2b744e6d702a5cabe67da246942fba7a"
CONFIG = {
    "displaylogo": False,
    "responsive": True,
    "showLink": False,
    "showSendToCloud": False,
    "showEditInChartStudio": False,
}

RUNTIME = """
window.jitbookExplorer = function (id) {
  var root = document.getElementById(id);
  var spec = JSON.parse(document.getElementById(id + "-data").textContent);
  var control = document.getElementById(id + "-control");
  var caption = document.getElementById(id + "-caption");
  var plot = document.getElementById(id + "-plot");
  var drawn = false;
  function choose(i) {
    caption.textContent = spec.captions[i];
    if (control.type === "range") {
      control.setAttribute("aria-valuetext", spec.labels[i]);
    }
    // Each choice's panel text is on the page once, in the table below the figure.
    root.querySelectorAll("[id^='" + id + "-panel-']").forEach(function (panel, k) {
      var text = document.getElementById(id + "-text-" + i + "-" + k);
      panel.textContent = text ? text.textContent : "";
    });
    if (drawn) {
      window.Plotly.restyle(plot, spec.updates[i], spec.traces);
    }
    root.setAttribute("data-choice", String(i));
  }
  // The page's own text colour on a transparent figure: the explorer follows Quarto's
  // dark mode, and again when the reader toggles it (Quarto swaps the body's class).
  function colours() {
    var ink = window.getComputedStyle(document.body).color;
    var grid = "rgba(127,127,127,0.3)", clear = "rgba(0,0,0,0)";
    return {"font.color": ink, "paper_bgcolor": clear, "plot_bgcolor": clear,
            "xaxis.gridcolor": grid, "yaxis.gridcolor": grid,
            "xaxis.zerolinecolor": ink, "yaxis.zerolinecolor": ink};
  }
  function draw() {
    if (!plot || !window.Plotly || drawn) { return; }
    var layout = JSON.parse(JSON.stringify(spec.figure.layout));
    var made = window.Plotly.newPlot(plot, spec.figure.data, layout, spec.config);
    made.then(function () {
      drawn = true;
      window.Plotly.relayout(plot, colours());
      choose(Number(control.value));
    });
    new MutationObserver(function () { window.Plotly.relayout(plot, colours()); })
      .observe(document.body, {attributes: true, attributeFilter: ["class"]});
  }
  choose(Number(control.value));
  // plotly.js is asked for after DOMContentLoaded (or loaded by the page itself, as an
  // exported notebook does): the window's load event waits for it.
  if (window.Plotly) { draw(); } else {
    document.addEventListener("DOMContentLoaded", draw);
    window.addEventListener("load", draw);
  }
  function chosen() { choose(Number(control.value)); }
  control.addEventListener("input", chosen);
  control.addEventListener("change", chosen);
};
"""

STYLE = """
.jitbook-explorer {
  border: 1px solid #8884; border-radius: 6px; padding: 0.6em 0.8em; margin: 1em 0;
}
.jitbook-explorer label { font-weight: 600; margin-right: 0.5em; }
.jitbook-explorer input[type=range] { width: min(100%, 28em); vertical-align: middle; }
.jitbook-explorer output {
  display: block; margin: 0.4em 0; font-variant-numeric: tabular-nums;
  white-space: pre-line; columns: 15em auto; column-gap: 2em;
}
.jitbook-explorer select {
  max-width: 100%; color: inherit; background-color: transparent;
  border: 1px solid currentColor; border-radius: 4px; padding: 0.1em 0.3em;
}
.jitbook-explorer select option { color: #212529; background-color: #fff; }
.jitbook-explorer pre {
  white-space: pre-wrap; overflow-wrap: anywhere; font-size: 0.75em; max-height: 24em;
  overflow: auto;
}
.jitbook-explorer .jitbook-panels { display: flex; flex-direction: column; gap: 0.8em; }
.jitbook-explorer .jitbook-panels figure { min-width: 0; margin: 0; }
.jitbook-explorer figcaption, .jitbook-explorer summary { color: inherit; }
.jitbook-explorer details > div { max-width: 100%; overflow-x: auto; }
.jitbook-explorer table { font-size: 0.85em; }
.jitbook-explorer-wide { max-width: 100%; overflow-x: auto; }
"""


def page_scripts() -> str:
    """The style and runtime every explorer on a page shares: sent once, with the first
    explorer, inside its own element."""
    return f"<style>{STYLE}</style><script>{RUNTIME}</script>"


def plotly_path():
    """The vendored plotly.js bundle (a ``Traversable`` in the installed package)."""
    return resources.files("jitbook.explore").joinpath("vendor", PLOTLY_FILE)


# 1.5 MB, read once per process: the site step and the browser tests want it.
@functools.cache
def plotly_js() -> str:
    """The vendored plotly.js, checked against its pinned sha256 (no CDN)."""
    data = plotly_path().read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != PLOTLY_SHA256:
        raise RuntimeError(
            f"jitbook/explore/vendor/{PLOTLY_FILE} has sha256 {digest}, not the pinned "
            f"{PLOTLY_SHA256}; restore it (vendor/README.md) or update the pin."
        )
    return data.decode("utf-8")


def json_for_script(value) -> str:
    """JSON that cannot close the ``<script>`` element it sits in."""
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")
