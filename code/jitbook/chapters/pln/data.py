"""The oaks counts, and the checks that turn bad input into a clear error."""

from __future__ import annotations

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np

from jitbook.arguments import whole_number
from jitbook.paths import DATA

DATA_DIR = DATA / "oaks"


class PLNData(NamedTuple):
    """Counts `Y` (n x p), log offsets `O` (n x p) and covariates `X` (n x d), all
    float32."""

    Y: np.ndarray
    O: np.ndarray
    X: np.ndarray


def _read_csv(name: str) -> np.ndarray:
    path = DATA_DIR / name
    if not path.exists():
        raise FileNotFoundError(
            f"{path} is missing: the oaks CSVs ship in the package "
            "(jitbook/data/oaks, the repository's data/oaks/): reinstall jitbook."
        )
    return np.loadtxt(path, delimiter=",", skiprows=1, dtype=np.float64)


# the 2023 tutorial repeated every row this many times to get a problem worth timing
TUTORIAL_REPEAT = 100


def load_oaks(repeat: int = 1) -> PLNData:
    """Oaks amplicon counts (leaves x taxa), each row repeated `repeat` times; `X` is an
    intercept column.

    `repeat=TUTORIAL_REPEAT` gives the problem size of the 2023 tutorial.
    """
    whole_number(repeat, "repeat", example="1 for the data as measured")
    counts = _read_csv("counts.csv")
    offsets = _read_csv("offsets.csv")
    Y = np.repeat(counts, repeat, axis=0)
    O = np.log(np.repeat(offsets, repeat, axis=0))
    X = np.ones((Y.shape[0], 1))
    return check_data(Y, O, X)


def _as_matrix(name: str, a) -> np.ndarray:
    arr = np.asarray(a)
    if arr.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array (rows = samples), got shape {arr.shape}; "
            "reshape it."
        )
    if not np.issubdtype(arr.dtype, np.number) or np.iscomplexobj(arr):
        raise ValueError(f"{name} must hold real numbers, got dtype {arr.dtype}.")
    if not np.all(np.isfinite(arr)):
        bad = np.argwhere(~np.isfinite(arr))[0]
        raise ValueError(
            f"{name} has a NaN or infinite value (first at row {bad[0]}, column "
            f"{bad[1]}); "
            "drop or impute those entries before fitting."
        )
    return arr


def check_data(Y, O, X) -> PLNData:
    """Validate counts, log offsets and covariates and return them as float32 arrays."""
    Y, O, X = (
        _as_matrix("Y (counts)", Y),
        _as_matrix("O (log offsets)", O),
        _as_matrix("X (covariates)", X),
    )
    if np.any(Y < 0):
        bad = np.argwhere(Y < 0)[0]
        raise ValueError(
            f"Y (counts) must be non-negative, found {Y[tuple(bad)]} at row {bad[0]}, "
            f"column {bad[1]}; "
            "counts are numbers of reads, so check the input for sign errors."
        )
    if np.any(Y != np.round(Y)):
        bad = np.argwhere(Y != np.round(Y))[0]
        raise ValueError(
            f"Y (counts) must be whole numbers, found {Y[tuple(bad)]} at row {bad[0]}, "
            f"column {bad[1]}; "
            "pass raw counts, not normalised or transformed values."
        )
    if O.shape != Y.shape:
        raise ValueError(
            f"O (log offsets) must have the shape of Y {Y.shape}, got {O.shape}; "
            "give one log offset per count (np.log of the sequencing depth, broadcast "
            "over columns)."
        )
    if X.shape[0] != Y.shape[0]:
        raise ValueError(
            f"X (covariates) must have one row per sample, i.e. {Y.shape[0]} rows like "
            f"Y, got {X.shape[0]}; "
            "use np.ones((n, 1)) for an intercept only."
        )
    f32 = np.float32
    return PLNData(Y.astype(f32), O.astype(f32), X.astype(f32))


def device_data(data) -> PLNData:
    """Check `(Y, O, X)` and hand it to JAX as float32 arrays: the one way data enters a
    fit."""
    return PLNData(*map(jnp.asarray, check_data(*_triple(data))))


def _triple(data) -> tuple:
    """``data`` as the three arrays (Y, O, X), or an error naming what came instead."""
    if isinstance(data, tuple | list) and len(data) == 3:
        return tuple(data)
    if isinstance(data, dict):
        got = f"a dict with keys {sorted(map(str, data))}"
        fix = "pass (d['Y'], d['O'], d['X']), in that order"
    else:
        shape = getattr(data, "shape", None)
        got = f"an array of shape {shape}" if shape is not None else type(data).__name__
        if isinstance(data, tuple | list):
            got = f"a {type(data).__name__} of {len(data)} items"
        fix = "pass (Y, O, X): counts, log offsets and covariates (see load_oaks())"
    raise TypeError(f"data must be the three arrays (Y, O, X), got {got}; {fix}.")


def check_n_iter(n_iter) -> int:
    """A positive Python int of iterations, or a clear error (n_iter is the one static
    argument of a fit)."""
    return whole_number(n_iter, "n_iter")
