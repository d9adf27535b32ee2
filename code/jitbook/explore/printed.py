"""An explorer on paper: when Quarto executes a page for the PDF (Typst), each explorer
is also given as Markdown, its figure drawn once by matplotlib at the explorer's first
choice, and the table it draws from.

Quarto writes a Typst page from an output's ``text/markdown`` before any image or text
(``src/core/jupyter/display-data.ts``) and the HTML page from ``text/html``, so the
site never carries it; it is only made when ``QUARTO_EXECUTE_INFO`` says the target is
Typst.
"""

import functools
import io
import json
import os

from jitbook import display


@functools.cache
def for_print() -> bool:
    """Whether the kernel runs for Quarto's Typst (PDF) output."""
    path = os.environ.get("QUARTO_EXECUTE_INFO")
    if not path or not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as file:
        info = json.load(file)
    target = info.get("format", {}).get("pandoc", {}).get("to", "")
    return str(target).startswith("typst")


def svg(figure: dict) -> str:
    """The Plotly ``figure`` (scatter, bar, heatmap traces) drawn by matplotlib, as
    SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    layout = figure["layout"]
    fig, ax = plt.subplots(figsize=(6.2, 3.2))
    for trace in figure["data"]:
        _draw(ax, trace)
    for name, set_scale, set_label in (
        ("xaxis", ax.set_xscale, ax.set_xlabel),
        ("yaxis", ax.set_yscale, ax.set_ylabel),
    ):
        axis = layout.get(name, {})
        if axis.get("type") == "log":
            set_scale("log")
        set_label(axis.get("title", {}).get("text", ""))
        if axis.get("tickvals"):
            ticks = ax.set_xticks if name == "xaxis" else ax.set_yticks
            ticks(axis["tickvals"], axis["ticktext"])
        heat = any(t.get("type") == "heatmap" for t in figure["data"])  # top row first
        if axis.get("autorange") == "reversed" and not heat:
            (ax.invert_xaxis if name == "xaxis" else ax.invert_yaxis)()
    if any(t.get("name") and t.get("showlegend", True) for t in figure["data"]):
        ax.legend(fontsize=7, frameon=False)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    out = io.StringIO()
    fig.savefig(out, format="svg")
    plt.close(fig)
    return out.getvalue()


def _draw(ax, trace: dict) -> None:
    kind = trace.get("type", "scatter")
    if kind == "bar":
        colour = trace.get("marker", {}).get("color", "#7f7f7f")
        ax.barh(trace["y"], trace["x"], color=colour)
    elif kind == "heatmap":
        import numpy as np

        # a cell a row does not have (None) is left blank, as the site leaves it
        z = [[np.nan if v is None else v for v in line] for line in trace["z"]]
        ax.imshow(np.array(z, dtype=float), cmap="Blues", aspect="auto", alpha=0.5)
        ax.set_xticks(range(len(trace["x"])), [_text(t) for t in trace["x"]])
        ax.set_yticks(range(len(trace["y"])), [_text(t) for t in trace["y"]])
        for r, line in enumerate(trace.get("text", [])):
            for c, text in enumerate(line):
                ax.text(c, r, text, ha="center", va="center", fontsize=7)
    elif trace.get("mode") == "markers" and trace.get("hoverinfo") == "skip":
        if trace.get("type") == "scatter" and not isinstance(trace["x"][0], str):
            ax.scatter(
                trace["x"],
                trace["y"],
                s=60,
                facecolors="none",
                edgecolors="#d62728",
                linewidths=2,
                zorder=3,
            )
    else:
        ax.plot(
            trace["x"],
            trace["y"],
            marker="o" if "markers" in trace.get("mode", "") else None,
            markersize=3,
            label=trace.get("name"),
        )


def _text(label: str) -> str:
    """A Plotly label as matplotlib writes it: its ``<br>`` as line breaks."""
    return str(label).replace("<br>", "\n")


def markdown(title: str, figure: dict, rows: list[dict]) -> str:
    """The explorer as Markdown for the PDF: its title, its figure (raw Typst, so the
    SVG needs no file) and its table."""
    picture = svg(figure).replace("\\", "\\\\").replace('"', '\\"')
    shown = [{k: "—" if v is None else v for k, v in row.items()} for row in rows]
    return (
        f"**{title}**\n\n"
        f'```{{=typst}}\n#image(bytes("{picture}"), format: "svg", width: 100%)'
        "\n```\n\n"
        f"{display.table(shown).text}\n"
    )
