"""``python -m jitbook.classroom``: see the package docstring."""

import sys

from jitbook.classroom.cli import main

sys.exit(main())
