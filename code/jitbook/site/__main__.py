"""``python -m jitbook.site``: run chapters, write the site's downloads (``book``)."""

import sys

from jitbook.site.book import main

sys.exit(main())
