"""Test settings: small problem sizes everywhere, including the kernels that execute chapters."""

import os

os.environ.setdefault("JITBOOK_SMALL", "1")

import jitbook  # noqa: E402,F401  (sets the XLA flag before any test starts JAX)
