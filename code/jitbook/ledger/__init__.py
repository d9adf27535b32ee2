"""The claim ledger: every claim test of the book, run on chosen JAX releases.

A claim test carries ``@pytest.mark.claim("sec-...", "clm-...")``: the section that
shows it and the span of the sentence it asserts, the claim's key in the ledger.
``python -m jitbook.ledger`` builds one venv per JAX release (with the Equinox and optax
PyPI had the day that JAX came out), runs only the claim tests there, and writes
``data/ledger.json``: per claim and release, *holds*, *fails* (JAX behaves otherwise;
with a one-line reason), *n/a* (the API does not exist yet) or *could not run* (the
test's own means failed there), and what the test recorded with ``measured(...)``.
``plugin`` is the pytest plugin that records outcomes; ``venvs`` makes and runs the
releases, ``data`` reads and writes the file, ``page`` makes the appendices' tables,
``cli`` is the command.
Taught in Ledger of claims: every claim on every release, How the ledger is made.
"""

from jitbook.ledger.data import load as load
from jitbook.ledger.page import changed as changed
from jitbook.ledger.page import changes_table as changes_table
from jitbook.ledger.page import explorer_rows as explorer_rows
from jitbook.ledger.page import release_rows as release_rows
from jitbook.ledger.page import releases as releases
from jitbook.ledger.plugin import outcome as outcome
