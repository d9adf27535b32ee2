"""The peers: PyTorch runs the fast level's algorithm (same ELBO, same iterates), and the bench says how to get them.

Torch is an optional extra. The tests that need it run in this interpreter if it has torch, or in the one
named by JITBOOK_PEERS_PYTHON (e.g. a Python 3.11 venv with a CPU build of torch); otherwise they skip.
"""

import importlib.util
import os
import sys

import numpy as np
import pytest

import jitbook  # noqa: F401
from jitbook import bench
from jitbook.chapters.pln import (
    closed_form_sigma,
    fit,
    init_params,
    load_oaks,
    neg_elbo,
    neg_elbo_numpy,
    peers,
)

PEERS_PYTHON = os.environ.get("JITBOOK_PEERS_PYTHON")
HAS_TORCH = importlib.util.find_spec("torch") is not None


def torch_task(task: str, arrays: dict, **options) -> dict:
    """Run a peers task here if torch imports, else in JITBOOK_PEERS_PYTHON."""
    if HAS_TORCH:
        data = (arrays["Y"], arrays["O"], arrays["X"])
        if task == "elbo":
            params = (arrays["B"], arrays["M"], arrays["S"])
            return {"loss": peers.torch_neg_elbo(params, data, arrays["Omega"]).numpy()}
        losses, _ = peers.run_torch(data, **options)
        return {"losses": losses}
    return peers.run_in(PEERS_PYTHON, task, arrays, **options)


needs_torch = pytest.mark.skipif(
    not HAS_TORCH and not PEERS_PYTHON,
    reason="torch is not installed here (pip install -e .[peers], or set JITBOOK_PEERS_PYTHON to a Python that has it)",
)


def data_arrays(repeat: int = 1) -> dict:
    return dict(zip("YOX", load_oaks(repeat), strict=True))


@needs_torch
def test_torch_elbo_agrees_with_neg_elbo():
    data = load_oaks(1)
    rng = np.random.default_rng(0)
    B, M, S = (np.asarray(x) for x in init_params(data))
    params = (B + 0.1, M + 0.3 * rng.standard_normal(M.shape, dtype=np.float32), S * 0.7)
    Omega = np.linalg.inv(np.asarray(closed_form_sigma(params[1], params[2])))
    out = torch_task("elbo", data_arrays() | dict(zip("BMS", params, strict=True)) | {"Omega": Omega})
    assert float(out["loss"]) == pytest.approx(float(neg_elbo(params, data, Omega)), rel=1e-5)
    assert float(out["loss"]) == pytest.approx(neg_elbo_numpy(params, data, Omega), rel=1e-5)


@needs_torch
def test_torch_fit_follows_the_fast_level():
    data, n_iter = load_oaks(1), 40
    jax_losses = fit(data, n_iter, "fast").losses
    torch_losses = torch_task("fit", data_arrays(), n_iter=n_iter)["losses"]
    assert torch_losses.shape == (n_iter,)
    assert torch_losses[-1] < torch_losses[0] / 2  # it descends, as the fast level does
    np.testing.assert_allclose(torch_losses, jax_losses, rtol=1e-4)


def test_bench_without_peers_says_how_and_prints_the_jax_table(capsys, monkeypatch):
    monkeypatch.setattr(peers, "peers_missing", lambda: "torch is not installed: " + peers.INSTALL_HINT)
    bench.main(["pln", "--n-repeat", "1", "--iters", "3", "--repeats", "1", "--levels", "fast",
                "--newton-iters", "0", "--profile-levels", "", "--peers"])
    out = capsys.readouterr().out
    assert out.startswith("--peers: torch is not installed")  # said before the JAX levels run
    assert "| fast |" in out and "pip install -e .[peers]" in out
    assert "PyTorch eager" not in out


def test_run_in_an_interpreter_without_torch_says_so():
    if peers.peers_missing() is None:
        pytest.skip("this interpreter has the peers, so it cannot show their absence")
    with pytest.raises(RuntimeError, match="(?s)could not run the peers.*torch"):
        peers.run_in(sys.executable, "elbo", data_arrays() | {"B": 0, "M": 0, "S": 1, "Omega": 1})


def test_pypln_row_scores_its_parameters_with_the_book_elbo():
    data = load_oaks(1)
    B, M, S = (np.asarray(x, np.float64) for x in init_params(data))
    result = {"seconds": 2.0, "iterations": 400, "elbo": -1.0, "version": "1.0.10", "B": B, "M": M + 0.1, "S": S}
    row, loss = peers.pypln_row(result, data)
    Omega = np.linalg.inv(np.asarray(closed_form_sigma(M + 0.1, S), np.float64))
    assert loss == pytest.approx(neg_elbo_numpy((B, M + 0.1, S), data, Omega), rel=1e-6)
    assert row["ms / iter"] == 5.0 and row["level"] == "pyPLNmodels 1.0.10 fit()"
