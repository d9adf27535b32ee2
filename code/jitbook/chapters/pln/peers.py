"""The peers: the fast level's algorithm in PyTorch (eager and torch.compile), and
pyPLNmodels' own fit.

The 2023 tutorial found JAX slower than PyTorch on CPU; `python -m jitbook.bench pln
--peers` puts them in one table. PyTorch runs the iteration of `fast.py` step for step:
the same ELBO and hand-written gradients, the closed-form Sigma from a Cholesky factor,
RAdam scaled by -lr and clipped to 0.1, float32. This module needs only NumPy at import,
so it also runs as a script in another interpreter (a venv with the optional `peers`
extra, e.g. Python 3.11 with a CPU build of torch): the data go in and the rows come out
through .npz files.
"""

from __future__ import annotations

import importlib
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from time import perf_counter

import numpy as np

INSTALL_HINT = (
    "the peers (PyTorch, pyPLNmodels) are an optional extra: `pip install -e .[peers] "
    "--extra-index-url "
    "https://download.pytorch.org/whl/cpu` (CPU PyTorch), or point `--peers-python` at "
    "an interpreter "
    "that has torch and pyPLNmodels installed"
)


def peers_missing() -> str | None:
    """Why the peers cannot run in this interpreter (None if torch and pyPLNmodels
    import)."""
    for name in ("torch", "pyPLNmodels"):
        try:
            importlib.import_module(name)
        except ImportError:
            return f"{name} is not installed: {INSTALL_HINT}"
    return None


def torch_neg_elbo(params, data, Omega):
    """Minus the ELBO in PyTorch, written like `model.neg_elbo` (tests compare the two
    at the same parameters)."""
    import torch

    B, M, S = (torch.as_tensor(np.asarray(a, np.float32)) for a in params)
    Y, O, X = (torch.as_tensor(np.asarray(a, np.float32)) for a in data)
    Omega = torch.as_tensor(np.asarray(Omega, np.float32))
    n, p = Y.shape
    S2 = S * S
    Z = O + M + X @ B
    k = Y + (Y == 0)
    log_fact = 0.5 * torch.log(2 * torch.pi * k) + k * (torch.log(k) - 1.0)
    elbo = n / 2 * torch.linalg.slogdet(Omega)[1]
    elbo = elbo + torch.sum(Y * Z - torch.exp(Z + S2 / 2) + 0.5 * torch.log(S2))
    elbo = elbo - 0.5 * torch.trace(
        (M.T @ M + torch.diag(torch.sum(S2, dim=0))) @ Omega
    )
    return -(elbo + 0.5 * n * p - torch.sum(log_fact))


def _step(params, mu, nu, count, gram, Omega, logdet, Y, O, X, XtY, const, lr: float):
    """One iteration of `fast.py`'s loop body in PyTorch: loss and gradients, a RAdam
    step, the closed form."""
    import torch

    B, M, S = params
    n = Y.shape[0]
    S2 = S * S
    A = torch.exp(O + M + X @ B + S2 / 2)
    elbo = (
        n / 2 * logdet
        + torch.sum(Y * M - A + torch.log(S2) / 2)
        + torch.sum(XtY * B)
        - torch.sum(gram * Omega) / 2
    )
    grads = (
        X.T @ A - XtY,
        A - Y + M @ Omega,
        S * (A + torch.diagonal(Omega)) - 1.0 / S,
    )
    count = (
        count + 1
    )  # RAdam's scalars exactly as fast.radam_scalars computes them, in float32
    b1, b2, ro_inf = 0.9, 0.999, 2.0 / (1.0 - 0.999) - 1.0
    b2t = b2**count
    ro = ro_inf - 2 * count * b2t / (1 - b2t)
    r = torch.sqrt(
        (ro - 4.0) * (ro - 2.0) * ro_inf / ((ro_inf - 4.0) * (ro_inf - 2.0) * ro)
    )
    new_params, new_mu, new_nu = [], [], []
    for x, g, m, v in zip(params, grads, mu, nu, strict=True):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1**count)
        step = torch.where(
            ro >= 5.0, r * m_hat / (torch.sqrt(v / (1 - b2t)) + 1e-8), m_hat
        )
        new_params.append(x + torch.clamp(-lr * step, -0.1, 0.1))
        new_mu.append(m)
        new_nu.append(v)
    B, M, S = new_params
    gram = M.T @ M + torch.diag(torch.sum(S * S, dim=0))
    L = torch.linalg.cholesky(gram / n)
    Omega = torch.cholesky_inverse(L)
    logdet = -2.0 * torch.sum(torch.log(torch.diagonal(L)))
    return (
        -(elbo + const),
        tuple(new_params),
        tuple(new_mu),
        tuple(new_nu),
        count,
        gram,
        Omega,
        logdet,
    )


_compiled_step = None


def run_torch(
    data, n_iter: int, lr: float = 1.0, compiled: bool = False
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """The fast level's fit in PyTorch: per-iteration loss and the final (B, M, S), as
    NumPy arrays."""
    import torch

    global _compiled_step
    if compiled and _compiled_step is None:
        _compiled_step = torch.compile(_step, fullgraph=True)
    step = _compiled_step if compiled else _step
    Y, O, X = (torch.as_tensor(np.asarray(a, np.float32)) for a in data)
    n, p = Y.shape
    with torch.inference_mode():
        k = Y + (Y == 0)
        const = (
            torch.sum(Y * O)
            + 0.5 * n * p
            - torch.sum(0.5 * torch.log(2 * torch.pi * k) + k * (torch.log(k) - 1.0))
        )
        XtY = X.T @ Y
        params = (torch.zeros(X.shape[1], p), torch.zeros(n, p), torch.ones(n, p))
        mu = nu = tuple(torch.zeros_like(x) for x in params)
        count, logdet = torch.zeros(()), torch.zeros(())
        gram = params[1].T @ params[1] + torch.diag(torch.sum(params[2] ** 2, dim=0))
        Omega, losses = torch.eye(p), []
        for _ in range(n_iter):
            loss, params, mu, nu, count, gram, Omega, logdet = step(
                params, mu, nu, count, gram, Omega, logdet, Y, O, X, XtY, const, lr
            )
            losses.append(loss)
        return torch.stack(losses).numpy(), tuple(x.numpy() for x in params)


def _timed_row(
    name: str, run, n_iter: int, repeats: int, note: str, compiles: bool = False
) -> dict:
    start = perf_counter()
    run()
    first = perf_counter() - start
    times = []
    for _ in range(repeats):
        start = perf_counter()
        run()
        times.append(perf_counter() - start)
    median = statistics.median(times)
    return {
        "level": name,
        "compiles": "",
        "compile s": round(first - median, 2) if compiles else "",
        "first call s": round(first, 2),
        "run s (median)": round(median, 3),
        "run s (min)": round(min(times), 3),
        "run s (max)": round(max(times), 3),
        "ms / iter": round(median / n_iter * 1e3, 2),
        "note": note,
    }


def fit_pypln(data) -> dict:
    """pyPLNmodels' own default fit, timed: seconds, iterations, its ELBO, and its (B,
    M, S) in the book's form.

    pyPLNmodels' latent mean is the whole mean of the latent Gaussian (XB + M in the
    book's terms): the part X explains becomes B and the rest M, as data/README.md says.
    """
    import pyPLNmodels

    Y, O, X = (np.asarray(a, np.float32) for a in data)
    model = pyPLNmodels.Pln(Y, exog=X, offsets=O, add_const=False)
    start = perf_counter()
    model.fit()
    seconds = perf_counter() - start
    M, S = (
        np.asarray(t, np.float64)
        for t in (model.latent_mean, model.latent_sqrt_variance)
    )
    B = (
        np.linalg.pinv(X.astype(np.float64)) @ M
    )  # the part of its latent mean that X explains
    return {
        "seconds": seconds,
        "iterations": len(
            model._elbo_criterion_monitor.elbo_list
        ),  # no public count of iterations done
        "elbo": float(model.elbo),
        "version": pyPLNmodels.__version__,
        "B": B,
        "M": M - X @ B,
        "S": S,
    }


def benchmark_peers(
    data, n_iter: int, repeats: int = 3, pypln: bool = True
) -> tuple[list[dict], dict | None]:
    """Rows for PyTorch eager and torch.compile (the columns of
    `bench.benchmark_levels`), and pyPLNmodels' fit."""
    import torch

    version = f"torch {torch.__version__}, {torch.get_num_threads()} threads"
    rows = [
        _timed_row(
            "PyTorch eager", lambda: run_torch(data, n_iter), n_iter, repeats, version
        ),
        _timed_row(
            "torch.compile",
            lambda: run_torch(data, n_iter, compiled=True),
            n_iter,
            repeats,
            "compile s = first call minus the median run",
            compiles=True,
        ),
    ]
    return rows, fit_pypln(data) if pypln else None


def run_in(python: str, task: str, arrays: dict, **options) -> dict:
    """Run one of this module's tasks in another interpreter: arrays in and out through
    .npz files."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp, "in.npz"), Path(tmp, "out.npz")
        np.savez(src, **{k: np.asarray(v) for k, v in arrays.items()})
        # -P: do not put this file's folder on sys.path, where data.py and profile.py
        # would shadow other modules
        cmd = [python, "-P", __file__, task, str(src), str(out), json.dumps(options)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(
                f"{python} could not run the peers ({task}): "
                f"{done.stderr.strip()[-2000:]}"
            )
        with np.load(out) as result:
            return {k: result[k] for k in result.files}


def pypln_row(pypln: dict, data) -> tuple[dict, float]:
    """pyPLNmodels' fit as a table row, and its minus-ELBO in the book's form (float64,
    closed-form Omega)."""
    from jitbook.chapters.pln.model import neg_elbo_numpy

    B, M, S = (np.asarray(pypln[k], np.float64) for k in "BMS")
    n = M.shape[0]
    Omega = np.linalg.inv((M.T @ M + np.diag(np.sum(S * S, axis=0))) / n)
    loss = neg_elbo_numpy((B, M, S), data, Omega)
    seconds, iters = pypln["seconds"], pypln["iterations"]
    row = {
        "level": f"pyPLNmodels {pypln['version']} fit()",
        "first call s": round(seconds, 2),
        "ms / iter": round(seconds / iters * 1e3, 2),
        "note": f"its own default fit, one run, {iters} iterations; its ELBO "
        f"{pypln['elbo']:,.0f}, book's loss {loss:,.0f}",
    }
    return row, loss


def add_peers(
    rows: list[dict], data, n_iter: int, repeats: int, python: str | None = None
) -> tuple[str, float | None]:
    """Append the peer rows to the JAX levels' `rows`; return where they ran and
    pyPLNmodels' loss.

    With `python`, the peers run in that interpreter as a subprocess; otherwise in this
    one. If torch or pyPLNmodels is missing, nothing is appended and the text says how
    to get them.
    """
    arrays = dict(zip("YOX", data, strict=True))
    if python:
        out = run_in(python, "bench", arrays, n_iter=n_iter, repeats=repeats)
        peer, pypln = (
            json.loads(str(out["rows"])),
            json.loads(str(out["pypln"])) | {k: out[k] for k in "BMS"},
        )
        where = (
            "PyTorch and pyPLNmodels rows measured in a subprocess running Python "
            f"{out['python']} ({python})"
        )
    else:
        missing = peers_missing()
        if missing:
            return f"Peers not measured: {missing}.", None
        peer, pypln = benchmark_peers(data, n_iter, repeats)
        where = "every row measured in this process"
    row, loss = pypln_row(pypln, data)
    rows += peer + [row]
    return (
        f"JAX levels in this process, {where}, one after the other in the same command "
        "run.",
        loss,
    )


def _main(task: str, src: str, out: str, options: str) -> None:
    opts = json.loads(options)
    with np.load(src) as inp:
        a = {k: inp[k] for k in inp.files}
    data = (a["Y"], a["O"], a["X"])
    if task == "elbo":
        result = {
            "loss": torch_neg_elbo((a["B"], a["M"], a["S"]), data, a["Omega"]).numpy()
        }
    elif task == "fit":
        losses, (B, M, S) = run_torch(
            data, opts["n_iter"], opts.get("lr", 1.0), opts.get("compiled", False)
        )
        result = {"losses": losses, "B": B, "M": M, "S": S}
    elif task == "bench":
        rows, pypln = benchmark_peers(
            data, opts["n_iter"], opts["repeats"], opts.get("pypln", True)
        )
        result = {
            "rows": np.array(json.dumps(rows)),
            "python": np.array(sys.version.split()[0]),
        }
        if pypln:
            result.update(
                {k: pypln.pop(k) for k in ("B", "M", "S")},
                pypln=np.array(json.dumps(pypln)),
            )
    else:
        raise SystemExit(f"unknown task {task!r}; choose elbo, fit or bench")
    np.savez(out, **result)


if __name__ == "__main__":
    _main(*sys.argv[1:])
