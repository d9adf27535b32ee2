"""Quarto's post-render step (see `post-render` in _quarto.yml): `python -m jitbook.site site`.

Quarto runs it with the project's Python (`QUARTO_PYTHON`, set by `make book`) after every render, so the
site is offline and every chapter's notebook download resolves however the book was built.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "code"))  # this checkout's jitbook, installed or not

from jitbook.site import cli  # noqa: E402

sys.exit(cli.main(["site"]))
