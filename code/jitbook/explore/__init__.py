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
the CDN require.js and jQuery that Quarto adds are there or stripped. The site loads
one cartesian plotly.js bundle (1.5 MB, ``page``) with ``defer``.

An explorer's HTML has native controls (a range input or a select: keyboard and screen
readers work for free), a live caption, text panels and a folded table, its text
equivalent; its JavaScript only picks a precomputed choice and calls ``Plotly.restyle``.
Nothing recomputes JAX in JavaScript.

The seams: ``kinds`` builds the four kinds from rows; ``core`` holds the
explorer and its three renderings; ``axes`` the ticks; ``page`` what
the page shares (plotly.js, the runtime, the style); ``printed`` the PDF's figure.
Pages import it as ``from jitbook import explore``.
"""

from jitbook.explore.kinds import curves, grid, picker, slider

__all__ = ["curves", "grid", "picker", "slider"]
