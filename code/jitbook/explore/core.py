"""The explorer itself: its choices, the text each shows, its Plotly figure, and how it
renders as HTML (the site), as Plotly's own MIME type (JupyterLab) and as text.

``explore`` builds explorers from rows; this module checks the rows and writes them out.
"""

import functools
import hashlib
import html
import json
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from jitbook.display import number
from jitbook.display import numbers as column_of_numbers
from jitbook.explore import printed
from jitbook.explore.page import CONFIG, json_for_script, page_scripts

METADATA_KEY = "jitbook/explorer"
PLOTLY_MIME = "application/vnd.plotly.v1+json"
HIGHLIGHT = "#d62728"
SLIDER_HEIGHT = (
    110  # pixels Plotly's slider takes under the x axis: its label, rail and ticks
)

# plotly.js and the explorer runtime go into the page once: with the first explorer this
# kernel shows.
_page = {"scripts_sent": False}


def fmt(value) -> str:
    """A value as the explorer's caption and table print it: ``1,024``, ``yes``, ``—``
    for a missing one, section ids as their titles."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        return number(value, 3)  # 16,008,000: thousands separated, as in the tables
    return titled(str(value))


def _column(rows: list[dict], column: str) -> list[str]:
    """A column of the explorer's table: its numbers in one format when all of them are
    numbers (``display.numbers``), else each value as ``fmt`` writes it."""
    values = [r[column] for r in rows]
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return column_of_numbers(values, 3)
    return [fmt(v) for v in values]


SECTION_ID = re.compile(r"@?\b((?:sec|exr)-[a-z0-9][\w-]*\w)")


@functools.cache
def _titles() -> dict[str, str]:
    from jitbook.site.downloads import (
        label_titles,
    )  # reads every chapter: only if needed

    return label_titles()


def titled(text: str) -> str:
    """``text`` with every section id (``sec-tracing-loops``) written as the section's
    title, as the prose links it."""
    if not SECTION_ID.search(text):
        return text
    titles = _titles()
    return SECTION_ID.sub(
        lambda m: f"“{titles[m.group(1)]}”" if m.group(1) in titles else m.group(0),
        text,
    )


def finite(value, what: str) -> float:
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


def check_rows(rows, columns: Sequence[str], who: str) -> list[dict]:
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


def check_panels(panels, count: int, who: str) -> list[dict[str, str]]:
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
    return [{t: titled(text) for t, text in p.items()} for p in panels]


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
            "\n".join(f"{k}: {fmt(v)}" for k, v in row.items()) for row in self.rows
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
            "updates": self.updates,
            "traces": self.traces,
            "figure": figure,
            "config": CONFIG,
        }
        # The shared style and runtime go inside the first explorer's element: an
        # output that opens with <script> or <style> may be moved to the page's head.
        scripts = page_scripts() if include_scripts else ""
        return (
            f'<div class="jitbook-explorer" id="{i}" data-choice="{self.start}">'
            f"{scripts}"
            f"<p><strong>{e(self.title)}</strong></p>"
            f'<label for="{i}-control">{e(self.label)}</label>{control}'
            f'<output id="{i}-caption" for="{i}-control" aria-live="polite">'
            f"{e(self.captions[self.start])}</output>"
            f'<div class="jitbook-explorer-wide"><div id="{i}-plot" '
            f'class="jitbook-explorer-plot" role="img" '
            f'style="{_plot_style(self.figure)}" '
            f'aria-label="{e(self.title)}: '
            f'the table below gives the same values"></div></div>'
            f'<div class="jitbook-panels">{panels}</div>'
            "<details><summary>The table this explorer draws from</summary>"
            f"<div>{self._table_html()}</div></details>"
            f'<script type="application/json" id="{i}-data">'
            f"{json_for_script(spec)}</script>"
            f'<script>window.jitbookExplorer("{i}");</script></div>'
        )

    def _table_html(self) -> str:
        e = html.escape
        columns = list(self.rows[0])
        head = "".join(f"<th>{e(c)}</th>" for c in columns)
        cells = zip(*(_column(self.rows, c) for c in columns), strict=True)
        body = "".join(
            "<tr>" + "".join(f"<td>{e(cell)}</td>" for cell in row) + "</tr>"
            for row in cells
        )
        # the panels' one copy on the page: the runtime shows choice i's k-th text from
        # the <pre> with id {ident}-text-i-k
        text = "".join(
            f"<p><strong>{e(label)}</strong></p>"
            + "".join(
                f'<p>{e(t)}</p><pre id="{self.ident}-text-{i}-{k}">{e(v)}</pre>'
                for k, (t, v) in enumerate(p.items())
            )
            for i, (label, p) in enumerate(zip(self.labels, self.panels, strict=True))
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
        if printed.for_print():
            data["text/markdown"] = printed.markdown(self.title, self.figure, self.rows)
        return data, {METADATA_KEY: self.spec()}


def restyled(figure: dict, traces: list[int], update: dict) -> dict:
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


def short(value: float) -> float:
    return float(f"{value:.6g}")


def _caption_lines(caption: str, width: int = 100) -> list[str]:
    """A caption cut between its ``column: value`` parts into lines Plotly's title
    holds."""
    lines = [""]
    for part in caption.split("\n"):
        if lines[-1] and len(lines[-1]) + 2 + len(part) > width:
            lines.append("")
        lines[-1] = f"{lines[-1]}; {part}" if lines[-1] else part
    return lines


def _caption(row: dict) -> str:
    """The chosen row, one ``column: value`` a line (the page sets them in columns)."""
    return "\n".join(f"{k}: {fmt(v)}" for k, v in row.items())


def _ident(title: str, labels: Sequence[str]) -> str:
    digest = hashlib.sha1(json.dumps([title, list(labels)]).encode()).hexdigest()[:10]
    return f"jitbook-explore-{digest}"


# The width a heat map's column keeps on a phone, so that its cell's text ("2: no:
# stale") reads at the figure's font size; the rest of a narrow screen scrolls sideways.
HEAT_COLUMN_PX = 100
HEAT_LABELS_PX = 140


def _plot_style(figure: dict) -> str:
    """A heat map's plot is at least as wide as its columns need; other plots fit."""
    heat = [d for d in figure["data"] if d.get("type") == "heatmap"]
    if not heat:
        return ""
    return f"min-width: {HEAT_LABELS_PX + HEAT_COLUMN_PX * len(heat[0]['x'])}px"


def build(
    title, label, control, rows, key, panels, figure, traces, updates, start
) -> Explorer:
    """``key`` is the column naming the choices, or the list of their names."""
    labels = key if isinstance(key, list) else [fmt(r[key]) for r in rows]
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
        figure=restyled(figure, traces, updates[start]),
        traces=traces,
        updates=updates,
        start=start,
        ident=_ident(title, labels),
    )
