"""The four kinds of explorer (slider, picker, grid, curves), each built from rows
with ``core.build``."""

import textwrap
from collections.abc import Mapping, Sequence

from jitbook.explore import axes
from jitbook.explore.core import (
    HIGHLIGHT,
    Explorer,
    build,
    check_panels,
    check_rows,
    finite,
    fmt,
    short,
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
    rows = check_rows(rows, [x, *ys], "slider()")
    if not ys:
        raise ValueError("slider() needs at least one column to plot in ys=[...].")
    panels = check_panels(panels, len(rows), "slider()")
    xs = [
        r[x] if isinstance(r[x], str) else finite(r[x], f"column {x!r}") for r in rows
    ]
    curves = [
        {
            "type": "scatter",
            "mode": "lines+markers",
            "name": y,
            "x": xs,
            "y": [finite(r[y], f"column {y!r}") for r in rows],
        }
        for y in ys
    ]
    ring = {"size": 14, "symbol": "circle-open", "line": {"width": 3}}
    marks = [
        _mark(xs[0], curves[k]["y"][0], ring) | {"name": f"chosen {x}"}
        for k in range(len(ys))
    ]
    traces = list(range(len(ys), 2 * len(ys)))
    updates = [
        {"x": [[xs[i]] for _ in ys], "y": [[c["y"][i]] for c in curves]}
        for i in range(len(rows))
    ]
    layout = axes.layout(title, x, y_title or ", ".join(ys), log_x, log_y)
    figure = {
        "data": curves + marks,
        "layout": axes.with_axes(layout, xs, [v for c in curves for v in c["y"]]),
    }
    return build(title, x, "slider", rows, x, panels, figure, traces, updates, start)


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
    rows = check_rows(rows, [key, bar], "picker()")
    panels = check_panels(panels, len(rows), "picker()")
    names = [fmt(r[key]) for r in rows]
    values = [finite(r[bar], f"column {bar!r}") for r in rows]
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
    # A bar of length zero has no colour to change: a marker at its end shows the
    # choice whatever the value.
    mark = _mark(values[0], names[0], {"size": 12, "symbol": "diamond"})
    updates = [
        {
            "marker.color": [colors[i], HIGHLIGHT],
            "x": [values, [values[i]]],
            "y": [names, [names[i]]],
        }
        for i in range(len(rows))
    ]
    layout = axes.with_axes(axes.layout(title, bar, "", log_x=log_x), values, [])
    layout["yaxis"]["autorange"] = "reversed"  # the first row on top, as in the menu
    layout["height"] = 160 + 32 * len(rows)
    figure = {"data": [bars, mark], "layout": layout}
    return build(
        title, key, "picker", rows, key, panels, figure, [0, 1], updates, start
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
    rows = check_rows(rows, [across, down, value] + ([note] if note else []), "grid()")
    cols = list(dict.fromkeys(_label(r[across]) for r in rows))
    lines = list(dict.fromkeys(_label(r[down]) for r in rows))
    cells = {
        (_label(r[down]), _label(r[across])): finite(r[value], f"column {value!r}")
        for r in rows
    }
    if len(cells) != len(rows):
        raise ValueError(
            f"grid(): two rows share a ({down}, {across}) cell; give each cell one row."
        )
    z = [[cells.get((d, a)) for a in cols] for d in lines]
    notes = {
        (_label(r[down]), _label(r[across])): f"{fmt(r[value])}: {fmt(r[note])}"
        if note
        else fmt(r[value])
        for r in rows
    }
    heat = {
        "type": "heatmap",
        "x": cols,
        "y": lines,
        "z": z,
        # Light enough under dark text; each cell writes its value, so no colour bar
        # takes a phone's width.
        "colorscale": [[0, "#f7fbff"], [1, "#9ecae1"]],
        "showscale": False,
        "textfont": {"color": "#212529"},
        "text": [[notes.get((d, a), "") for a in cols] for d in lines],
        "texttemplate": "%{text}",
        "hoverinfo": "text",
    }
    square = {"size": 40, "symbol": "square-open", "line": {"width": 4}}
    mark = _mark(cols[0], lines[0], square)
    updates = [{"x": [[_label(r[across])]], "y": [[_label(r[down])]]} for r in rows]
    labels = [f"{fmt(r[down])} / {fmt(r[across])}" for r in rows]
    layout = axes.layout(title, across, down)
    layout["yaxis"]["autorange"] = "reversed"
    layout["margin"] = {**layout["margin"], "l": 10, "r": 10}  # automargin fits labels
    layout["height"] = 200 + 48 * len(lines)
    figure = {"data": [heat, mark], "layout": layout}
    return build(
        title,
        f"{down} / {across}",
        "picker",
        rows,
        labels,
        check_panels(None, len(rows), "grid()"),
        figure,
        [1],
        updates,
        start,
    )


def _mark(x, y, marker: dict) -> dict:
    """The trace that marks the chosen point, out of the legend and the hover text."""
    return {
        "type": "scatter",
        "mode": "markers",
        "showlegend": False,
        "hoverinfo": "skip",
        "x": [x],
        "y": [y],
        "marker": {"color": HIGHLIGHT, **marker},
    }


def _label(value, width: int = 16) -> str:
    """A heat map's row or column name broken into short lines: long names would leave
    the cells a sliver of a phone's width."""
    return "<br>".join(textwrap.wrap(fmt(value), width)) or fmt(value)


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
    rows = check_rows(rows, [key], "curves()")
    if not isinstance(series, Mapping) or list(series) != [fmt(r[key]) for r in rows]:
        names = list(series) if isinstance(series, Mapping) else type(series).__name__
        raise ValueError(
            f"curves(): series {names} must be a dict named, in order, "
            f"like rows' {key!r} column "
            f"{[fmt(r[key]) for r in rows]}."
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
                "x": [short(finite(v, "x")) for v in xs],
                "y": [short(finite(v, f"series {name!r}")) for v in ys],
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
    layout = axes.layout(title, x_title, y_title, log_x, log_y)
    all_x = [v for d in data for v in d["x"]]
    figure = {
        "data": data,
        "layout": axes.with_axes(layout, all_x, [v for d in data for v in d["y"]]),
    }
    return build(
        title,
        key,
        "picker",
        rows,
        key,
        check_panels(None, len(rows), "curves()"),
        figure,
        list(range(n)),
        updates,
        start,
    )
