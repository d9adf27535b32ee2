"""The peers: the PLN fit in PyTorch (eager and torch.compile) and pyPLNmodels' own fit.

The 2023 tutorial found JAX slower than PyTorch on CPU. PyTorch runs two algorithms
here, step for step in float32: the fast level's (hand-written gradients, Sigma from a
Cholesky factor) and the tutorial's (autograd of the ELBO, Omega as the inverse of the
closed-form Sigma), both with RAdam scaled by -lr and clipped to 0.1. This module needs
only NumPy at import, so it also runs as a script in another interpreter (a venv with
torch and pyPLNmodels): ``serve`` answers one JSON line per request, so the bench can
race the peers in the same rounds as the JAX levels (`Peer`).
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path
from time import perf_counter

import numpy as np

if __package__:
    from jitbook.paths import DATA, ROOT
else:  # a script in the peers' interpreter, which has no jitbook: read paths.py alone
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from paths import DATA, ROOT  # type: ignore[no-redef]

INSTALL_HINT = (
    "the peers (PyTorch, pyPLNmodels) are an optional extra: `pip install -e .[peers] "
    "--extra-index-url https://download.pytorch.org/whl/cpu` (CPU PyTorch), or point "
    "`--peers-python` at an interpreter that has torch and pyPLNmodels installed"
)
# The peer variants, and the JAX level that runs the same algorithm.
VARIANTS = {
    "PyTorch eager": ("fast", False),
    "torch.compile": ("fast", True),
    "PyTorch eager, tutorial's algorithm": ("tutorial", False),
    "torch.compile, tutorial's algorithm": ("tutorial", True),
}


def peers_missing() -> str | None:
    """Why the peers cannot run in this interpreter (None if torch and pyPLNmodels
    import)."""
    for name in ("torch", "pyPLNmodels"):
        try:
            importlib.import_module(name)
        except ImportError:
            return f"{name} is not installed: {INSTALL_HINT}"
    return None


def _neg_elbo_t(B, M, S, Y, O, X, Omega, log_fact_sum):
    """Minus the ELBO on torch tensors, written like `model.neg_elbo`."""
    import torch

    n, p = Y.shape
    S2 = S * S
    Z = O + M + X @ B
    elbo = n / 2 * torch.linalg.slogdet(Omega)[1]
    elbo = elbo + torch.sum(Y * Z - torch.exp(Z + S2 / 2) + 0.5 * torch.log(S2))
    elbo = elbo - 0.5 * torch.trace((M.T @ M + torch.diag(torch.sum(S2, 0))) @ Omega)
    return -(elbo + 0.5 * n * p - log_fact_sum)


def _log_fact_sum(Y):
    import torch

    k = Y + (Y == 0)
    return torch.sum(0.5 * torch.log(2 * torch.pi * k) + k * (torch.log(k) - 1.0))


def torch_neg_elbo(params, data, Omega):
    """Minus the ELBO in PyTorch from NumPy inputs (tests compare it with
    `model.neg_elbo` at the same parameters)."""
    import torch

    B, M, S, Y, O, X, Omega = (
        torch.as_tensor(np.asarray(a, np.float32)) for a in (*params, *data, Omega)
    )
    return _neg_elbo_t(B, M, S, Y, O, X, Omega, _log_fact_sum(Y))


def _radam(params, grads, mu, nu, count, lr: float):
    """One RAdam step, scaled by -lr and clipped to 0.1, with RAdam's scalars exactly
    as fast.radam_scalars computes them, in float32."""
    import torch

    count = count + 1
    b1, b2, ro_inf = 0.9, 0.999, 2.0 / (1.0 - 0.999) - 1.0
    b2t = b2**count
    ro = ro_inf - 2 * count * b2t / (1 - b2t)
    r = torch.sqrt(
        (ro - 4.0) * (ro - 2.0) * ro_inf / ((ro_inf - 4.0) * (ro_inf - 2.0) * ro)
    )
    new_x, new_m, new_v = [], [], []
    for x, g, m, v in zip(params, grads, mu, nu, strict=True):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1**count)
        step = torch.where(
            ro >= 5.0, r * m_hat / (torch.sqrt(v / (1 - b2t)) + 1e-8), m_hat
        )
        new_x.append(x + torch.clamp(-lr * step, -0.1, 0.1))
        new_m.append(m)
        new_v.append(v)
    return tuple(new_x), tuple(new_m), tuple(new_v), count


def _fast_step(params, opt, Omega, aux, data, lr: float, checked: bool = True):
    """One iteration of `fast.py`'s loop body: loss and gradients by hand, a RAdam
    step, Omega from a Cholesky factor of the closed-form Sigma. ``checked=False``
    factorises with `cholesky_ex`, which leaves the error check to the caller and so,
    on a GPU, does not wait for the device at every step as `cholesky` does."""
    import torch

    B, M, S = params
    Y, O, X = data
    gram, logdet, XtY, const = aux
    n = Y.shape[0]
    S2 = S * S
    A = torch.exp(O + M + X @ B + S2 / 2)
    elbo = (
        n / 2 * logdet
        + torch.sum(Y * M - A + torch.log(S2) / 2)
        + torch.sum(XtY * B)
        - torch.sum(gram * Omega) / 2
    )
    grads = (X.T @ A - XtY, A - Y + M @ Omega, S * (A + torch.diagonal(Omega)) - 1 / S)
    params, mu, nu, count = _radam(params, grads, *opt, lr)
    B, M, S = params
    gram = M.T @ M + torch.diag(torch.sum(S * S, dim=0))
    L = (
        torch.linalg.cholesky(gram / n)
        if checked
        else torch.linalg.cholesky_ex(gram / n)[0]
    )
    logdet = -2.0 * torch.sum(torch.log(torch.diagonal(L)))
    aux = (gram, logdet, XtY, const)
    return -(elbo + const), params, (mu, nu, count), torch.cholesky_inverse(L), aux


def _tutorial_step(params, opt, Omega, aux, data, lr: float):
    """One iteration of the tutorial's algorithm (the scan level's): autograd of minus
    the ELBO, a RAdam step, Omega the inverse of the closed-form Sigma."""
    import torch

    Y, O, X = data
    grads, loss = torch.func.grad_and_value(
        lambda p: _neg_elbo_t(*p, Y, O, X, Omega, aux[0]), argnums=0
    )(params)
    params, mu, nu, count = _radam(params, grads, *opt, lr)
    _, M, S = params
    Sigma = (M.T @ M + torch.diag(torch.sum(S * S, dim=0))) / M.shape[0]
    return loss, params, (mu, nu, count), torch.linalg.inv(Sigma), aux


_STEPS = {"fast": _fast_step, "tutorial": _tutorial_step}
_compiled: dict[str, object] = {}


def run_torch(
    data, n_iter: int, lr: float = 1.0, compiled: bool = False, algorithm="fast"
) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """A fit in PyTorch (``algorithm`` "fast" or "tutorial", eager or compiled):
    per-iteration loss and the final (B, M, S), as NumPy arrays."""
    import torch

    step = _STEPS[algorithm]
    if compiled:
        step = _compiled.setdefault(algorithm, torch.compile(step))
    Y, O, X = data = tuple(torch.as_tensor(np.asarray(a, np.float32)) for a in data)
    n, p = Y.shape
    with torch.inference_mode(algorithm == "fast"):
        log_fact_sum = _log_fact_sum(Y)
        params = (torch.zeros(X.shape[1], p), torch.zeros(n, p), torch.ones(n, p))
        zeros = tuple(torch.zeros_like(x) for x in params)
        opt = (zeros, zeros, torch.zeros(()))
        if algorithm == "fast":
            gram = torch.diag(torch.sum(params[2] ** 2, dim=0))
            const = torch.sum(Y * O) + 0.5 * n * p - log_fact_sum
            aux = (gram, torch.zeros(()), X.T @ Y, const)
        else:
            aux = (log_fact_sum,)
        Omega, losses = torch.eye(p), []
        for _ in range(n_iter):
            loss, params, opt, Omega, aux = step(params, opt, Omega, aux, data, lr)
            losses.append(loss.detach())
        out = tuple(x.detach().numpy() for x in params)
        return torch.stack(losses).numpy(), out


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
    B = np.linalg.pinv(X.astype(np.float64)) @ M  # the part X explains
    return {
        "seconds": seconds,
        # no public count of the iterations done
        "iterations": len(model._elbo_criterion_monitor.elbo_list),
        "elbo": float(model.elbo),
        "version": pyPLNmodels.__version__,
        "B": B,
        "M": M - X @ B,
        "S": S,
    }


def pypln_loss(pypln: dict, data) -> float:
    """pyPLNmodels' (B, M, S) scored with the book's minus-ELBO (float64, closed-form
    Omega): the target the Newton fit races to."""
    from jitbook.chapters.pln.model import neg_elbo_numpy

    B, M, S = (np.asarray(pypln[k], np.float64) for k in "BMS")
    Omega = np.linalg.inv((M.T @ M + np.diag(np.sum(S * S, axis=0))) / M.shape[0])
    return neg_elbo_numpy((B, M, S), data, Omega)


# --- the peer process: one JSON line per request, one per answer


def _pin(cores) -> None:
    """Pin this process to `cores`, torch's pools sized to them, before torch works."""
    import torch

    if cores:
        os.sched_setaffinity(0, cores)
        torch.set_num_threads(len(cores))
        torch.set_num_interop_threads(1)  # no inter-op work here: one idle thread


def first_fit(src: str, cores) -> dict:
    """pyPLNmodels' fit as a user's script runs it once: in a fresh process, pinned
    like the race's peer, the model built from the data in `src` and fitted (the
    one-off race times the whole process, imports included)."""
    _pin(cores)
    import pyPLNmodels

    with np.load(src) as a:
        Y, O, X = (np.asarray(a[k], np.float32) for k in "YOX")
    start = perf_counter()
    pyPLNmodels.Pln(Y, exog=X, offsets=O, add_const=False).fit()
    return {"fit s": perf_counter() - start}


def _setup(state: dict, msg: dict) -> dict:
    """Pin this process to the race's cores and size torch's pools to them before any
    torch work; what it got, for the record."""
    missing = peers_missing()
    if missing:
        return {"error": missing}
    import pyPLNmodels
    import torch

    _pin(msg.get("cores"))
    with np.load(msg["data"]) as a:
        state["data"] = (a["Y"], a["O"], a["X"])
    state["n_iter"], state["lr"] = msg["n_iter"], msg.get("lr", 1.0)
    env = (
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "OMP_WAIT_POLICY",
    )
    return {
        "python": sys.version.split()[0],
        "torch": torch.__version__,
        "pyPLNmodels": pyPLNmodels.__version__,
        "torch threads": torch.get_num_threads(),
        "torch interop threads": torch.get_num_interop_threads(),
        "cores": sorted(os.sched_getaffinity(0)),
        "env": {k: os.environ.get(k) for k in env},
        "variants": list(VARIANTS),
    }


def _timer(state: dict, name: str, min_run_time: float) -> dict:
    """Variant `name` timed alone by PyTorch's own tool, with the same threads as in
    the race: the cross-check of its time in the race."""
    import torch
    from torch.utils.benchmark import Timer

    algorithm, compiled = VARIANTS[name]
    args = (state["data"], state["n_iter"], state["lr"], compiled, algorithm)
    timer = Timer(
        "run_torch(*args)",
        globals={"run_torch": run_torch, "args": args},
        num_threads=torch.get_num_threads(),
    )
    m = timer.blocked_autorange(min_run_time=min_run_time)
    return {"median s": m.median, "measurements": len(m.times)}


def handle(state: dict, msg: dict) -> dict:
    """Answer one request: setup, call (one fit of a variant), timer (one variant
    timed alone), pypln (its fit and parameters), pypln race (its fit alone), ping."""
    op = msg.get("op")
    if op == "setup":
        return _setup(state, msg)
    if op == "call":
        algorithm, compiled = VARIANTS[msg["name"]]
        start = perf_counter()
        run_torch(state["data"], state["n_iter"], state["lr"], compiled, algorithm)
        return {"seconds": perf_counter() - start}
    if op == "timer":
        return _timer(state, msg["name"], msg.get("min_run_time", 1.0))
    if op == "pypln race":  # what a user runs: the model built and fitted, nothing else
        import pyPLNmodels

        Y, O, X = (np.asarray(a, np.float32) for a in state["data"])
        start = perf_counter()
        pyPLNmodels.Pln(Y, exog=X, offsets=O, add_const=False).fit()
        return {"seconds": perf_counter() - start}
    if op == "pypln":
        fit = fit_pypln(state["data"])
        np.savez(msg["out"], **{k: fit.pop(k) for k in "BMS"})
        return fit
    if op == "ping":
        return {}
    return {"error": f"unknown request {op!r}"}


def serve() -> None:
    """Answer requests on stdin until it closes; all else printed goes to stderr."""
    answers = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # torch.compile and pyPLNmodels print: keep the answers clean
    state: dict = {}
    for line in sys.stdin:
        try:
            answer = handle(state, json.loads(line))
        except Exception:  # noqa: BLE001  (the parent shows it)
            answer = {"error": traceback.format_exc()[-2000:]}
        answers.write(json.dumps(answer) + "\n")
        answers.flush()


class Peer:
    """A peer process (``python`` running this file's ``serve``), asked one fit at a
    time, so its fits join the rounds of the JAX levels."""

    def __init__(self, python: str, data, n_iter: int, lr: float = 1.0, cores=None):
        from jitbook.bench.conditions import peer_env

        self.python, self._tmp = python, tempfile.TemporaryDirectory()
        self._env = env = os.environ | (peer_env(cores) if cores else {})
        self._cores = cores
        self._log = open(Path(self._tmp.name, "stderr.txt"), "w+")
        # -P: do not put this file's folder on sys.path, where data.py and profile.py
        # would shadow other modules
        self._proc = subprocess.Popen(
            [python, "-P", __file__, "serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            env=env,
        )
        self._data = src = Path(self._tmp.name, "data.npz")
        np.savez(src, **dict(zip("YOX", (np.asarray(a) for a in data), strict=True)))
        try:
            self.info = self.ask(
                op="setup", data=str(src), n_iter=n_iter, lr=lr, cores=cores
            )
        except BaseException:
            self.close()
            raise
        self.variants: list[str] = self.info["variants"]

    def ask(self, **msg) -> dict:
        """Send one request and wait for its answer; a failure raises with the peer's
        own message."""
        try:
            self._proc.stdin.write(json.dumps(msg) + "\n")
            self._proc.stdin.flush()
            line = self._proc.stdout.readline()
        except BrokenPipeError:
            line = ""
        answer = json.loads(line) if line.strip() else {"error": self._stderr()}
        if "error" in answer:
            raise RuntimeError(
                f"{self.python} could not run the peers ({msg['op']}): "
                f"{answer['error'].strip()}"
            )
        return answer

    def _stderr(self) -> str:
        self._log.seek(0)
        return "the peer process ended: " + self._log.read()[-2000:]

    def call(self, name: str) -> float:
        """One fit of variant ``name`` (or of its control); the seconds it took
        there."""
        from jitbook.bench.conditions import CONTROL

        return self.ask(op="call", name=name.removesuffix(CONTROL))["seconds"]

    def timer(self, name: str, min_run_time: float = 1.0) -> dict:
        """Variant ``name`` timed alone there by ``torch.utils.benchmark.Timer``."""
        return self.ask(op="timer", name=name, min_run_time=min_run_time)

    def pypln_race(self) -> float:
        """pyPLNmodels' model built and fitted there, nothing else; its seconds."""
        return self.ask(op="pypln race")["seconds"]

    def pypln_cold(self) -> dict:
        """pyPLNmodels' first fit in a fresh process of the peers' interpreter, with the
        peer's cores and threads (`first_fit`)."""
        cmd = [self.python, "-P", __file__, "first-fit", str(self._data)]
        done = subprocess.run(
            [*cmd, json.dumps(self._cores)],
            capture_output=True,
            text=True,
            env=self._env,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{self.python} could not run pyPLNmodels' first fit: "
                f"{done.stderr.strip()[-2000:]}"
            )
        return json.loads(done.stdout.strip().splitlines()[-1])

    def pypln(self) -> dict:
        """pyPLNmodels' default fit, there: its figures and (B, M, S)."""
        out = Path(self._tmp.name, "pypln.npz")
        fit = self.ask(op="pypln", out=str(out))
        with np.load(out) as a:
            return fit | {k: a[k] for k in "BMS"}

    def close(self) -> None:
        """End the peer process for sure and reap it."""
        try:
            self._proc.stdin.close()  # the peer's loop ends at the end of its input
        except BrokenPipeError:
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._proc.stdout.close()
        self._log.close()
        self._tmp.cleanup()

    def __enter__(self) -> Peer:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# --- the recorded run: data/peers/<name>.json, read by the PLN page

RECORDINGS = DATA / "peers"


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    import platform

    return platform.processor() or "unknown"


def _commit() -> str:
    done = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--abbrev=12"],
        capture_output=True,
        text=True,
    )
    return done.stdout.strip() or "unknown (not a git checkout)"


def start_record(argv: list[str]) -> dict:
    """Provenance taken when the run starts: command, machine, CPU, load, versions."""
    import datetime
    import platform

    import jax

    from jitbook.chapters.pln.threads import blas_threads
    from jitbook.guard import XLA_FLAG

    return {
        "command": "python -m jitbook.bench " + shlex.join(argv),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "book commit": _commit(),
        "machine": platform.node(),
        "cpu": {"model": _cpu_model(), "cores": os.cpu_count()},
        "load average at start": [round(x, 2) for x in os.getloadavg()],
        "jax": jax.__version__,
        "guard flag": XLA_FLAG in os.environ.get("XLA_FLAGS", "").split(),
        "OpenBLAS threads inside a fit": 1,
        "OpenBLAS threads as the process has it": blas_threads(),
    }


def write_record(
    record: dict, name: str, forced: bool = False, folder: Path | None = None
) -> Path:
    """Write the run (provenance, conditions, every round's times) to
    data/peers/NAME.json; a run not fit to compare is written only when `forced`, and
    then marked unfit, with why."""
    from jitbook.bench.conditions import unfit_reasons

    reasons = unfit_reasons(record)
    if reasons and not forced:
        raise ValueError(
            "not recorded, the race was not fit to compare: " + "; ".join(reasons)
        )
    record = record | {"fit to compare": not reasons, "unfit because": reasons}
    folder = folder or RECORDINGS
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name or record['date'][:10]}.json"
    path.write_text(json.dumps(record, indent=1, default=float) + "\n")
    return path


def recording(name: str) -> dict | None:
    """The run recorded as data/peers/NAME.json (None if there is none)."""
    path = RECORDINGS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def latest() -> dict | None:
    """The newest recorded run under data/peers/, by its date (None if none)."""
    runs = [json.loads(p.read_text()) for p in sorted(RECORDINGS.glob("*.json"))]
    return max(runs, key=lambda r: r["date"]) if runs else None


def remake(record: dict, python: str) -> str:
    """The shell lines that remake `record`: a venv with the peers, then its command
    with that venv's Python."""
    argv = shlex.split(record["command"])
    if "--peer-threads" in argv:  # older runs; --cores now sets both sides' budget
        at = argv.index("--peer-threads")
        del argv[at : at + 2]
    at = argv.index("--peers-python") + 1
    argv[at] = python
    venv = python.rsplit("/bin/", 1)[0]
    install = [f"{venv}/bin/pip", "install"]
    install += [f"torch=={record['peer']['torch'].split('+')[0]}"]
    install += [f"pyPLNmodels=={record['peer']['pyPLNmodels']}", "setuptools<82"]
    install += ["--extra-index-url", "https://download.pytorch.org/whl/cpu"]
    lines = [["python3.11", "-m", "venv", venv], install, argv]
    return "\n".join(_continued(words) for words in lines)


def _continued(words: list[str], width: int = 80) -> str:
    """A shell command wrapped at ``width`` with backslash continuations, so it fits
    the page and still pastes into a shell."""
    lines, line = [], ""
    for word in map(shlex.quote, words):
        if line and len(line) + 1 + len(word) > width:
            lines.append(line + " \\")
            line = "    " + word
        else:
            line = f"{line} {word}" if line else word
    return "\n".join([*lines, line])


def caption(info: dict, python: str) -> str:
    """Where the peers ran, for the table's caption."""
    return (
        f"JAX levels in this process; PyTorch {info['torch']} "
        f"({info['torch threads']} thread{'s' * (info['torch threads'] != 1)}) and "
        f"pyPLNmodels {info['pyPLNmodels']} in "
        f"Python {info['python']} ({python}), in the same interleaved rounds."
    )


def run_in(python: str, task: str, arrays: dict, **options) -> dict:
    """Run one task (elbo or fit) in another interpreter: arrays in and out through
    .npz files."""
    with tempfile.TemporaryDirectory() as tmp:
        src, out = Path(tmp, "in.npz"), Path(tmp, "out.npz")
        np.savez(src, **{k: np.asarray(v) for k, v in arrays.items()})
        cmd = [python, "-P", __file__, task, str(src), str(out), json.dumps(options)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(
                f"{python} could not run the peers ({task}): "
                f"{done.stderr.strip()[-2000:]}"
            )
        with np.load(out) as result:
            return {k: result[k] for k in result.files}


def _main(task: str, *args: str) -> None:
    if task == "serve":
        return serve()
    if task == "first-fit":
        src, cores = args
        return print(json.dumps(first_fit(src, json.loads(cores))))
    src, out, options = args
    opts = json.loads(options)
    with np.load(src) as inp:
        a = {k: inp[k] for k in inp.files}
    data = (a["Y"], a["O"], a["X"])
    if task == "elbo":
        params = (a["B"], a["M"], a["S"])
        result = {"loss": torch_neg_elbo(params, data, a["Omega"]).numpy()}
    elif task == "fit":
        losses, (B, M, S) = run_torch(data, **opts)
        result = {"losses": losses, "B": B, "M": M, "S": S}
    else:
        raise SystemExit(f"unknown task {task!r}; choose serve, first-fit, elbo or fit")
    np.savez(out, **result)


if __name__ == "__main__":
    _main(*sys.argv[1:])


if __package__:  # read on JAX's side only; the peers' interpreter serves without them
    from jitbook.chapters.pln.peer_verdicts import (  # noqa: E402
        PAIRS as PAIRS,
    )
    from jitbook.chapters.pln.peer_verdicts import (
        WHOLE as WHOLE,
    )
    from jitbook.chapters.pln.peer_verdicts import (
        newton_race as newton_race,
    )
    from jitbook.chapters.pln.peer_verdicts import (
        newton_verdict as newton_verdict,
    )
    from jitbook.chapters.pln.peer_verdicts import (
        one_off_verdict as one_off_verdict,
    )
    from jitbook.chapters.pln.peer_verdicts import (
        recorded_race as recorded_race,
    )
    from jitbook.chapters.pln.peer_verdicts import (
        verdict_rows as verdict_rows,
    )
    from jitbook.chapters.pln.peer_verdicts import (
        verdicts as verdicts,
    )
