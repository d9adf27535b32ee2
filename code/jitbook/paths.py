"""Where the book's checkout is: the one home of the repository root."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]  # code/jitbook/paths.py -> the checkout
CODE = ROOT / "code"  # what a fresh process puts on PYTHONPATH to import jitbook
DATA = ROOT / "data"  # stored measurements: the ledger, peers, GPU runs, oaks
