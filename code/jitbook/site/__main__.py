"""``python -m jitbook.site``: run chapters, write the site's downloads (``book``)."""

import sys

from jitbook.site.cli import main

sys.exit(main())
