"""The claim ledger: every claim test of the book, run on chosen JAX releases.

A claim test carries ``@pytest.mark.claim("sec-...")`` or, when a sentence of the
prose says what it asserts, ``@pytest.mark.claim("sec-...", "clm-...")``.
``python -m jitbook.ledger`` builds one venv per JAX release (with the Equinox and optax
PyPI had the day that JAX came out), runs only the claim tests there, and writes
``data/ledger.json``: per claim and release, *holds*, *fails* (with a one-line reason)
or *n/a* (the API does not exist yet). The package is also the pytest plugin that
records outcomes (``plugin``); ``venvs`` makes and runs the releases, ``data`` reads
and writes the file, ``page`` makes the appendices' tables, ``cli`` is the command.
Taught in Ledger of claims: every claim on every release, How the ledger is made.
"""

from importlib import metadata as metadata

from jitbook.ledger.cli import canary as canary
from jitbook.ledger.cli import main as main
from jitbook.ledger.cli import make as make
from jitbook.ledger.cli import merge as merge
from jitbook.ledger.cli import missing as missing
from jitbook.ledger.cli import parser as parser
from jitbook.ledger.data import LEDGER as LEDGER
from jitbook.ledger.data import ROOT as ROOT
from jitbook.ledger.data import STATUSES as STATUSES
from jitbook.ledger.data import load as load
from jitbook.ledger.data import lock_disagreements as lock_disagreements
from jitbook.ledger.data import locked_jax as locked_jax
from jitbook.ledger.data import machine as machine
from jitbook.ledger.data import save as save
from jitbook.ledger.data import title as title
from jitbook.ledger.page import MARKS as MARKS
from jitbook.ledger.page import by_chapter as by_chapter
from jitbook.ledger.page import changed as changed
from jitbook.ledger.page import changes_table as changes_table
from jitbook.ledger.page import explorer_rows as explorer_rows
from jitbook.ledger.page import history as history
from jitbook.ledger.page import matrix as matrix
from jitbook.ledger.page import matrix_rows as matrix_rows
from jitbook.ledger.page import release_rows as release_rows
from jitbook.ledger.page import releases as releases
from jitbook.ledger.page import sections as sections
from jitbook.ledger.plugin import _claim_section as _claim_section
from jitbook.ledger.plugin import classify as classify
from jitbook.ledger.plugin import one_line as one_line
from jitbook.ledger.plugin import outcome as outcome
from jitbook.ledger.plugin import (
    pytest_collection_modifyitems as pytest_collection_modifyitems,
)
from jitbook.ledger.plugin import pytest_collectreport as pytest_collectreport
from jitbook.ledger.plugin import pytest_configure as pytest_configure
from jitbook.ledger.plugin import pytest_runtest_logreport as pytest_runtest_logreport
from jitbook.ledger.plugin import pytest_sessionfinish as pytest_sessionfinish
from jitbook.ledger.venvs import CACHE as CACHE
from jitbook.ledger.venvs import EXTRAS as EXTRAS
from jitbook.ledger.venvs import RELEASES as RELEASES
from jitbook.ledger.venvs import _unimportable as _unimportable
from jitbook.ledger.venvs import collect as collect
from jitbook.ledger.venvs import install as install
from jitbook.ledger.venvs import run_release as run_release
