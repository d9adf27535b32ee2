"""The book's machinery for pages: the chapter harness and Quarto's post-render step
(``book``), the line under each title saying which JAX ran it (``executed``), and the
explorers (``explore``). Readers never import this; ``python -m jitbook.site`` runs it.
"""
