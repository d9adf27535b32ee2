"""PyTorch beside JAX on one device, for ``python -m jitbook.bench gpu``: two
algorithms, each in both frameworks, raced in the same rounds.

"scan" is the scan level's algorithm (autograd of the loss, RAdam scaled and clipped,
Sigma in closed form, Omega by a general inverse); "fast" is the fast level's
(hand-written gradients, Omega from a Cholesky factor: `pln.peers._fast_step`).
PyTorch's default float32 matmul precision is full float32, JAX's on a GPU is not:
the race runs JAX both ways and says which is matched. torch.compile's compile time is
the first call minus the median run, reported apart.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from functools import partial
from time import perf_counter

import jax
import numpy as np

from jitbook import timing
from jitbook.chapters.pln.peers import _radam
from jitbook.chapters.pln.profile import PROGRAMS
from jitbook.chapters.pln.threads import blas_limited


def missing() -> str | None:
    """Why PyTorch cannot run here (None: it can)."""
    try:
        import torch  # noqa: F401
    except ImportError:
        return "torch is not installed: the PyTorch rows need `pip install torch`"
    return None


def _neg_elbo(B, M, S, Omega, Y, O, X, const):
    """`model.neg_elbo` in PyTorch (const: the terms that do not change)."""
    import torch

    n = Y.shape[0]
    S2 = S * S
    Z = O + M + X @ B
    elbo = n / 2 * torch.linalg.slogdet(Omega)[1]
    elbo = elbo + torch.sum(Y * Z - torch.exp(Z + S2 / 2) + 0.5 * torch.log(S2))
    elbo = elbo - 0.5 * torch.trace((M.T @ M + torch.diag(torch.sum(S2, 0))) @ Omega)
    return -(elbo + const)


def _scan_update(params, grads, mu, nu, count, lr: float):
    """RAdam step (the peers' own, which counts the step), closed-form Sigma, Omega by
    a general inverse."""
    import torch

    params, mu, nu, count = _radam(params, grads, mu, nu, count, lr)
    _, M, S = params
    Sigma = (M.T @ M + torch.diag(torch.sum(S * S, 0))) / M.shape[0]
    return params, mu, nu, count, torch.linalg.inv(Sigma)


class TorchFits:
    """The two algorithms on one device, eager or compiled; each call runs a fit
    and returns its last loss as a float (which waits for the device)."""

    def __init__(self, data, device: str):
        import torch

        from jitbook.chapters.pln.peers import _fast_step

        self.torch, self.device = torch, device
        Y, O, X = (torch.as_tensor(np.asarray(a), device=device) for a in data)
        n, p = Y.shape
        k = Y + (Y == 0)
        log_fact = 0.5 * torch.log(2 * math.pi * k) + k * (torch.log(k) - 1.0)
        self.data = Y, O, X
        self.const = 0.5 * n * p - torch.sum(log_fact)  # neg_elbo's fixed part
        self.fast_const = torch.sum(Y * O) + self.const  # fast's: Y*O too
        self.XtY = X.T @ Y
        self.shape = n, p, X.shape[1]
        unchecked = partial(_fast_step, checked=False)
        self.steps = {
            "fast": _fast_step,
            "fast compiled": torch.compile(_fast_step),
            # as PyTorch's documentation recommends for overhead-bound work: CUDA
            # graphs, and no host synchronisation inside the step
            "fast reduce-overhead": torch.compile(unchecked, mode="reduce-overhead"),
        }
        self.loss_c = torch.compile(_neg_elbo)
        self.update_c = torch.compile(_scan_update)

    def _start(self):
        torch, (n, p, d) = self.torch, self.shape
        zeros = {"device": self.device}
        params = (torch.zeros(d, p, **zeros), torch.zeros(n, p, **zeros),
                  torch.ones(n, p, **zeros))  # fmt: skip
        moments = tuple(torch.zeros_like(x) for x in params)
        return params, moments, moments, torch.zeros((), **zeros)

    def fast(self, n_iter: int, compiled: bool | str = False) -> float:
        """A fit of the fast algorithm: eager, compiled (True), or compiled in the
        mode named ("reduce-overhead")."""
        torch = self.torch
        step = self.steps[
            f"fast {compiled}" if isinstance(compiled, str)
            else "fast compiled" if compiled else "fast"
        ]  # fmt: skip
        params, mu, nu, count = self._start()
        M, S = params[1], params[2]
        gram = M.T @ M + torch.diag(torch.sum(S * S, 0))
        Omega = torch.eye(self.shape[1], device=self.device)
        logdet = torch.zeros((), device=self.device)
        opt, aux = (mu, nu, count), (gram, logdet, self.XtY, self.fast_const)
        with torch.inference_mode():
            for _ in range(n_iter):
                loss, params, opt, Omega, aux = step(
                    params, opt, Omega, aux, self.data, 1.0
                )
        return float(loss)

    def scan(self, n_iter: int, compiled: bool = False) -> float:
        torch = self.torch
        loss_fn = self.loss_c if compiled else _neg_elbo
        update = self.update_c if compiled else _scan_update
        params, mu, nu, count = self._start()
        Omega = torch.eye(self.shape[1], device=self.device)
        for _ in range(n_iter):
            leaves = [x.detach().requires_grad_() for x in params]
            loss = loss_fn(*leaves, Omega, *self.data, self.const)
            grads = torch.autograd.grad(loss, leaves)
            with torch.no_grad():
                params, mu, nu, count, Omega = update(params, grads, mu, nu, count, 1.0)
        return float(loss.detach())


def _first_and_runs(call: Callable[[], float], runs: int) -> dict:
    start = perf_counter()
    loss = call()
    first = perf_counter() - start
    times = []
    for _ in range(runs):
        start = perf_counter()
        call()
        times.append(perf_counter() - start)
    median = statistics.median(times)
    return {"first call s": first, "run s (median)": median, "run s (min)": min(times),
            "compile s (first call minus the median run)": first - median,
            "final loss": loss}  # fmt: skip


def per_step(data, n_iter: int, setting) -> Callable:
    """JAX's per-step level, one compiled iteration in a Python loop, at "highest"."""
    from jitbook.chapters.pln.levels import fit

    def call():
        with setting("highest"), blas_limited():
            return fit(data, n_iter, "jit_iteration").losses

    return call


def compare(data, n_iter: int, rounds: int, setting) -> dict:
    """Eager and compiled PyTorch fits (first call and runs), then one race of the
    compiled fits against JAX's scan and fast levels under both JAX precisions."""
    import torch

    device = "cuda" if torch.cuda.is_available() else "cpu"
    fits = TorchFits(data, device)
    calls = {
        "PyTorch fast, eager": lambda: fits.fast(n_iter),
        "PyTorch scan, eager": lambda: fits.scan(n_iter),
        "torch.compile fast": lambda: fits.fast(n_iter, True),
        "torch.compile scan": lambda: fits.scan(n_iter, True),
        "torch.compile fast, reduce-overhead, cholesky_ex": (
            lambda: fits.fast(n_iter, "reduce-overhead")
        ),
    }
    rows = {}
    for name, call in calls.items():
        try:
            rows[name] = _first_and_runs(call, 2)
        except Exception as err:  # noqa: BLE001  a failed variant is a finding
            rows[name] = {"error": f"{type(err).__name__}: {err}"[:1500]}

    def jax_fit(level, precision):
        def call():
            with setting(precision), blas_limited():
                return PROGRAMS[level](data, n_iter, 1.0)[0]

        return call

    # pairings: whole loop (JAX's scan and fast levels) against the best whole loop
    # PyTorch offers (reduce-overhead), and per step (JAX's jit_iteration, the scan
    # algorithm) against per step (torch.compile scan)
    variants = {
        name: calls[name] for name in list(calls)[2:] if "error" not in rows[name]
    }
    for level in ("fast", "scan"):
        for precision in ("highest", "default"):
            variants[f"JAX {level}, {precision}"] = jax_fit(level, precision)
    variants["JAX jit_iteration, highest"] = per_step(data, n_iter, setting)
    raced = timing.race(variants, rounds=rounds, min_time=0.0, per=n_iter)
    return {
        "device": device,
        "torch": torch.__version__,
        "float32 matmul precision": torch.get_float32_matmul_precision(),
        "iters": n_iter,
        "rows": rows,
        "race": {"per": raced.per, "times": raced.times},
        "jax device": str(jax.devices()[0]),
    }
