"""``python -m jitbook.bench``: see the package docstring."""

import sys

from jitbook.bench import main

main(sys.argv[1:])
