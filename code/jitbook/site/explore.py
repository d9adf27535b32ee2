"""Explorers: a figure the reader moves by hand, offline, choosing among results JAX
computed when the page ran.

Why Plotly, not Bokeh. Both can embed their JavaScript in the page (plotly.js from the
``plotly`` package, already a dependency; BokehJS with inline resources, not installed).
What decides it is the second place a reader meets an explorer: the executed ``.ipynb``
opened in JupyterLab, untrusted. JupyterLab strips ``<script>`` from untrusted HTML, so
an explorer there must come as a MIME type that a
*safe* renderer draws. The ``plotly`` package ships the ``jupyterlab-plotly`` extension,
which renders ``application/vnd.plotly.v1+json`` (registered ``safe: true``, rank 2,
ahead of HTML's 50), sliders and menus included; Bokeh needs the separate
``jupyter_bokeh`` extension and a trusted notebook. In HTML, Quarto's Jupyter engine and
nbconvert both pick ``text/html`` and ignore Plotly's MIME type; plotly.js 4 sets
``window.Plotly`` as a plain script (no AMD/require.js branch), so a page works whether
the CDN require.js and jQuery that Quarto adds are there or stripped. The cost:
plotly.js is 4.8 MB, embedded once per page, with the first explorer the kernel shows.

An explorer's HTML has native controls (a range input or a select: keyboard and screen
readers work for free), a live caption, text panels and a folded table, its text
equivalent; its JavaScript only picks a precomputed choice and calls ``Plotly.restyle``.
Nothing recomputes JAX in JavaScript.
"""

import functools
import html
import json
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources

from jitbook.display import number

METADATA_KEY = "jitbook/explorer"
PLOTLY_MIME = "application/vnd.plotly.v1+json"
CONFIG = {
    "displaylogo": False,
    "responsive": True,
    "showLink": False,
    "showSendToCloud": False,
    "showEditInChartStudio": False,
}
HIGHLIGHT = "#d62728"
SLIDER_HEIGHT = (
    110  # pixels Plotly's slider takes under the x axis: its label, rail and ticks
)

# plotly.js and the explorer runtime go into the page once: with the first explorer this
# kernel shows.
_page = {"scripts_sent": False}

RUNTIME = """
window.jitbookExplorer = function (id) {
  var root = document.getElementById(id);
  var spec = JSON.parse(document.getElementById(id + "-data").textContent);
  var control = document.getElementById(id + "-control");
  var caption = document.getElementById(id + "-caption");
  var plot = document.getElementById(id + "-plot");
  function choose(i) {
    caption.textContent = spec.captions[i];
    if (control.type === "range") {
      control.setAttribute("aria-valuetext", spec.labels[i]);
    }
    spec.panels[i].forEach(function (text, k) {
      document.getElementById(id + "-panel-" + k).textContent = text;
    });
    if (plot && window.Plotly) {
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
  if (plot && window.Plotly) {
    var layout = JSON.parse(JSON.stringify(spec.figure.layout));
    var drawn = window.Plotly.newPlot(plot, spec.figure.data, layout, spec.config);
    drawn.then(function () {
      window.Plotly.relayout(plot, colours());
      choose(Number(control.value));
    });
    new MutationObserver(function () { window.Plotly.relayout(plot, colours()); })
      .observe(document.body, {attributes: true, attributeFilter: ["class"]});
  } else {
    choose(Number(control.value));
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
}
.jitbook-explorer select { max-width: 100%; }
.jitbook-explorer pre {
  white-space: pre; font-size: 0.75em; max-height: 24em; overflow: auto;
}
.jitbook-explorer .jitbook-panels { display: flex; flex-direction: column; gap: 0.8em; }
.jitbook-explorer .jitbook-panels figure { min-width: 0; margin: 0; }
.jitbook-explorer table { font-size: 0.85em; }
"""


def _fmt(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return number(value, 3)  # 16,008,000: thousands separated, as in the tables
    return str(value)


def _number(value, what: str) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, numbers.Real)
        or not math.isfinite(value)
    ):
        raise TypeError(
            f"{what} must be a finite number to plot, got {value!r}; "
            "put text in another column."
        )
    return float(value)


def _check_rows(rows, columns: Sequence[str], who: str) -> list[dict]:
    if isinstance(rows, Mapping) or not isinstance(rows, Sequence) or not rows:
        raise ValueError(
            f"{who} takes a non-empty list of dicts, one per choice, "
            "e.g. [{'n': 10, 'ms': 1.2}, ...]."
        )
    rows = list(rows)
    if not all(isinstance(r, Mapping) for r in rows):
        raise TypeError(
            f"{who}: every row must be a dict of column -> value; "
            f"got {type(rows[0]).__name__}."
        )
    keys = list(rows[0])
    for i, row in enumerate(rows):
        if list(row) != keys:
            raise ValueError(
                f"{who}: row {i} has columns {list(row)}, row 0 has {keys}; "
                "give every row the same columns."
            )
    missing = [c for c in columns if c not in keys]
    if missing:
        raise KeyError(
            f"{who}: no column {missing[0]!r} in the rows; columns are {keys}."
        )
    return [dict(r) for r in rows]


def _check_panels(panels, count: int, who: str) -> list[dict[str, str]]:
    if panels is None:
        return [{} for _ in range(count)]
    panels = list(panels)
    if len(panels) != count:
        raise ValueError(
            f"{who}: {len(panels)} panels for {count} choices; "
            "give one dict of title -> text per row."
        )
    titles = list(panels[0])
    for i, p in enumerate(panels):
        if (
            not isinstance(p, Mapping)
            or list(p) != titles
            or not all(isinstance(t, str) for t in p.values())
        ):
            raise TypeError(
                f"{who}: panel {i} must be a dict with the titles {titles}, "
                "each mapped to text (a str)."
            )
    return [dict(p) for p in panels]


@dataclass(frozen=True)
class Explorer:
    """One explorer: choices, the text each shows, a Plotly figure and the restyle each
    choice applies.

    ``updates[i]`` restyles the traces ``traces`` of ``figure`` for choice ``i``; the
    page's JavaScript and the JupyterLab slider/menu apply the same update, so both show
    the same precomputed values.
    """

    title: str
    label: str
    control: str  # "slider" or "picker"
    labels: list[str]
    captions: list[str]
    rows: list[dict]
    panels: list[dict[str, str]]
    figure: dict
    traces: list[int]
    updates: list[dict]
    start: int = 0
    ident: str = field(default="", compare=False)

    def spec(self) -> dict:
        """What a test or a page needs to check the explorer: labels, captions, panels
        and updates."""
        return {
            "id": self.ident,
            "title": self.title,
            "control": self.control,
            "labels": self.labels,
            "captions": self.captions,
            "panels": [list(p.values()) for p in self.panels],
            "panel_titles": list(self.panels[0]),
            "traces": self.traces,
            "updates": self.updates,
            "start": self.start,
        }

    def plotly_figure(self) -> dict:
        """The figure with Plotly's own slider or menu: what JupyterLab draws from the
        Plotly MIME type.

        There are no HTML controls there, so each step also writes the caption under the
        title and the panels' text in an annotation below the plot.
        """
        lines = max(
            sum(len(text.splitlines()) + 1 for text in p.values()) for p in self.panels
        )
        steps = [
            {
                "label": label,
                "method": "update",
                "args": [update, self._words(i), self.traces],
            }
            for i, (label, update) in enumerate(
                zip(self.labels, self.updates, strict=True)
            )
        ]
        # Stacked under the plot, top to bottom: the x axis, the slider with its label
        # (JupyterLab has no HTML controls), the panels' text; the legend goes to the
        # right, out of their way.
        below = SLIDER_HEIGHT if self.control == "slider" else 0
        layout = {**self.figure["layout"], **self._words(self.start)}
        layout["legend"] = {"orientation": "v", "x": 1.02, "y": 1, "yanchor": "top"}
        extra = below + 40 + 13 * lines
        # The caption, under the title, takes as many lines as its longest choice needs.
        top = 14 * (max(len(_caption_lines(c)) for c in self.captions) - 1)
        layout["margin"] = {
            **layout["margin"],
            "b": layout["margin"]["b"] + extra,
            "t": layout["margin"]["t"] + top,
        }
        layout["height"] = layout["height"] + extra + top
        if self.control == "slider":
            layout["sliders"] = [
                {
                    "active": self.start,
                    "steps": steps,
                    "pad": {"t": 50},
                    "currentvalue": {"prefix": f"{self.label}: "},
                }
            ]
        else:
            layout["updatemenus"] = [
                {
                    "active": self.start,
                    "buttons": steps,
                    "direction": "down",
                    "x": 0,
                    "xanchor": "left",
                    "y": 1.18,
                    "yanchor": "bottom",
                }
            ]
        return {"data": self.figure["data"], "layout": layout, "config": CONFIG}

    def _words(self, i: int) -> dict:
        """Layout of choice ``i`` for Plotly alone: its caption as the subtitle, its
        panels as one annotation."""
        text = "<br>".join(
            f"<b>{_plotly_text(t)}</b><br>{_plotly_text(v)}"
            for t, v in self.panels[i].items()
        )
        notes = [
            {
                "text": text,
                "xref": "paper",
                "yref": "paper",
                "x": 0,
                "y": 0,
                "yshift": -60 - (SLIDER_HEIGHT if self.control == "slider" else 0),
                "xanchor": "left",
                "yanchor": "top",
                "align": "left",
                "showarrow": False,
                "font": {"family": "monospace", "size": 11},
            }
        ]
        return {
            "title": {
                "text": f"{_plotly_text(self.title)}<br>"
                + "<br>".join(
                    f"<sub>{_plotly_text(line)}</sub>"
                    for line in _caption_lines(self.captions[i])
                )
            },
            "annotations": notes if self.panels[i] else [],
        }

    def text(self) -> str:
        """The text equivalent: every row the explorer draws from, one ``column: value``
        line each (short lines)."""
        blocks = [
            "\n".join(f"{k}: {_fmt(v)}" for k, v in row.items()) for row in self.rows
        ]
        return f"{self.title}\n\n" + "\n\n".join(blocks)

    def html(self, include_scripts: bool) -> str:
        """The explorer as one HTML fragment; ``include_scripts`` embeds plotly.js and
        the runtime (once a page)."""
        i, e = self.ident, html.escape
        if self.control == "slider":
            control = (
                f'<input type="range" id="{i}-control" min="0" '
                f'max="{len(self.labels) - 1}" step="1" '
                f'value="{self.start}" aria-valuetext="{e(self.labels[self.start])}">'
            )
        else:
            options = "".join(
                f'<option value="{k}"{" selected" if k == self.start else ""}>'
                f"{e(label)}</option>"
                for k, label in enumerate(self.labels)
            )
            control = f'<select id="{i}-control">{options}</select>'
        panels = "".join(
            f"<figure><figcaption>{e(t)}</figcaption>"
            f'<pre id="{i}-panel-{k}">{e(text)}</pre></figure>'
            for k, (t, text) in enumerate(self.panels[self.start].items())
        )
        # The title is already above the controls; Plotly's own title is for JupyterLab,
        # where there are no controls.
        layout = {
            **self.figure["layout"],
            "title": {"text": ""},
            "margin": {**self.figure["layout"]["margin"], "t": 30},
        }
        figure = {"data": self.figure["data"], "layout": layout}
        spec = {
            "captions": self.captions,
            "labels": self.labels,
            "panels": [list(p.values()) for p in self.panels],
            "updates": self.updates,
            "traces": self.traces,
            "figure": figure,
            "config": CONFIG,
        }
        scripts = ""
        if include_scripts:
            scripts = (
                f"<style>{STYLE}</style><script>{plotly_js()}</script>"
                f"<script>{RUNTIME}</script>"
            )
        return (
            f"{scripts}"
            f'<div class="jitbook-explorer" id="{i}" data-choice="{self.start}">'
            f"<p><strong>{e(self.title)}</strong></p>"
            f'<label for="{i}-control">{e(self.label)}</label>{control}'
            f'<output id="{i}-caption" for="{i}-control" aria-live="polite">'
            f"{e(self.captions[self.start])}</output>"
            f'<div id="{i}-plot" class="jitbook-explorer-plot" role="img" '
            f'aria-label="{e(self.title)}: '
            f'the table below gives the same values"></div>'
            f'<div class="jitbook-panels">{panels}</div>'
            "<details><summary>The table this explorer draws from</summary>"
            f"{self._table_html()}</details>"
            f'<script type="application/json" id="{i}-data">{_json(spec)}</script>'
            f'<script>window.jitbookExplorer("{i}");</script></div>'
        )

    def _table_html(self) -> str:
        e = html.escape
        columns = list(self.rows[0])
        head = "".join(f"<th>{e(c)}</th>" for c in columns)
        body = "".join(
            "<tr>" + "".join(f"<td>{e(_fmt(r[c]))}</td>" for c in columns) + "</tr>"
            for r in self.rows
        )
        text = "".join(
            f"<p><strong>{e(label)}</strong></p>"
            + "".join(f"<p>{e(t)}</p><pre>{e(v)}</pre>" for t, v in p.items())
            for label, p in zip(self.labels, self.panels, strict=True)
            if p
        )
        return (
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>{text}"
        )

    def _repr_mimebundle_(self, include=None, exclude=None) -> tuple[dict, dict]:
        first = not _page["scripts_sent"]
        _page["scripts_sent"] = True
        data = {
            PLOTLY_MIME: self.plotly_figure(),
            "text/html": self.html(include_scripts=first),
            "text/plain": self.text(),
        }
        return data, {METADATA_KEY: self.spec()}


# 4.8 MB, read once per process: every explorer page and the site checks want it.
@functools.cache
def plotly_js() -> str:
    """The plotly.js bundled with the installed ``plotly`` package (no CDN)."""
    return (
        resources.files("plotly")
        .joinpath("package_data", "plotly.min.js")
        .read_text(encoding="utf-8")
    )


def _json(value) -> str:
    # "</" would end the <script> element the JSON sits in.
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


def _restyled(figure: dict, traces: list[int], update: dict) -> dict:
    """``figure`` with ``update`` applied as ``Plotly.restyle`` would: one value per
    listed trace, dotted keys nested."""
    data = json.loads(json.dumps(figure["data"]))
    for key, values in update.items():
        for trace, value in zip(traces, values, strict=True):
            *parents, leaf = key.split(".")
            node = data[trace]
            for name in parents:
                node = node.setdefault(name, {})
            node[leaf] = value
    return {"data": data, "layout": figure["layout"]}


def _plotly_text(text: str) -> str:
    """Plain text for Plotly's small HTML subset: escaped, line breaks as <br>,
    indentation kept."""
    lines = html.escape(text, quote=False).splitlines() or [""]
    return "<br>".join(
        line.replace(" ", "&nbsp;") if line.startswith(" ") else line for line in lines
    )


def _short(value: float) -> float:
    return float(f"{value:.6g}")


def _caption_lines(caption: str, width: int = 100) -> list[str]:
    """A caption cut between its ``column: value`` parts into lines Plotly's title
    holds."""
    lines = [""]
    for part in caption.split("; "):
        if lines[-1] and len(lines[-1]) + 2 + len(part) > width:
            lines.append("")
        lines[-1] = f"{lines[-1]}; {part}" if lines[-1] else part
    return lines


def _caption(row: dict) -> str:
    return "; ".join(f"{k}: {_fmt(v)}" for k, v in row.items())


def _ident(title: str, labels: Sequence[str]) -> str:
    import hashlib

    digest = hashlib.sha1(json.dumps([title, list(labels)]).encode()).hexdigest()[:10]
    return f"jitbook-explore-{digest}"


def _nice(step: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is at least ``step``."""
    power = 10 ** math.floor(math.log10(step))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= step)


def _axis(values: Sequence, log: bool) -> dict:
    """Ticks a reader can read: powers of ten on a log axis spanning decades (no bare
    minor digits), whole numbers on an axis of counts, no SI suffixes (``100μ``),
    thousands separated, zero drawn."""
    nums = [
        v for v in values if isinstance(v, numbers.Real) and not isinstance(v, bool)
    ]
    if not nums:
        return {}  # categories: Plotly writes them as given
    style = {"exponentformat": "power", "separatethousands": True}
    if log:
        positive = sorted({v for v in nums if v > 0})
        if 1 < len(positive) <= 12:  # a few choices: a tick at each, labelled in full
            style.update(tickvals=positive, ticktext=[number(v, 3) for v in positive])
        elif positive and math.log10(positive[-1] / positive[0]) >= 1:
            style["dtick"] = 1
        return style
    style.update({"zeroline": True, "zerolinewidth": 2})
    if all(float(v).is_integer() for v in nums):
        top = max(abs(v) for v in nums) or 1
        style.update({"tickformat": ",d", "tick0": 0, "dtick": max(1, _nice(top / 5))})
    return style


def _with_axes(layout: dict, xs: Sequence, ys: Sequence) -> dict:
    layout["xaxis"].update(_axis(xs, layout["xaxis"]["type"] == "log"))
    layout["yaxis"].update(_axis(ys, layout["yaxis"]["type"] == "log"))
    return layout


def _layout(
    title: str, x_title: str, y_title: str, log_x: bool = False, log_y: bool = False
) -> dict:
    return {
        "title": {"text": title},
        "height": 420,
        "margin": {"t": 90, "l": 70, "r": 20, "b": 60},
        "xaxis": {
            "title": {"text": x_title},
            "type": "log" if log_x else "-",
            "automargin": True,
        },
        "yaxis": {
            "title": {"text": y_title},
            "type": "log" if log_y else "-",
            "automargin": True,
        },
        "legend": {"orientation": "h", "y": -0.2},
    }


def _explorer(
    title, label, control, rows, key, panels, figure, traces, updates, start
) -> Explorer:
    """``key`` is the column naming the choices, or the list of their names."""
    labels = key if isinstance(key, list) else [_fmt(r[key]) for r in rows]
    if len(set(labels)) != len(labels):
        raise ValueError(
            f"the choices' names must differ, so each names one row; got {labels}."
        )
    if not 0 <= start < len(rows):
        raise ValueError(
            f"start={start} is not a choice; give an index from 0 to {len(rows) - 1}."
        )
    return Explorer(
        title=title,
        label=label,
        control=control,
        labels=labels,
        captions=[_caption(r) for r in rows],
        rows=rows,
        panels=panels,
        figure=_restyled(figure, traces, updates[start]),
        traces=traces,
        updates=updates,
        start=start,
        ident=_ident(title, labels),
    )


def slider(
    rows: Sequence[dict],
    *,
    x: str,
    ys: Sequence[str],
    title: str,
    panels: Sequence[dict] | None = None,
    y_title: str = "",
    log_x: bool = False,
    log_y: bool = False,
    start: int = 0,
) -> Explorer:
    """A slider along column ``x``: the columns ``ys`` are curves against ``x``, the
    chosen row is marked on each.

    ``rows`` are the precomputed results, one dict per slider position, in order;
    ``panels`` optionally gives, per row, text shown beside the figure (a jaxpr, say):
    ``{"Python loop": text, ...}``.
    """
    rows = _check_rows(rows, [x, *ys], "slider()")
    if not ys:
        raise ValueError("slider() needs at least one column to plot in ys=[...].")
    panels = _check_panels(panels, len(rows), "slider()")
    xs = [
        r[x] if isinstance(r[x], str) else _number(r[x], f"column {x!r}") for r in rows
    ]
    curves = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": y,
            "x": xs,
            "y": [_number(r[y], f"column {y!r}") for r in rows],
        }
        for y in ys
    ]
    marks = [
        {
            "type": "scatter",
            "mode": "markers",
            "name": f"chosen {x}",
            "showlegend": False,
            "hoverinfo": "skip",
            "marker": {
                "size": 14,
                "color": HIGHLIGHT,
                "symbol": "circle-open",
                "line": {"width": 3},
            },
            "x": [xs[0]],
            "y": [curves[k]["y"][0]],
        }
        for k in range(len(ys))
    ]
    traces = list(range(len(ys), 2 * len(ys)))
    updates = [
        {"x": [[xs[i]] for _ in ys], "y": [[c["y"][i]] for c in curves]}
        for i in range(len(rows))
    ]
    layout = _layout(title, x, y_title or ", ".join(ys), log_x, log_y)
    figure = {
        "data": curves + marks,
        "layout": _with_axes(layout, xs, [v for c in curves for v in c["y"]]),
    }
    return _explorer(
        title, x, "slider", rows, x, panels, figure, traces, updates, start
    )


def picker(
    rows: Sequence[dict],
    *,
    key: str,
    bar: str,
    title: str,
    panels: Sequence[dict] | None = None,
    log_x: bool = False,
    start: int = 0,
) -> Explorer:
    """A menu of the rows named by column ``key``: a bar of column ``bar`` per row, the
    chosen bar marked.

    ``panels`` optionally gives, per row, text shown side by side (a jaxpr, its
    StableHLO, ...).
    """
    rows = _check_rows(rows, [key, bar], "picker()")
    panels = _check_panels(panels, len(rows), "picker()")
    names = [_fmt(r[key]) for r in rows]
    values = [_number(r[bar], f"column {bar!r}") for r in rows]
    bars = {
        "type": "bar",
        "orientation": "h",
        "name": bar,
        "y": names,
        "x": values,
        "showlegend": False,
    }
    colors = [
        [HIGHLIGHT if k == i else "#7f7f7f" for k in range(len(rows))]
        for i in range(len(rows))
    ]
    updates = [{"marker.color": [colors[i]]} for i in range(len(rows))]
    layout = _with_axes(_layout(title, bar, "", log_x=log_x), values, [])
    layout["yaxis"]["autorange"] = "reversed"  # the first row on top, as in the menu
    layout["height"] = 160 + 32 * len(rows)
    figure = {"data": [bars], "layout": layout}
    return _explorer(
        title, key, "picker", rows, key, panels, figure, [0], updates, start
    )


def grid(
    rows: Sequence[dict],
    *,
    across: str,
    down: str,
    value: str,
    title: str,
    note: str | None = None,
    start: int = 0,
) -> Explorer:
    """A menu of the cells of a table ``down`` x ``across``, drawn as a heat map of
    ``value``, the chosen cell marked.

    ``note`` names a column written in each cell after its value (an outcome, say).
    """
    rows = _check_rows(rows, [across, down, value] + ([note] if note else []), "grid()")
    cols = list(dict.fromkeys(_fmt(r[across]) for r in rows))
    lines = list(dict.fromkeys(_fmt(r[down]) for r in rows))
    cells = {
        (_fmt(r[down]), _fmt(r[across])): _number(r[value], f"column {value!r}")
        for r in rows
    }
    if len(cells) != len(rows):
        raise ValueError(
            f"grid(): two rows share a ({down}, {across}) cell; give each cell one row."
        )
    z = [[cells.get((d, a)) for a in cols] for d in lines]
    notes = {
        (_fmt(r[down]), _fmt(r[across])): f"{_fmt(r[value])}: {_fmt(r[note])}"
        if note
        else _fmt(r[value])
        for r in rows
    }
    heat = {
        "type": "heatmap",
        "x": cols,
        "y": lines,
        "z": z,
        "colorscale": [[0, "#f7fbff"], [1, "#4292c6"]],
        "colorbar": {"title": {"text": value}},
        "text": [[notes.get((d, a), "") for a in cols] for d in lines],
        "texttemplate": "%{text}",
        "hoverinfo": "text",
    }
    mark = {
        "type": "scatter",
        "mode": "markers",
        "showlegend": False,
        "hoverinfo": "skip",
        "x": [cols[0]],
        "y": [lines[0]],
        "marker": {
            "size": 40,
            "symbol": "square-open",
            "color": HIGHLIGHT,
            "line": {"width": 4},
        },
    }
    updates = [{"x": [[_fmt(r[across])]], "y": [[_fmt(r[down])]]} for r in rows]
    labels = [f"{_fmt(r[down])} / {_fmt(r[across])}" for r in rows]
    layout = _layout(title, across, down)
    layout["yaxis"]["autorange"] = "reversed"
    layout["height"] = 200 + 40 * len(lines)
    figure = {"data": [heat, mark], "layout": layout}
    return _explorer(
        title,
        f"{down} / {across}",
        "picker",
        rows,
        labels,
        _check_panels(None, len(rows), "grid()"),
        figure,
        [1],
        updates,
        start,
    )


def curves(
    series: Mapping[str, tuple[Sequence[float], Sequence[float]]],
    rows: Sequence[dict],
    *,
    key: str,
    title: str,
    x_title: str,
    y_title: str,
    log_x: bool = False,
    log_y: bool = False,
    start: int = 0,
) -> Explorer:
    """Zoomable curves, one per name in ``series`` (name -> (x, y)); a menu brings one
    forward, ``rows`` tell its numbers.

    ``rows[i][key]`` must name the ``i``-th series, in the same order.
    """
    rows = _check_rows(rows, [key], "curves()")
    if not isinstance(series, Mapping) or list(series) != [_fmt(r[key]) for r in rows]:
        names = list(series) if isinstance(series, Mapping) else type(series).__name__
        raise ValueError(
            f"curves(): series {names} must be a dict named, in order, "
            f"like rows' {key!r} column "
            f"{[_fmt(r[key]) for r in rows]}."
        )
    data = []
    for name, (xs, ys) in series.items():
        if len(xs) != len(ys) or not len(xs):
            raise ValueError(
                f"curves(): series {name!r} needs as many x as y values, at least one; "
                f"got {len(xs)} and {len(ys)}."
            )
        # Six significant digits are more than a curve shows, and keep a 1,000-point
        # curve to ~10 kB.
        data.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": name,
                "x": [_short(_number(v, "x")) for v in xs],
                "y": [_short(_number(v, f"series {name!r}")) for v in ys],
            }
        )
    n = len(data)
    updates = [
        {
            "opacity": [1.0 if k == i else 0.35 for k in range(n)],
            "line.width": [4 if k == i else 1.5 for k in range(n)],
        }
        for i in range(n)
    ]
    layout = _layout(title, x_title, y_title, log_x, log_y)
    all_x = [v for d in data for v in d["x"]]
    figure = {
        "data": data,
        "layout": _with_axes(layout, all_x, [v for d in data for v in d["y"]]),
    }
    return _explorer(
        title,
        key,
        "picker",
        rows,
        key,
        _check_panels(None, len(rows), "curves()"),
        figure,
        list(range(n)),
        updates,
        start,
    )
