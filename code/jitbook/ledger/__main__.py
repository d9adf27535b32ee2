"""``python -m jitbook.ledger``: see the package docstring."""

import sys

from jitbook.ledger.cli import main

sys.exit(main())
