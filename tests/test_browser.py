"""Every chapter's explorers, moved by hand in headless Chromium, show the values the notebook computed, offline.

Each chapter is executed (small sizes), exported to HTML by nbconvert with no CDN script, opened from
``file://``; every request that is not ``file:`` or ``data:`` is aborted and recorded, and must not exist.
The notebooks are those tests/test_chapters.py executed this session (the ``executed`` fixture).

Where ``quarto`` is on PATH, the last tests render the book once and read the built site as a reader
does, served over HTTP, at 1280 px and at 390 px: no sideways scrolling, light pages, nothing from
outside, a clean build.
"""

import io
import json
import re
import shutil
import sys
from pathlib import Path

import nbformat
import pytest
from nbconvert import HTMLExporter

import processes
from jitbook import explore
from jitbook.explore.core import METADATA_KEY
from jitbook.explore.page import plotly_js
from jitbook.site import harness, post_render, talk

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
# nbconvert's lab template with its CDN scripts (require.js, MathJax, mermaid, widgets) left out.
OFFLINE_TEMPLATE = """{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{%- block html_head_js_mathjax -%}{%- endblock html_head_js_mathjax -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block jupyter_widgets -%}{%- endblock jupyter_widgets -%}
"""


def chapters() -> list[Path]:
    """The book's chapters: every page in a part, not the preface or the appendices."""
    appendices = {
        harness.ROOT / p for p in harness.book_config()["book"].get("appendices", [])
    }
    return [
        p
        for p in harness.chapter_files()
        if p.parent.name == "chapters" and p not in appendices
    ]


def explorer_specs(nb: nbformat.NotebookNode) -> list[dict]:
    """What the notebook's explorers hold: the data the browser must show, read from the outputs' metadata."""
    return [
        out["metadata"][METADATA_KEY]
        for cell in nb.cells
        if cell.cell_type == "code"
        for out in cell.get("outputs", [])
        if METADATA_KEY in out.get("metadata", {})
    ]


def export(nb: nbformat.NotebookNode, folder: Path) -> Path:
    template = folder / "offline.html.j2"
    template.write_text(OFFLINE_TEMPLATE)
    exporter = HTMLExporter(template_file=str(template))
    body, _ = exporter.from_notebook_node(nb)
    # As the site does: the page points at one shared plotly.js (downloads carry none).
    lib = folder / post_render.PLOTLY_LIB
    lib.parent.mkdir(parents=True, exist_ok=True)
    lib.write_text(plotly_js(), encoding="utf-8")
    body = body.replace(
        "<head>", f'<head><script src="{post_render.PLOTLY_LIB}"></script>', 1
    )
    path = folder / "page.html"
    path.write_text(body, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright for Python is not installed"
    )
    if not Path(CHROMIUM).exists():
        pytest.skip(
            "no chromium on this machine (Debian's `chromium` package; .ci/run installs it)"
        )
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            yield browser
        finally:
            browser.close()


def open_offline(browser, path: Path):
    """Open ``path`` with every non-local request aborted; return the page, the remote URLs asked for, the JS errors."""
    page = browser.new_page()
    remote, errors = [], []

    def route(r):
        if r.request.url.startswith(("file:", "data:")):
            r.continue_()
        else:
            remote.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(path.as_uri(), wait_until="load")
    return page, remote, errors


def plot_state(page, spec: dict) -> dict:
    """The plotted value of each restyled property of each restyled trace, read from the live Plotly figure."""
    return page.evaluate(
        """([id, traces, keys]) => {
        const gd = document.getElementById(id + "-plot");
        const out = {};
        for (const key of keys) {
            out[key] = traces.map(t => key.split(".").reduce((node, name) => node == null ? node : node[name], gd.data[t]));
        }
        return out;
    }""",
        [spec["id"], spec["traces"], list(spec["updates"][0])],
    )


def assert_shows(page, spec: dict, i: int) -> None:
    root = page.locator(f"#{spec['id']}")
    assert root.get_attribute("data-choice") == str(i), (
        f"{spec['title']}: the control did not move to choice {i}"
    )
    assert page.locator(f"#{spec['id']}-caption").text_content() == spec["captions"][i]
    for k, text in enumerate(spec["panels"][i]):
        assert page.locator(f"#{spec['id']}-panel-{k}").text_content() == text
    # JSON round trip: the page holds numbers as JSON numbers, the spec as Python floats.
    assert json.loads(json.dumps(plot_state(page, spec))) == json.loads(
        json.dumps(spec["updates"][i])
    )


def move(page, spec: dict) -> list[int]:
    """Move the control by keyboard and by pointer; check each position; return the choices visited."""
    control = page.locator(f"#{spec['id']}-control")
    last = len(spec["labels"]) - 1
    visited = []
    control.focus()
    if spec["control"] == "slider":
        for key, choice in [("End", last), ("Home", 0), ("ArrowRight", min(1, last))]:
            page.keyboard.press(key)
            assert_shows(page, spec, choice)
            visited.append(choice)
        box = control.bounding_box()
        page.mouse.click(box["x"] + box["width"] - 2, box["y"] + box["height"] / 2)
        assert_shows(page, spec, last)
        visited.append(last)
    else:
        page.keyboard.press(
            "End" if last else "Home"
        )  # a closed select moves its choice with the keys
        assert_shows(page, spec, last)
        visited.append(last)
        for choice in range(last + 1):
            control.select_option(str(choice))  # what a pointer pick does
            assert_shows(page, spec, choice)
            visited.append(choice)
    return visited


@pytest.mark.chapter
@pytest.mark.parametrize("page_path", chapters(), ids=lambda p: p.name)
def test_explorers_move_and_show_the_computed_values_offline(
    page_path, browser, executed, tmp_path
):
    nb = executed(page_path)
    specs = explorer_specs(nb)
    assert specs, (
        f"{page_path.name} has no explorer: add one with jitbook.explore before its Exercises"
    )
    page, remote, errors = open_offline(browser, export(nb, tmp_path))
    assert page.evaluate("typeof window.Plotly") == "object", (
        "plotly.js did not load from the page itself"
    )
    for spec in specs:
        page.wait_for_selector(f"#{spec['id']}-plot .main-svg", state="attached")
        assert_shows(page, spec, spec["start"])
        visited = move(page, spec)
        assert set(visited) >= {0, len(spec["labels"]) - 1}
    assert not errors, f"JavaScript errors on {page_path.name}: {errors}"
    assert not remote, f"{page_path.name} asked the network for {remote}"
    page.close()


def test_a_remote_request_would_be_caught(browser, tmp_path):
    """The offline check can fail: a page that asks for a CDN script is recorded as asking."""
    path = tmp_path / "remote.html"
    path.write_text(
        '<!DOCTYPE html><html><head><script src="https://cdn.example.invalid/x.js"></script></head></html>'
    )
    page, remote, _ = open_offline(browser, path)
    assert remote == ["https://cdn.example.invalid/x.js"]
    page.close()


def test_every_kind_of_explorer_works_on_one_page(browser, tmp_path):
    """Slider, picker with panels, grid and curves, in one executed notebook: the runtime sent once, all move."""
    from nbclient import NotebookClient

    cells = [
        "import jitbook\nfrom jitbook import explore",
        "explore.slider([{'n': n, 'a': n * 1.5, 'b': n ** 0.5} for n in (1, 2, 4, 8)], x='n', ys=['a', 'b'], "
        "title='slider', log_x=True)",
        "explore.picker([{'v': 'sin', 'flops': 3}, {'v': 'cos', 'flops': 5}], key='v', bar='flops', title='picker', "
        "panels=[{'jaxpr': 'sin a', 'hlo': 'stablehlo.sine'}, {'jaxpr': 'cos a', 'hlo': 'stablehlo.cosine'}], start=1)",
        "explore.grid([{'s': s, 'e': e, 'c': i} for i, (s, e) in enumerate([(s, e) for s in 'xy' for e in 'pq'])], "
        "across='e', down='s', value='c', title='grid')",
        "explore.curves({'one': ([0, 1, 2], [3, 2, 1]), 'two': ([0, 1], [2, 1])}, [{'k': 'one'}, {'k': 'two'}], "
        "key='k', title='curves', x_title='i', y_title='y', log_y=True)",
    ]
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    with harness.kernel_manager() as km:
        NotebookClient(
            nb, km=km, extra_arguments=harness.QUIET_KERNEL, timeout=120
        ).execute(cleanup_kc=True)
    specs = explorer_specs(nb)
    assert [s["title"] for s in specs] == ["slider", "picker", "grid", "curves"]
    html = [
        o["data"]["text/html"]
        for c in nb.cells
        for o in c.outputs
        if "text/html" in o.get("data", {})
    ]
    assert sum("jitbookExplorer = function" in h for h in html) == 1, (
        "the runtime once a page"
    )
    assert not any("Plotly, Inc." in h for h in html), (
        "plotly.js comes from the site, not the outputs"
    )
    page, remote, errors = open_offline(browser, export(nb, tmp_path))
    for spec in specs:
        page.wait_for_selector(f"#{spec['id']}-plot .main-svg", state="attached")
        assert_shows(page, spec, spec["start"])
        move(page, spec)
    assert not errors and not remote, (errors, remote)
    page.close()


def test_jupyterlab_draws_an_untrusted_explorer_with_plotlys_own_menu(
    browser, tmp_path
):
    """In JupyterLab, an executed notebook nobody trusted: the Plotly MIME type renders, and its menu moves the choice."""
    import socket
    import subprocess
    import sys
    import time

    from nbclient import NotebookClient

    cell = (
        "import jitbook\nfrom jitbook import explore\nexplore.picker([{'v': 'sin', 'flops': 3}, {'v': 'cos', 'flops': 5}], "
        "key='v', bar='flops', title='picker', panels=[{'jaxpr': 'sin a'}, {'jaxpr': 'cos a'}])"
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(cell)])
    nb.metadata["kernelspec"] = {
        "name": "python3",
        "display_name": "Python 3",
        "language": "python",
    }
    with harness.kernel_manager() as km:
        NotebookClient(
            nb, km=km, extra_arguments=harness.QUIET_KERNEL, timeout=120
        ).execute(cleanup_kc=True)
    nbformat.write(
        nb, tmp_path / "explorer.ipynb"
    )  # written, not signed: JupyterLab treats it as untrusted
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # JupyterLab can hang on shutdown: running() stops it and its kernels for sure, inside this test.
    lab = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--allow-root",
        "--no-browser",
        f"--port={port}",
        "--ServerApp.token=explore",
        f"--ServerApp.root_dir={tmp_path}",
        "--LabApp.news_url=",
        "--ServerApp.ip=127.0.0.1",
    ]
    with processes.running(lab, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL):
        page = browser.new_page()
        local = f"http://127.0.0.1:{port}"
        remote = []

        def route(r):
            if r.request.url.startswith((local, "data:", "blob:")):
                r.continue_()
            else:
                remote.append(r.request.url)
                r.abort()

        page.route("**/*", route)
        deadline = time.monotonic() + 60
        while True:
            try:
                page.goto(f"{local}/lab/tree/explorer.ipynb?token=explore")
                break
            except Exception:  # noqa: BLE001 - the server is still starting
                if time.monotonic() > deadline:
                    raise
                time.sleep(1)
        plot = page.locator(".jp-RenderedPlotly")
        page.wait_for_selector(".jp-RenderedPlotly .main-svg", timeout=90_000)
        assert (
            page.locator(".jp-RenderedPlotly .annotation-text").first.text_content()
            == "jaxprsin a"
        )
        plot.locator(".updatemenu-header-group").first.click()
        plot.locator(".updatemenu-item-text", has_text="cos").first.click()
        page.wait_for_function(
            "document.querySelector('.jp-RenderedPlotly .annotation-text').textContent === 'jaxprcos a'"
        )
        assert not remote, f"JupyterLab asked the network for {remote}"
        page.close()


# ---- the rendered site, as a reader sees it (needs Quarto) ------------------------------------------------

PAGE_LIMIT = 300_000  # bytes of HTML per page
SITE_LIMIT = 15_000_000  # bytes of the whole site, notebooks included
WIDTHS = (1280, 390)


class Tee(io.StringIO):
    """Keeps what is written and says it on the terminal too, past pytest's capture: a render of
    the whole book takes many minutes, and a silent test looks hung."""

    def __init__(self, config: pytest.Config):
        super().__init__()
        self.capture = config.pluginmanager.getplugin("capturemanager")

    def write(self, text: str) -> int:
        with self.capture.global_and_fixture_disabled():
            sys.stdout.write(text)
            sys.stdout.flush()
        return super().write(text)


@pytest.fixture(scope="module")
def site(tmp_path_factory, pytestconfig):
    """The book rendered once by ``quarto render`` as a reader would type it (no QUARTO_PYTHON: the
    project's ``_environment`` names the venv), with what it printed and ``git status`` around it.
    It renders into a folder of its own: the reader's ``_book/`` and ``_build/notebooks/`` stay."""
    import subprocess

    quarto = shutil.which("quarto")
    if quarto is None:
        pytest.skip(
            "quarto is not on PATH (`make quarto`, or conda-forge's quarto); the executed notebooks "
            "the site is built from are checked in tests/test_site.py without it"
        )
    env = {k: v for k, v in __import__("os").environ.items() if k != "QUARTO_PYTHON"}
    status = ["git", "status", "--porcelain", "--untracked-files=all"]
    before = subprocess.run(
        status, cwd=harness.ROOT, capture_output=True, text=True
    ).stdout
    out = tmp_path_factory.mktemp("site") / "_book"
    log = Tee(pytestconfig)
    log.write(
        f"\nquarto render into {out} (each line stamped with the time since it started):\n"
    )
    code = talk.stamped(
        [quarto, "render", "--to", "html", "--output-dir", str(out)],
        out=log,
        cwd=harness.ROOT,
        env=env,
    )
    after = subprocess.run(
        status, cwd=harness.ROOT, capture_output=True, text=True
    ).stdout
    assert code == 0, f"quarto render failed:\n{log.getvalue()[-4000:]}"
    text = re.sub(
        r"^\[\d+:\d\d\] (\.\.\. still running .*\n)?", "", log.getvalue(), flags=re.M
    )
    return {"dir": out, "log": text, "before": before, "after": after}


def test_quarto_builds_an_offline_site_with_every_download(site):
    out = site["dir"]
    for page in harness.chapter_pages():
        html = (out / "chapters" / f"{page.stem}.html").read_text()
        assert f'href="../notebooks/{page.stem}.ipynb"' in html
        assert (out / "notebooks" / f"{page.stem}.ipynb").exists(), (
            f"{page.name}: its download is missing"
        )
    for html in out.rglob("*.html"):
        assert post_render.remote_loads(html.read_text()) == [], (
            f"{html.relative_to(out)} loads remote resources"
        )
    search = (out / "search.json").read_text()
    solutions = [
        line.strip()
        for page in harness.chapter_pages()
        for cell in harness.to_notebook(page).cells
        if "### BEGIN SOLUTION" in cell.source
        # each solution's first line of its own (a decorator such as @jax.jit is in prose too)
        for line in [
            text
            for text in cell.source.split("### BEGIN SOLUTION")[1].splitlines()[1:]
            if text.strip() and not text.strip().startswith(("@", "#"))
        ][:1]
    ]
    assert solutions, "the chapters' exercises have solution cells"
    leaked = [line for line in solutions if json.dumps(line)[1:-1] in search]
    assert not leaked, f"solution code in the site's search index: {leaked}"


def test_the_build_prints_no_warning_and_leaves_the_checkout_as_it_was(site):
    warnings = [
        line
        for line in site["log"].splitlines()
        if "WARN" in line or "warning" in line.lower()
    ]
    assert not warnings, f"quarto render printed warnings: {warnings[:10]}"
    assert site["after"] == site["before"], (
        "the build changed the checkout (git status differs)"
    )


def test_pages_are_light_and_share_one_plotly(site):
    out = site["dir"]
    heavy = {
        str(p.relative_to(out)): p.stat().st_size
        for p in out.rglob("*.html")
        if p.stat().st_size > PAGE_LIMIT
    }
    assert not heavy, f"pages over {PAGE_LIMIT:,} bytes of HTML: {heavy}"
    total = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    assert total <= SITE_LIMIT, f"the site weighs {total:,} bytes, over {SITE_LIMIT:,}"
    assert (out / post_render.PLOTLY_LIB).exists(), (
        "the explorers' pages need the site's one plotly.js"
    )


@pytest.fixture(scope="module")
def served(site):
    """The site on an HTTP server on this machine, as `make serve` serves it."""
    import functools
    import http.server
    import threading

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):  # the test reports what matters
            pass

    handler = functools.partial(Quiet, directory=str(site["dir"]))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


READ_PAGE = """() => {
  const doc = document.documentElement;
  const code = [...document.querySelectorAll("main pre")].filter(p => p.offsetParent !== null)
    .map(p => {
      const lines = p.textContent.split("\\n").map(l => l.length);
      return {over: p.scrollWidth - p.clientWidth, widest: Math.max(0, ...lines)};
    });
  return {pageWidth: doc.scrollWidth, viewport: window.innerWidth,
          scrolling: code.filter(c => c.over > 1).length,
          widest: Math.max(0, ...code.map(c => c.widest))};
}"""


def read_served(browser, base: str, path: str, width: int) -> dict:
    """One page of the served site at ``width`` px: its width, its code blocks, what it asked
    for outside ``base`` (aborted) and its JavaScript errors."""
    page = browser.new_page(viewport={"width": width, "height": 900})
    remote, errors = [], []

    def route(r):
        if r.request.url.startswith((base, "data:", "blob:")):
            r.continue_()
        else:
            remote.append(r.request.url)
            r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda err: errors.append(str(err)))
    page.goto(f"{base}/{path}", wait_until="load")
    seen = page.evaluate(READ_PAGE)
    page.close()
    return {**seen, "remote": remote, "errors": errors}


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_fits_the_screen_and_no_line_scrolls(site, served, browser, width):
    """At 1280 px and at 390 px no code or output scrolls sideways (long lines wrap, with a hanging
    indent) and no page is wider than the screen."""
    problems = []
    for html in sorted(site["dir"].rglob("*.html")):
        path = html.relative_to(site["dir"]).as_posix()
        seen = read_served(browser, served, path, width)
        if seen["pageWidth"] > seen["viewport"]:
            problems.append(f"{path}: {seen['pageWidth']} px wide at {width} px")
        if seen["scrolling"]:
            problems.append(
                f"{path}: {seen['scrolling']} code blocks scroll sideways, the widest line "
                f"{seen['widest']} characters (the column holds 88)"
            )
        if seen["remote"] or seen["errors"]:
            problems.append(
                f"{path}: asked the network for {seen['remote']}, JavaScript errors {seen['errors']}"
            )
    assert not problems, problems


MOST_SCREENS = 25  # a chapter page at 1280 x 800: a longer one splits along a seam a reader knows (as
# tracing and control-flow), or folds what is reference (filters/fold.lua)


def screens(browser, base: str, path: str) -> float:
    """How many 1280 x 800 screens a served page is tall, with what is folded left folded."""
    page = browser.new_page(viewport={"width": 1280, "height": 800})
    page.goto(f"{base}/{path}", wait_until="load")
    height = page.evaluate("document.documentElement.scrollHeight")
    page.close()
    return height / 800


@pytest.mark.parametrize("qmd", harness.chapter_files(), ids=lambda p: p.name)
def test_no_page_is_longer_than_25_screens_at_1280_px(site, served, browser, qmd):
    """Measured on the tests' small sizes: full-size tables and listings are as long."""
    path = qmd.relative_to(harness.ROOT).with_suffix(".html").as_posix()
    tall = screens(browser, served, path)
    assert tall <= MOST_SCREENS, (
        f"{path}: {tall:.1f} screens at 1280 x 800, over {MOST_SCREENS}"
    )


@pytest.mark.parametrize("width", [1280, 390])
def test_a_claim_mark_opens_its_folded_evidence_in_view_and_back_lands_on_the_sentence(
    site, served, browser, width
):
    """The path a reader checks a claim by: a chapter's last mark lands on its evidence in the
    Claims appendix, its chapter's fold opened and the block in the viewport with the figure its
    test measured; "back" lands on the sentence, in view."""
    page = browser.new_page(viewport={"width": width, "height": 800})
    page.goto(f"{served}/chapters/pln-fast.html", wait_until="load")
    mark = page.locator("a.claim-mark").last
    evidence_id = mark.get_attribute("href").split("#", 1)[1]
    mark.click()
    page.wait_for_url(f"**/claims.html#{evidence_id}")
    evidence = page.locator(f"[id='{evidence_id}']")
    evidence.wait_for(state="visible")
    landed = evidence.bounding_box()
    assert 0 <= landed["y"] < 800, f"{evidence_id} landed at y = {landed['y']}"
    assert "Measured:" in evidence.inner_text()
    back = evidence.locator("a", has_text="back")
    sentence_id = back.get_attribute("href").split("#", 1)[1]
    back.click()
    page.wait_for_url(f"**/pln-fast.html#{sentence_id}")
    sentence = page.locator(f"[id='{sentence_id}']")
    sentence.wait_for(state="visible")
    assert 0 <= sentence.bounding_box()["y"] < 800
    page.close()


# ---- contrast (axe-core), phones, load time ----------------------------------------------------------------


def axe_source() -> str:
    """axe-core's browser script: $AXE_CORE_JS, else npm's axe-core installed in the checkout or globally."""
    import os
    import subprocess

    candidates = [
        os.environ.get("AXE_CORE_JS", ""),
        str(harness.ROOT / "node_modules/axe-core/axe.min.js"),
    ]
    npm = shutil.which("npm")
    if npm:
        root = subprocess.run(
            [npm, "root", "-g"], capture_output=True, text=True
        ).stdout.strip()
        candidates.append(f"{root}/axe-core/axe.min.js")
    found = next((c for c in candidates if c and Path(c).is_file()), None)
    if found is None:
        pytest.skip(
            "axe-core is not installed: `npm install --no-save axe-core` in the checkout, "
            "or set AXE_CORE_JS to its axe.min.js"
        )
    return Path(found).read_text(encoding="utf-8")


# Every folded thing opened first, so the contrast of what a reader unfolds is checked too.
CONTRAST = """async () => {
  document.querySelectorAll("details").forEach(d => { d.open = true; });
  const result = await axe.run(document, {runOnly: {type: "rule", values: ["color-contrast"]}});
  return result.violations.flatMap(v => v.nodes.map(n => n.target.join(" ") + ": " +
    (n.any[0] && n.any[0].data ? n.any[0].data.contrastRatio + ":1" : n.failureSummary)));
}"""


def contrast_pages(site) -> list[str]:
    """The preface, every chapter and appendix page."""
    return sorted(
        p.relative_to(site["dir"]).as_posix()
        for p in site["dir"].rglob("*.html")
        if p.name != "search.html"
    )


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_every_text_has_a_contrast_of_at_least_4_5_to_1(site, served, browser, scheme):
    """axe-core's color-contrast rule (WCAG AA: 4.5:1 for text) on every page, in the colour scheme the
    reader's system asks for (the site follows it), explorers drawn, folded parts opened."""
    axe = axe_source()
    problems = []
    for path in contrast_pages(site):
        context = browser.new_context(
            viewport={"width": 1280, "height": 900}, color_scheme=scheme
        )
        page = context.new_page()
        page.goto(f"{served}/{path}", wait_until="load")
        assert page.evaluate("document.body.classList.contains('quarto-dark')") == (
            scheme == "dark"
        ), f"{path}: the page does not follow the system's {scheme} scheme"
        page.add_script_tag(content=axe)
        problems += [f"{path}: {v}" for v in page.evaluate(CONTRAST)]
        context.close()
    assert not problems, (
        f"{len(problems)} texts under 4.5:1 in {scheme}: {problems[:20]}"
    )


PHONE = """() => {
  const toc = document.querySelector(".jitbook-page-toc");
  const tables = [...document.querySelectorAll("main table")].filter(t => t.scrollWidth > t.clientWidth + 1);
  const cue = tables.filter(t => getComputedStyle(t).backgroundImage.includes("gradient"));
  const copy = [...document.querySelectorAll("div.sourceCode")].filter(d => d.offsetParent !== null)
    .map(d => {
      const button = d.querySelector(".code-copy-button");
      const line = d.querySelector("pre code > span");
      if (!button || !line) return false;
      const b = button.getBoundingClientRect(), l = line.getBoundingClientRect();
      return b.bottom > l.top + 1 && b.top < l.bottom && b.left < l.right;
    });
  return {toc: toc !== null && toc.offsetParent !== null, sections: document.querySelectorAll("main section.level2").length,
          wide: tables.length, cue: cue.length, covered: copy.filter(Boolean).length};
}"""


# Every wide table, explorers' folded ones opened, scrolled to its end: the first cell of each row (what
# the row is) must still be at the table's left edge. The number of tables where it is not.
ROW_LABELS = """() => {
  document.querySelectorAll("main details").forEach(d => { d.open = true; });
  const tables = [...document.querySelectorAll("main table")].filter(t => t.scrollWidth > t.clientWidth + 1);
  return tables.filter(t => {
    t.scrollLeft = t.scrollWidth;
    const left = t.getBoundingClientRect().left;
    return [...t.querySelectorAll("tr > :first-child")].some(c => c.getBoundingClientRect().left < left - 1);
  }).length;
}"""


def test_phones_get_page_contents_table_cues_and_a_copy_button_off_the_code(
    site, served, browser
):
    """At 390 px on a touch screen: the page's contents at its top, a scroll cue on every table wider
    than the screen, its first column in view when it scrolls, and no copy button over the first
    line of code."""
    problems = []
    for html in sorted((site["dir"] / "chapters").glob("*.html")):
        path = html.relative_to(site["dir"]).as_posix()
        context = browser.new_context(
            viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
        )
        page = context.new_page()
        page.goto(f"{served}/{path}", wait_until="load")
        seen = page.evaluate(PHONE)
        lost = page.evaluate(ROW_LABELS)
        context.close()
        if lost:
            problems.append(
                f"{path}: {lost} wide tables lose their first column when scrolled sideways"
            )
        if seen["sections"] >= 2 and not seen["toc"]:
            problems.append(f"{path}: no page contents on a phone")
        if seen["cue"] != seen["wide"]:
            problems.append(
                f"{path}: {seen['wide'] - seen['cue']} of {seen['wide']} wide tables without a cue"
            )
        if seen["covered"]:
            problems.append(
                f"{path}: the copy button covers the first line of {seen['covered']} code blocks"
            )
    assert not problems, problems


# Interactive: the page parsed and its scripts run (DOMContentLoaded), plotly.js asked for only
# then. 0.5 s is the goal on a quiet machine, 2 s what a test on a shared one can hold to.
INTERACTIVE_S = 2.0


def test_explorer_pages_are_interactive_soon_and_plotly_comes_after(
    site, served, browser
):
    slow, shown = [], {}
    for html in sorted((site["dir"] / "chapters").glob("*.html")):
        text = html.read_text()
        if 'class="jitbook-explorer"' not in text:
            continue
        assert post_render.LOADER.format(src=f"../{post_render.PLOTLY_LIB}") in text
        path = html.relative_to(site["dir"]).as_posix()
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        page.goto(f"{served}/{path}", wait_until="load")
        ready = (
            page.evaluate(
                "performance.getEntriesByType('navigation')[0].domContentLoadedEventEnd"
            )
            / 1000
        )
        page.wait_for_selector(".jitbook-explorer-plot .main-svg", timeout=10_000)
        page.close()
        shown[path] = round(ready, 2)
        if ready > INTERACTIVE_S:
            slow.append(path)
    assert shown, "no page with an explorer"
    assert not slow, f"interactive later than {INTERACTIVE_S} s: {shown}"


# The questions a reader types into the search box, and the page that must come first.
QUESTIONS = {
    "why is my function slow": "chapters/why-compile.html",
    "if statement": "chapters/control-flow.html",
    "TracerBoolConversionError": "chapters/symptoms.html",
    "ConcretizationTypeError": "chapters/symptoms.html",
}


def search_first_pages(browser, site: Path, queries: list[str]) -> dict[str, list[str]]:
    """The pages each query finds, best first, ranked as the site's search box ranks them: the
    site's own Fuse.js with the index options of its quarto-search.js, on its search.json, grouped
    by page in the order of each page's best entry (as quarto-search.js groups them)."""
    script = (site / "site_libs" / "quarto-search" / "quarto-search.js").read_text()
    options = re.search(r"const kFuseIndexOptions = (\{.*?\});", script, re.S).group(1)
    page = browser.new_page()
    page.set_content("<html><body></body></html>")
    page.add_script_tag(path=str(site / "site_libs" / "quarto-search" / "fuse.min.js"))
    found = page.evaluate(
        """([docs, options, queries]) => {
            const fuse = new Fuse(docs, eval("(" + options + ")"));
            const out = {};
            for (const q of queries) {
                const pages = [];
                for (const r of fuse.search(q, {limit: 50})) {
                    const href = r.item.href.split("#")[0];
                    if (!pages.includes(href)) pages.push(href);
                }
                out[q] = pages;
            }
            return out;
        }""",
        [json.loads((site / "search.json").read_text()), options, queries],
    )
    page.close()
    return found


def test_search_finds_the_page_that_answers_each_obvious_question_first(site, browser):
    from jitbook.site import search

    docs = json.loads((site["dir"] / "search.json").read_text())
    classes = {  # every error class of the symptom index finds the index first
        d["section"]: "chapters/symptoms.html"
        for d in docs
        if search.ROW in d["objectID"] and search.ERROR_CLASS.match(d["section"])
    }
    assert len(classes) >= 10, (
        f"the symptom index's rows are not in the search: {classes}"
    )
    questions = {**classes, **QUESTIONS}
    found = search_first_pages(browser, site["dir"], list(questions))
    wrong = {q: pages[:3] for q, pages in found.items() if pages[:1] != [questions[q]]}
    assert not wrong, f"these searches find another page first (or nothing): {wrong}"


# Each cell of a heat map explorer at 390 px: its text at least this size, and clear of its neighbours'.
SMALLEST_CELL_TEXT_PX = 11
HEAT_CELLS = """() => {
  const labels = [...document.querySelectorAll(".jitbook-explorer-plot .heatmap-label")]
    .map(t => ({px: parseFloat(getComputedStyle(t).fontSize), box: t.getBoundingClientRect()}));
  const rows = {};
  labels.forEach(l => { (rows[Math.round(l.box.top)] ||= []).push(l.box); });
  const overlaps = Object.values(rows).flatMap(r => r.sort((a, b) => a.left - b.left)
    .slice(1).filter((b, k) => b.left < r[k].right));
  return {count: labels.length, smallest: Math.min(...labels.map(l => l.px)), overlaps: overlaps.length};
}"""


def test_a_heat_map_explorer_reads_on_a_phone(browser, tmp_path):
    """The methods chapter's grid in miniature: long strategy names, notes like "2: no: stale"."""
    strategies = [f"{k}. a strategy with a long name" for k in range(8)]
    events = ["new weights", "new layer", "new activation"]
    rows = [
        {
            "strategy": s,
            "event": e,
            "compiles": (i + j) % 3,
            "right": "yes" if i % 2 else "no: stale",
        }
        for i, s in enumerate(strategies)
        for j, e in enumerate(events)
    ]
    grid = explore.grid(
        rows,
        across="event",
        down="strategy",
        value="compiles",
        note="right",
        title="grid",
    )
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("grid")])
    nb.cells[0].outputs = [
        nbformat.v4.new_output(
            "display_data", data={"text/html": grid.html(True), "text/plain": "grid"}
        )
    ]
    page = browser.new_page(
        viewport={"width": 390, "height": 844}, is_mobile=True, has_touch=True
    )
    page.goto(export(nb, tmp_path).as_uri(), wait_until="load")
    page.wait_for_selector(".jitbook-explorer-plot .heatmap-label", state="attached")
    seen = page.evaluate(HEAT_CELLS)
    page.close()
    assert seen["count"] == len(rows), seen
    assert seen["smallest"] >= SMALLEST_CELL_TEXT_PX, f"cell text shrunk to fit: {seen}"
    assert seen["overlaps"] == 0, f"cells' texts run into each other: {seen}"
