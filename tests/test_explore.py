"""The explorer helpers: what each choice shows comes from the rows given, bad input gets a clear error."""

import re

import numpy as np
import plotly.graph_objects as go
import pytest

from jitbook import display, explore
from jitbook.explore import core

ROWS = [
    {"n": 1, "eager ms": 2.0, "jit ms": 1.0},
    {"n": 10, "eager ms": 20.0, "jit ms": 3.0},
    {"n": 100, "eager ms": 200.0, "jit ms": 9.0},
]


def test_slider_marks_each_rows_values():
    ex = explore.slider(ROWS, x="n", ys=["eager ms", "jit ms"], title="t", log_x=True)
    for i, row in enumerate(ROWS):
        update = ex.updates[i]
        assert update["x"] == [[row["n"]], [row["n"]]]
        assert update["y"] == [[row["eager ms"]], [row["jit ms"]]]
        assert (
            ex.captions[i]
            == f"n: {row['n']}\neager ms: {row['eager ms']:.3g}\njit ms: {row['jit ms']:.3g}"
        )
    assert ex.labels == ["1", "10", "100"]


def test_figures_are_valid_plotly():
    ex = explore.slider(ROWS, x="n", ys=["jit ms"], title="t", start=2)
    go.Figure(**{k: v for k, v in ex.plotly_figure().items() if k != "config"})
    assert ex.figure["data"][1]["x"] == [100.0]  # the figure starts at the start row
    assert ex.plotly_figure()["layout"]["sliders"][0]["active"] == 2


def test_picker_colours_the_chosen_bar_and_carries_panels():
    rows = [{"variant": "a", "flops": 3.0}, {"variant": "b", "flops": 5.0}]
    ex = explore.picker(
        rows,
        key="variant",
        bar="flops",
        title="t",
        panels=[{"jaxpr": "A"}, {"jaxpr": "B"}],
    )
    assert ex.updates[1]["marker.color"][0] == ["#7f7f7f", core.HIGHLIGHT]
    assert ex.updates[1]["x"][1] == [5.0] and ex.updates[1]["y"][1] == ["b"], (
        "a marker, seen on a zero bar too"
    )
    assert ex.spec()["panels"] == [["A"], ["B"]]
    buttons = ex.plotly_figure()["layout"]["updatemenus"][0][
        "buttons"
    ]  # JupyterLab: Plotly's menu shows the panels
    assert [b["args"][1]["annotations"][0]["text"] for b in buttons] == [
        "<b>jaxpr</b><br>A",
        "<b>jaxpr</b><br>B",
    ]
    assert buttons[1]["args"][1]["title"]["text"].endswith(
        "<sub>variant: b; flops: 5</sub>"
    )
    html = ex.html(include_scripts=False)
    assert '<pre id="' in html and ">A</pre>" in html
    assert "<select" in html and "<details>" in html


def test_grid_marks_the_cell_of_each_row():
    rows = [
        {"strategy": s, "event": e, "compiles": c}
        for s, e, c in [
            ("jit", "weights", 0),
            ("jit", "layer", 1),
            ("eqx", "weights", 0),
            ("eqx", "layer", 1),
        ]
    ]
    ex = explore.grid(
        rows, across="event", down="strategy", value="compiles", title="t"
    )
    assert ex.updates[3] == {"x": [["layer"]], "y": [["eqx"]]}
    assert ex.figure["data"][0]["z"] == [[0.0, 1.0], [0.0, 1.0]]
    assert ex.labels[1] == "jit / layer"
    assert ex.captions[1] == "strategy: jit\nevent: layer\ncompiles: 1", (
        "one column: value a line"
    )


def test_curves_bring_one_forward():
    series = {
        "eager": (np.arange(3), np.array([3.0, 2.0, 1.0])),
        "fast": ([0, 1], [2.0, 0.5]),
    }
    rows = [{"level": "eager", "s": 1.0}, {"level": "fast", "s": 0.1}]
    ex = explore.curves(
        series, rows, key="level", title="t", x_title="it", y_title="loss", start=1
    )
    assert ex.updates[1] == {"opacity": [0.35, 1.0], "line.width": [1.5, 4]}
    assert ex.figure["data"][1]["line"]["width"] == 4


def test_runtime_goes_once_per_page_inside_the_explorer_and_plotly_js_never(
    monkeypatch,
):
    monkeypatch.setitem(core._page, "scripts_sent", False)
    first, _ = explore.slider(ROWS, x="n", ys=["jit ms"], title="a")._repr_mimebundle_()
    second, meta = explore.slider(
        ROWS, x="n", ys=["eager ms"], title="b"
    )._repr_mimebundle_()
    # Quarto 1.10 moves an output holding plotly.js (its licence header) into the page's head
    assert "Plotly, Inc." not in first["text/html"] + second["text/html"]
    assert first["text/html"].startswith('<div class="jitbook-explorer"'), (
        "style and runtime inside it"
    )
    assert "jitbookExplorer = function" in first["text/html"]
    assert "jitbookExplorer = function" not in second["text/html"]
    assert len(second["text/html"]) < 10_000
    assert core.PLOTLY_MIME in second and "text/plain" in second
    assert meta[core.METADATA_KEY]["labels"] == ["1", "10", "100"]


def test_explorer_html_loads_nothing_remote():
    html = explore.slider(ROWS, x="n", ys=["jit ms"], title="t").html(
        include_scripts=False
    )
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", html)


def test_json_cannot_close_its_script():
    ex = explore.picker([{"v": "</script><b>", "f": 1}], key="v", bar="f", title="t")
    html = ex.html(include_scripts=False)
    assert (
        html.count("</script>") == 2
    )  # the data block and the call, nothing from the data


def test_ids_are_stable_across_runs():
    a = explore.slider(ROWS, x="n", ys=["jit ms"], title="t")
    b = explore.slider(ROWS, x="n", ys=["jit ms"], title="t")
    assert a.ident == b.ident and re.fullmatch(r"jitbook-explore-[0-9a-f]{10}", a.ident)


def test_text_equivalent_lists_every_row():
    text = explore.slider(ROWS, x="n", ys=["jit ms"], title="t").text()
    blocks = text.split("\n\n")
    assert (
        blocks[0] == "t"
        and blocks[2] == "n: 10\neager ms: 20\njit ms: 3"
        and len(blocks) == 1 + len(ROWS)
    )


@pytest.mark.parametrize(
    "call, message",
    [
        (
            lambda: explore.slider([], x="n", ys=["a"], title="t"),
            "non-empty list of dicts",
        ),
        (
            lambda: explore.slider({"n": 1}, x="n", ys=["a"], title="t"),
            "non-empty list of dicts",
        ),
        (
            lambda: explore.slider([(1, 2)], x="n", ys=["a"], title="t"),
            "must be a dict",
        ),
        (
            lambda: explore.slider(ROWS, x="size", ys=["jit ms"], title="t"),
            "no column 'size'",
        ),
        (lambda: explore.slider(ROWS, x="n", ys=[], title="t"), "at least one column"),
        (
            lambda: explore.slider(
                [{"n": 1, "a": 1.0}, {"n": 2}], x="n", ys=["a"], title="t"
            ),
            "same columns",
        ),
        (
            lambda: explore.slider([{"n": 1, "a": "fast"}], x="n", ys=["a"], title="t"),
            "finite number",
        ),
        (
            lambda: explore.slider(
                [{"n": 1, "a": float("nan")}], x="n", ys=["a"], title="t"
            ),
            "finite number",
        ),
        (
            lambda: explore.slider(
                [{"n": 1, "a": 1.0}, {"n": 1, "a": 2.0}], x="n", ys=["a"], title="t"
            ),
            "names must differ",
        ),
        (
            lambda: explore.slider(ROWS, x="n", ys=["jit ms"], title="t", start=3),
            "start=3",
        ),
        (
            lambda: explore.picker(
                ROWS, key="n", bar="jit ms", title="t", panels=[{"a": "x"}]
            ),
            "1 panels for 3",
        ),
        (
            lambda: explore.picker(
                ROWS[:1], key="n", bar="jit ms", title="t", panels=[{"a": 1}]
            ),
            "each mapped to text",
        ),
        (
            lambda: explore.grid(
                ROWS + ROWS[:1], across="n", down="n", value="jit ms", title="t"
            ),
            "share a",
        ),
        (
            lambda: explore.grid(
                ROWS, across="n", down="eager ms", value="jit ms", note="ok", title="t"
            ),
            "no column 'ok'",
        ),
        (
            lambda: explore.curves(
                {"b": ([1], [1])},
                [{"k": "a"}],
                key="k",
                title="t",
                x_title="x",
                y_title="y",
            ),
            "named, in order",
        ),
        (
            lambda: explore.curves(
                {"a": ([1, 2], [1])},
                [{"k": "a"}],
                key="k",
                title="t",
                x_title="x",
                y_title="y",
            ),
            "as many x as y",
        ),
    ],
)
def test_bad_input_says_what_to_fix(call, message):
    with pytest.raises((ValueError, TypeError, KeyError), match=re.escape(message)):
        call()


# --- the data each chapter's explorer draws from, measured by the package


def test_size_sweep_rows_and_break_even():
    from jitbook.chapters import why_compile

    rows = why_compile.size_sweep([4, 32], columns=8, min_time=0.0)
    assert [r["rows"] for r in rows] == [4, 32] and rows[1]["elements"] == 256
    for r in rows:
        assert (
            r["compile (ms)"] > 0 and r["op by op (ms)"] > 0 and r["compiled (ms)"] > 0
        )
        assert (
            r["calls to pay off"] in ("never", "no clear saving")
            or r["calls to pay off"] >= 1
        )
    with pytest.raises(ValueError, match="positive array heights"):
        why_compile.size_sweep([0])


def test_loop_explorer_python_loop_grows_structured_loops_do_not():
    import jax.numpy as jnp

    from jitbook.chapters import tracing

    rows, panels = tracing.loop_explorer([1, 4], jnp.ones(3))
    assert [r["Python loop: equations"] for r in rows] == [
        2,
        8,
    ]  # sin and add per iteration
    assert rows[0]["fori_loop: equations"] == rows[1]["fori_loop: equations"]
    assert rows[0]["scan: equations"] == rows[1]["scan: equations"]
    assert (
        panels[1]["Python loop jaxpr"].count("sin") == 4
        and panels[1]["fori_loop jaxpr"].count("sin") == 1
    )


def test_variant_explorer_closure_constant_is_in_the_stablehlo():
    from jitbook.chapters import jaxprs

    rows, panels = jaxprs.variant_explorer(16)
    by = {r["variant"]: r for r in rows}
    assert by["with_closure"]["equations"] == by["with_argument"]["equations"]
    assert (
        by["with_closure"]["StableHLO characters"]
        > by["with_argument"]["StableHLO characters"] + 16 * 16 * 8
    )
    assert (
        by["update_f32_constant, float16"]["equations"]
        > by["update, float16"]["equations"]
    )  # the converts
    assert all(
        len(line) <= display.COLUMN
        for p in panels
        for line in p["StableHLO (excerpt)"].splitlines()
    )


def test_call_story_compiles_for_each_new_key_part_and_explains():
    from jitbook.chapters import recompilation_explore

    rows, panels = recompilation_explore.call_story()
    compiled = {r["what changed"]: r["compiled"] for r in rows}
    assert compiled["first call: f32[8], n=2"] == 1
    assert (
        compiled["new values, same shape"] == 0
        and compiled["back to the first call"] == 0
    )
    assert (
        compiled["new shape: f32[9]"]
        == compiled["new dtype: i32[8]"]
        == compiled["new static value: n=3"]
        == 1
    )
    assert (
        compiled["a Python float: weak f32[]"]
        == compiled["jnp.float32: strong f32[]"]
        == 1
    )
    assert compiled["config: matmul precision"] == 1
    why = [next(iter(p.values())) for p in panels]
    assert (
        "f32[9] and before f32[8]" in why[2]
        and "jax_default_matmul_precision" in why[8]
    )
    assert not any(re.search(r"id=\d|\s/[\w.-]+/", w) for w in why), (
        "build paths or object ids in JAX's messages"
    )
    assert rows[-1]["compiles so far"] == sum(compiled.values())


def test_event_grid_matches_the_strategies_behaviour():
    from jitbook.chapters import methods

    rows = methods.event_grid(methods.STRATEGIES[:1] + methods.STRATEGIES[5:6])
    cell = {(r["strategy"][:2], r["event"]): r for r in rows}
    assert (
        cell[("1.", "new weights")]["right result"] == "no: stale"
        and cell[("1.", "new weights")]["compiles"] == 0
    )
    assert (
        cell[("4.", "new weights")]["right result"] == "yes"
        and cell[("4.", "new layer")]["compiles"] == 0
    )
    assert cell[("4.", "new activation")]["compiles"] >= 1
    with pytest.raises(TypeError, match="Strategy"):
        methods.event_grid(["jit"])


def test_level_curves_reach_and_bad_input():
    from jitbook.chapters.pln.levels import FitResult, level_curves

    fast = FitResult(np.array([100.0, 10.0, 2.0, 1.0]), None, None, None)
    slow = FitResult(np.array([100.0, 50.0]), None, None, None)
    series, rows = level_curves(
        {"fast": fast, "slow": slow},
        {"fast": 2.0, "slow": 1.0},
        share=0.9,
        compile_s={"fast": 0.5},
    )
    assert list(series) == ["fast", "slow"]
    assert list(series["fast"][0]) == [0.002, 0.004, 0.006, 0.008], (
        "seconds, not iterations"
    )
    assert list(series["slow"][0]) == [0.001, 0.002], (
        "each level's own time per iteration"
    )
    assert (
        rows[0]["iterations to 90% of the way down"] == 2
        and rows[0]["seconds to get there, warm"] == 2 * 2.0 / 1e3
    )
    assert rows[0]["compile s of a first fit"] == 0.5  # beside the warm seconds
    assert rows[1]["compile s of a first fit"] == "not measured"
    assert rows[1]["iterations to 90% of the way down"] == "not in 2"
    with pytest.raises(ValueError, match="no time per iteration"):
        level_curves({"fast": fast}, {})
    with pytest.raises(ValueError, match="between 0 and 1"):
        level_curves({"fast": fast}, {"fast": 1.0}, share=1.5)


def test_axes_read_as_counts_powers_of_ten_and_no_si_suffixes():
    from jitbook import explore

    counts = explore.slider(
        [{"n": n, "compiles": c} for n, c in [(1, 0), (10, 1), (100, 3)]],
        x="n",
        ys=["compiles"],
        title="t",
        log_x=True,
    )
    layout = counts.figure["layout"]
    assert layout["yaxis"]["tickformat"] == ",d" and layout["yaxis"]["dtick"] >= 1, (
        "whole counts"
    )
    assert layout["yaxis"]["zeroline"] is True, "zero is drawn"
    assert layout["xaxis"]["tickvals"] == [1, 10, 100], (
        "a few well-spread choices: a tick at each"
    )
    many = explore.curves(
        {"c": (list(range(1, 1001)), [1.0] * 1000)},
        [{"k": "c"}],
        key="k",
        title="t",
        x_title="i",
        y_title="y",
        log_x=True,
    ).figure["layout"]
    assert many["xaxis"]["tickvals"] == [1, 10, 100, 1000], (
        "a log axis over decades ticks at powers of ten"
    )
    assert many["xaxis"]["ticktext"] == ["1", "10", "100", "1,000"], (
        "written as the tables write them"
    )
    ratios = explore.slider(
        [{"n": n, "ratio": r} for n, r in [(1, 0.0001), (2, 0.5)]],
        x="n",
        ys=["ratio"],
        title="t",
    )
    assert ratios.figure["layout"]["yaxis"]["tickformat"] == ",~r", (
        "fractions keep their decimals, no SI suffix"
    )


def test_log_axes_get_several_ticks_and_close_values_do_not_overprint():
    from jitbook.explore.axes import axis, log_ticks

    narrow = log_ticks(20.0, 90.0)
    assert len(narrow) >= 3 and all(20 <= t <= 90 for t in narrow), (
        "a log axis inside one decade"
    )
    assert log_ticks(130.0, 330.0) == [150.0, 200.0, 250.0, 300.0], (
        "even a third of a decade"
    )
    close = axis([1000, 1024, 1100, 4096, 8192], log=True)
    assert 1024 not in close["tickvals"] or 1000 not in close["tickvals"], (
        "neighbours 2% apart"
    )
    assert "1.02e+03" not in close["ticktext"]
    assert axis([1024.0, 4096.0, 16384.0], log=True)["ticktext"] == [
        "1,024",
        "4,096",
        "16,384",
    ]


def test_a_grid_with_a_cell_some_row_lacks_prints_for_the_pdf():
    """The PDF draws each explorer with matplotlib: a grid whose rows have different
    columns (a call only one experiment made) leaves that cell blank instead of failing."""
    from jitbook.explore import printed

    rows = [
        {"experiment": "a", "call": "call 1", "compiles": 1},
        {"experiment": "a", "call": "call 2", "compiles": 0},
        {"experiment": "b", "call": "call 1", "compiles": 1},
    ]
    grid = explore.grid(
        rows, across="call", down="experiment", value="compiles", title="t"
    )
    (heat,) = [t for t in grid.figure["data"] if t.get("type") == "heatmap"]
    assert None in sum(heat["z"], [])
    assert printed.svg(grid.figure).lstrip().startswith("<?xml")


def test_missing_values_and_section_ids_read_as_words(monkeypatch):
    monkeypatch.setattr(
        core, "_titles", lambda: {"sec-tracing-loops": "Python loops unroll"}
    )
    assert core.fmt(None) == "—"
    assert core.titled("see sec-tracing-loops.") == "see “Python loops unroll”."
    assert core.titled("sec-unknown-x stays") == "sec-unknown-x stays"


def test_the_vendored_plotly_is_pinned_and_a_third_of_the_full_bundle():
    import hashlib
    from importlib import resources

    from jitbook.explore import page as explore_page

    data = explore_page.plotly_path().read_bytes()
    assert hashlib.sha256(data).hexdigest() == explore_page.PLOTLY_SHA256
    full = (
        resources.files("plotly").joinpath("package_data", "plotly.min.js").read_bytes()
    )
    assert len(data) <= len(full) / 3, f"{len(data):,} bytes against {len(full):,}"
    traces = {"scatter", "bar", "heatmap"}
    assert all(f'"{t}"' in explore_page.plotly_js() for t in traces)
