"""The book's machinery for pages: the chapter harness (``harness``), Quarto's
post-render step (``post_render``), the reader's notebooks (``downloads``), and the line
under each title saying which JAX ran it (``executed``). Readers never import this;
``python -m jitbook.site`` runs it (see its README).
"""
