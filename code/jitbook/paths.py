"""Where the book's checkout is: the one home of the repository root."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # code/jitbook/paths.py -> the checkout
CODE = ROOT / "code"  # what a fresh process puts on PYTHONPATH to import jitbook
# Stored measurements (the ledger, peers, GPU runs, oaks) are package data: in a
# checkout code/jitbook/data links to data/, and a wheel carries the folder itself.
DATA = Path(__file__).parent / "data"
