"""``python -m jitbook.classroom``: see the package docstring."""

import sys

from jitbook.classroom import main

sys.exit(main())
