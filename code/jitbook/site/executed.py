"""Which JAX executed a page: every chapter says it, read in the kernel that ran it."""


def executed_on():
    """The JAX that executed the page, read in its kernel: a line under its set-up.

    Taught in Ledger of claims, How the ledger is made.
    """
    import jax

    from jitbook.display import Markdown
    from jitbook.display import version_of as version

    return Markdown(  # short lines: the output column, even once the reference is words
        f"*This page was executed with JAX {jax.__version__} (jaxlib "
        f"{version('jaxlib')}),\nEquinox {version('equinox')} and optax "
        f"{version('optax')}. Which of its claims hold on other releases:\n"
        "@sec-ledger.*"
    )
