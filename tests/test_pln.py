"""The PLN worked example: data checks, independent correctness checks, levels agree, seed bugs."""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jitbook  # noqa: F401  (sets the XLA flag before JAX computes)
from jitbook import count_compiles, fresh
from jitbook.chapters.pln import (
    Params,
    check_data,
    closed_form_sigma,
    fit,
    load_oaks,
    neg_elbo,
    neg_elbo_grads,
    seed,
)
from jitbook.chapters.pln.converge import fit_newton
from jitbook.chapters.pln.data import PLNData
from jitbook.chapters.pln.fast import FastState, loss_and_grads, precision
from jitbook.chapters.pln.levels import LEVELS, PLN, fit_levels
from jitbook.chapters.pln.profile import compiled_fit
from jitbook.chapters.pln.radam import radam_scalars

N_ITER = 60


@pytest.fixture(scope="module")
def data():
    return load_oaks(1)


@pytest.fixture(scope="module")
def jdata(data):
    return PLNData(*map(jnp.asarray, data))


def random_point(data, seed_=0):
    """Parameters and an SPD Omega of realistic size, away from the starting point."""
    rng = np.random.default_rng(seed_)
    n, p = data.Y.shape
    params = Params(
        B=jnp.asarray(rng.normal(-1, 0.5, (1, p)), jnp.float32),
        M=jnp.asarray(rng.normal(0, 0.5, (n, p)), jnp.float32),
        S=jnp.asarray(rng.uniform(0.2, 1.0, (n, p)), jnp.float32),
    )
    W = rng.normal(size=(3 * p, p))
    Omega = jnp.asarray(W.T @ W / (3 * p) + 0.5 * np.eye(p), jnp.float32)
    return params, Omega


def numpy_neg_elbo(params, data, Omega):
    """Minus the ELBO evaluated directly in float64 NumPy, term by term from the model's definition."""
    B, M, S = (np.asarray(x, np.float64) for x in params)
    Y, O, X = (np.asarray(x, np.float64) for x in data)
    Omega = np.asarray(Omega, np.float64)
    n, p = Y.shape
    Z = O + X @ B + M
    S2 = S**2
    k = np.where(Y == 0, 1.0, Y)
    log_fact = 0.5 * np.log(2 * np.pi * k) + k * np.log(k) - k
    sign, logdet = np.linalg.slogdet(Omega)
    assert sign > 0
    elbo = (
        n / 2 * logdet
        + np.sum(Y * Z - np.exp(Z + S2 / 2) + 0.5 * np.log(S2))
        - 0.5 * np.trace((M.T @ M + np.diag(S2.sum(axis=0))) @ Omega)
        + 0.5 * n * p
        - log_fact.sum()
    )
    return -elbo


# ---- data and input checks -------------------------------------------------------------------


def test_load_oaks_shapes_and_types(data):
    assert (
        data.Y.shape == (116, 114)
        and data.O.shape == (116, 114)
        and data.X.shape == (116, 1)
    )
    assert all(a.dtype == np.float32 for a in data)
    assert (
        np.all(data.X == 1) and data.Y.min() == 0 and np.all(data.Y == np.round(data.Y))
    )
    big = load_oaks(100)
    assert big.Y.shape == (11_600, 114)
    np.testing.assert_array_equal(big.Y[:100], np.repeat(data.Y[:1], 100, axis=0))


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda Y, O, X: (Y - 3000 * (Y == Y.max()), O, X), "non-negative"),
        (lambda Y, O, X: (Y + 0.5, O, X), "whole numbers"),
        (lambda Y, O, X: (np.where(Y == Y.max(), np.nan, Y), O, X), "NaN"),
        (lambda Y, O, X: (Y, O[:, :10], X), "shape of Y"),
        (lambda Y, O, X: (Y, O, X[:5]), "one row per sample"),
        (lambda Y, O, X: (Y[0], O, X), "2-D"),
        (lambda Y, O, X: (Y, np.where(O == O.max(), np.inf, O), X), "infinite"),
    ],
)
def test_bad_data_gets_clear_error(data, change, message):
    bad = change(*(np.array(a, np.float64) for a in data))
    with pytest.raises(ValueError, match=message):
        check_data(*bad)
    with pytest.raises(ValueError, match=message):
        fit(bad, 2, "scan")


@pytest.mark.parametrize("repeat", [0, -1, 1.5, "2", True])
def test_bad_repeat(repeat):
    with pytest.raises(ValueError, match="repeat must be a positive whole number"):
        load_oaks(repeat)


def test_bad_level_and_n_iter(data):
    with pytest.raises(ValueError, match="unknown level 'fastest'.*'eager'"):
        fit(data, 2, "fastest")
    with pytest.raises(ValueError, match="n_iter must be a positive whole number"):
        fit(data, 0, "scan")
    with pytest.raises(ValueError, match="n_iter must be a positive whole number"):
        fit(data, 2.5, "scan")


def test_data_not_given_as_y_o_x_and_a_bad_lr_say_what_to_pass(data):
    n, p = data.Y.shape
    with pytest.raises(
        TypeError,
        match=rf"got an array of shape \({n}, {p}\); pass \(Y, O, X\): counts",
    ):
        fit(data.Y, 5)
    with pytest.raises(
        TypeError,
        match=r"got a dict with keys \['O', 'X', 'Y'\]; pass \(d\['Y'\], d\['O'\], d\['X'\]\)",
    ):
        fit(data._asdict(), 5)
    for lr in (-1.0, float("nan"), 0):
        with pytest.raises(
            ValueError, match="lr must be a positive, finite learning rate such as 1.0"
        ):
            fit(data, 2, "scan", lr=lr)
    for lr in ("0.1", True):
        with pytest.raises(
            TypeError,
            match=r"lr must be a number, a learning rate such as 1.0 or 0.1, got .* \((str|bool)\)",
        ):
            fit(data, 2, "scan", lr=lr)


def test_fit_levels_takes_one_name_and_checks_every_name_before_fitting(data):
    with (
        count_compiles() as log,
        pytest.raises(ValueError, match="unknown level 'sacn'; choose from 'eager'"),
    ):
        fit_levels(data, 2, levels=["scan", "sacn"])
    assert log.compiles == [], "a bad name fails before any level runs"
    assert list(fit_levels(data, 2, levels="scan")) == ["scan"]


# ---- correctness against independent references -------------------------------------------------


@pytest.mark.parametrize("seed_", [0, 1])
def test_neg_elbo_matches_numpy_float64(jdata, seed_):
    params, Omega = random_point(jdata, seed_)
    ours = float(neg_elbo(params, jdata, Omega))
    ref = numpy_neg_elbo(params, jdata, Omega)
    assert ours == pytest.approx(ref, rel=2e-5)


@pytest.mark.parametrize("seed_", [0, 1])
def test_jax_gradient_matches_hand_written_gradient(jdata, seed_):
    params, Omega = random_point(jdata, seed_)
    auto = jax.grad(neg_elbo)(params, jdata, Omega)
    hand = neg_elbo_grads(params, jdata, Omega)
    for a, h in zip(auto, hand, strict=False):
        np.testing.assert_allclose(a, h, rtol=1e-4, atol=1e-4 * float(jnp.abs(h).max()))


def test_hand_written_gradient_matches_finite_differences_float64(jdata):
    """The analytic gradient, checked against central differences of the float64 NumPy ELBO."""
    params, Omega = random_point(jdata, 2)
    hand = neg_elbo_grads(params, jdata, Omega)
    rng = np.random.default_rng(3)
    for field in ("B", "M", "S"):
        x = np.asarray(getattr(params, field), np.float64)
        for _ in range(3):
            idx = tuple(rng.integers(0, s) for s in x.shape)
            h = 1e-5
            up, down = x.copy(), x.copy()
            up[idx] += h
            down[idx] -= h
            f_up = numpy_neg_elbo(params._replace(**{field: up}), jdata, Omega)
            f_down = numpy_neg_elbo(params._replace(**{field: down}), jdata, Omega)
            fd = (f_up - f_down) / (2 * h)
            assert float(getattr(hand, field)[idx]) == pytest.approx(
                fd, rel=1e-3, abs=1e-2
            )


def test_fast_loss_and_grads_match_reference(jdata):
    """The optimized level's fused loss and gradients equal neg_elbo and jax.grad at a random point."""
    params, _ = random_point(jdata, 4)
    Y, O, X = jdata
    n, p = Y.shape
    g = params.M.T @ params.M + jnp.diag(jnp.sum(params.S**2, axis=0))
    Omega, logdet = precision(g, n)
    state = FastState(params, None, g, Omega, logdet)
    const = jnp.sum(Y * O) + 0.5 * n * p - jnp.sum(jitbook.chapters.pln.log_stirling(Y))
    loss, grads = loss_and_grads(params, jdata, state, const, X.T @ Y)
    assert float(loss) == pytest.approx(numpy_neg_elbo(params, jdata, Omega), rel=2e-5)
    for a, h in zip(jax.grad(neg_elbo)(params, jdata, Omega), grads, strict=False):
        np.testing.assert_allclose(a, h, rtol=1e-4, atol=1e-4 * float(jnp.abs(h).max()))
    assert float(logdet) == pytest.approx(
        np.linalg.slogdet(np.asarray(Omega, np.float64))[1], rel=1e-4
    )


def test_closed_form_sigma_maximises_elbo_over_omega(jdata):
    """At Omega = Sigma^-1 the ELBO is higher than at nearby precisions (the closed form is the argmax)."""
    params, _ = random_point(jdata, 5)
    Sigma = np.asarray(closed_form_sigma(params.M, params.S), np.float64)
    best = numpy_neg_elbo(params, jdata, np.linalg.inv(Sigma))
    for scale in (0.9, 1.1):
        assert numpy_neg_elbo(params, jdata, np.linalg.inv(Sigma) * scale) > best


# ---- the levels --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def runs(data):
    return fit_levels(data, N_ITER, list(LEVELS))


def test_all_compiled_levels_give_the_same_trajectory(runs):
    ref = runs["scan"].losses
    assert ref.shape == (N_ITER,) and np.all(np.isfinite(ref))
    assert ref[-1] < 0.05 * ref[0]  # the loss does go down
    for level, res in runs.items():
        if level != "eager":
            np.testing.assert_allclose(res.losses, ref, rtol=1e-4, err_msg=level)
            np.testing.assert_allclose(
                res.params.M, runs["scan"].params.M, rtol=1e-2, atol=1e-2, err_msg=level
            )


@pytest.mark.claim("sec-pln-cost", "clm-pln-eager-exact-then-less")
def test_eager_level_agrees_to_float32_rounding_amplified_by_radam(runs, measured):
    """Eager and compiled agree exactly until RAdam's rectifier switches on, then to 0.3%."""
    eager, ref = runs["eager"].losses, runs["scan"].losses
    first = np.flatnonzero(np.asarray(eager) != np.asarray(ref))
    measured(
        "first iteration where eager and scan differ",
        int(first[0]) if first.size else -1,
    )
    gap = np.max(np.abs(np.asarray(eager) - np.asarray(ref)) / np.abs(np.asarray(ref)))
    measured("largest relative gap over the fit", float(gap))
    np.testing.assert_array_equal(eager[:5], ref[:5])
    np.testing.assert_allclose(eager, ref, rtol=3e-3)


@pytest.mark.claim("sec-pln-cost", "clm-pln-radam-rectifier")
def test_radam_rectifier_differs_between_eager_and_jit():
    """optax's RAdam computes its rectifier r with cancellation (1999 - 1993); float32 rounding differs."""
    from jitbook.chapters.pln.radam import rectifier_float64, unit_steps

    eager = np.asarray(unit_steps(8))
    jitted = np.asarray(jax.jit(unit_steps, static_argnums=0)(8))
    np.testing.assert_array_equal(
        eager[:5], jitted[:5]
    )  # before the switch: plain momentum
    assert eager[5] != jitted[5]
    ro_inf = 2 / 0.001 - 1  # written out again here, independently of the package
    ro6 = ro_inf - 2 * 6 * 0.999**6 / (1 - 0.999**6)
    exact = np.sqrt(
        (ro6 - 4) * (ro6 - 2) * ro_inf / ((ro_inf - 4) * (ro_inf - 2) * ro6)
    )
    assert rectifier_float64(6) == pytest.approx(exact, rel=1e-12)
    for value in (eager[5], jitted[5]):
        assert value == pytest.approx(exact, rel=0.03) and value != pytest.approx(
            exact, rel=1e-3
        )


@pytest.mark.claim("sec-pln-fast-level", "clm-pln-fast-radam-as-optax")
def test_fast_radam_scalars_match_optax():
    """The fast level's RAdam, one array at a time, takes the steps of the optimizer the
    other levels use (optax's RAdam, scaled by -lr, clipped), before and after the
    rectifier switches on."""
    from jitbook.chapters.pln.model import make_optimizer
    from jitbook.chapters.pln.radam import radam_step

    c1, c2, r, rect = radam_scalars(jnp.asarray(10, jnp.int32))
    assert float(c1) == pytest.approx(1 - 0.9**10, rel=1e-5) and bool(rect)
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(5, 4)), jnp.float32)
    opt = make_optimizer(0.3)
    state, ours, mu, nu = opt.init(x), x, jnp.zeros_like(x), jnp.zeros_like(x)
    theirs = x
    for count in range(1, 11):  # the rectifier switches on at step 6
        g = jnp.asarray(rng.normal(size=x.shape), jnp.float32)
        updates, state = opt.update(g, state, theirs)
        theirs = theirs + updates
        scalars = radam_scalars(jnp.asarray(count, jnp.int32))
        ours, mu, nu = radam_step(ours, g, mu, nu, scalars, 0.3)
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6, err_msg=count)


@pytest.mark.claim("sec-pln-levels", "clm-pln-scan-one-program")
def test_each_compiled_level_compiles_its_loop_once(data):
    """The scan level's loop is one jitted function holding one lax.scan of n_iter turns; a
    second fit of the same shapes compiles nothing, a new loop length a new program."""
    from jitbook.chapters.pln import device_data
    from jitbook.chapters.pln.levels import scan_program

    whole = jax.make_jaxpr(scan_program, static_argnums=1)(device_data(data), 3, 1.0)
    (call,) = whole.eqns  # one program, one call
    assert call.primitive.name in ("jit", "pjit")
    inner = call.params["jaxpr"].eqns
    assert [e.params["length"] for e in inner if e.primitive.name == "scan"] == [3]
    for level in ("scan", "namedtuple", "pytree", "equinox", "fast"):
        fit(data, 3, level)
        with count_compiles() as log:
            fit(data, 3, level)
        assert log.count == 0, level
        with count_compiles() as log:
            fit(data, 4, level)  # n_iter is static: a new loop length is a new program
        assert log.count >= 1, level


@pytest.mark.claim("sec-pln-levels", "clm-pln-lr-traced")
def test_learning_rate_is_traced_one_compile_for_two_rates(data):
    """Only n_iter is static: a second learning rate reuses every compiled level's program."""
    for level in (
        "jit_step",
        "jit_iteration",
        "scan",
        "namedtuple",
        "pytree",
        "equinox",
        "fast",
    ):
        a = fit(
            data, 10, level, lr=1.0
        )  # RAdam's first steps are clipped whatever the rate: run past them
        with count_compiles() as log:
            b = fit(data, 10, level, lr=0.01)
        assert log.count == 0, level
        assert not np.array_equal(a.losses, b.losses), level  # and the rate is used
    newton = fit_newton(data, 3)
    with count_compiles() as log:
        fit_newton(data, 3, max_step=0.5)
    assert log.count == 0 and np.isfinite(newton.losses).all()


@pytest.mark.claim("sec-pln-levels", "clm-pln-jit-iteration-one-program")
def test_jit_iteration_compiles_one_iteration_once_and_matches_scan(data):
    from jitbook.chapters.pln.levels import one_iteration

    with count_compiles() as log:
        fit(data, 2, "jit_iteration")
    assert log.count_for("one_iteration") <= 1
    with count_compiles() as log:
        res = fit(
            data, 7, "jit_iteration"
        )  # a new number of iterations is only a longer Python loop
    assert log.count_for("one_iteration") == 0 and log.compiles == [
        "stack"
    ]  # jnp.stack of 7 losses, eager
    np.testing.assert_allclose(res.losses, fit(data, 7, "scan").losses, rtol=1e-5)
    assert callable(one_iteration.lower)


@pytest.mark.claim("sec-pln-seed-bugs", "clm-pln-int-in-carry-tracer")
def test_a_python_int_in_the_scan_carry_becomes_a_tracer(measured):
    """Why sizes stay out of the carry: scan traces every leaf of its carry, so p is no longer a Python int."""

    def body(carry, _):
        return {"p": carry["p"], "x": carry["x"] + jnp.zeros(carry["p"]).sum()}, None

    with pytest.raises(TypeError, match="concrete|Shapes must be") as err:
        jax.lax.scan(body, {"p": 3, "x": 0.0}, length=2)
    measured("scan raised", type(err.value).__name__)


def test_stirling_and_exact_log_factorial_differ_by_a_constant(jdata):
    """The loss uses Stirling's log k! (0! = 1!); the exact term differs by a sum over the counts alone."""
    import math

    from jax.scipy.special import gammaln

    per_count = np.asarray(
        jitbook.chapters.pln.log_stirling(jdata.Y) - gammaln(jdata.Y + 1), np.float64
    )
    gap = float(
        per_count.sum()
    )  # summed in float64: two float32 totals would cancel most digits
    k = np.asarray(jdata.Y, np.float64).ravel()
    k1 = np.where(k == 0, 1.0, k)
    by_hand = np.sum(
        0.5 * np.log(2 * np.pi * k1)
        + k1 * (np.log(k1) - 1)
        - [math.lgamma(x + 1) for x in k]
    )
    assert gap == pytest.approx(by_hand, rel=1e-3) and abs(gap) > 1
    params, Omega = random_point(
        jdata, 0
    )  # a constant: it moves the loss, never its gradient
    grads = jax.grad(lambda Y: neg_elbo(params, (Y, jdata.O, jdata.X), Omega))(jdata.Y)
    assert grads.shape == jdata.Y.shape


def test_pytree_class_round_trip_keeps_every_field(jdata):
    pln = PLN.start(jdata).with_params(random_point(jdata, 0)[0])
    leaves, treedef = jax.tree_util.tree_flatten(pln)
    back = jax.tree_util.tree_unflatten(treedef, leaves)
    np.testing.assert_array_equal(back.Sigma, pln.Sigma)
    np.testing.assert_array_equal(back.Omega, pln.Omega)
    assert all(
        isinstance(x, jax.Array) for x in leaves
    )  # data are leaves too, never static


def test_newton_converges_past_the_radam_fit(jdata, runs):
    newton = fit_newton(jdata, 300)
    assert isinstance(newton, jitbook.chapters.pln.FitResult) and np.all(
        np.isfinite(newton.losses)
    )
    radam_1000 = fit(jdata, 1000, "fast").losses[-1]
    assert (
        newton.losses[-1] < radam_1000 * 0.98
    )  # at least 2% better than the seed's 1,000 RAdam steps
    Omega = np.linalg.inv(np.asarray(newton.Sigma, np.float64))
    np.testing.assert_allclose(
        Omega, newton.Omega, rtol=1e-2, atol=1e-3 * np.abs(Omega).max()
    )
    assert numpy_neg_elbo(newton.params, jdata, Omega) == pytest.approx(
        float(newton.losses[-1]), rel=1e-5
    )
    assert jitbook.chapters.pln.neg_elbo_numpy(
        newton.params, jdata, Omega
    ) == pytest.approx(numpy_neg_elbo(newton.params, jdata, Omega), rel=1e-12)


# ---- the seed's bugs, each shown by its effect ---------------------------------------------------


@pytest.mark.claim("sec-pln-seed-bugs", "clm-pln-log-det-overflows")
def test_seed_log_det_overflows_and_slogdet_does_not(jdata):
    losses = np.asarray(seed.fit_with(jdata, 8, seed.seed_neg_elbo)[0])
    assert np.all(np.isfinite(losses[:4])) and np.isinf(losses[5])
    Omega = fit(jdata, 5, "scan").Omega
    assert np.isinf(float(jnp.linalg.det(Omega)))
    assert np.isfinite(float(jnp.linalg.slogdet(Omega)[1]))


def test_seed_trace_precedence_bug(jdata):
    params, Omega = random_point(jdata, 0)
    M, S2sum = params.M, jnp.sum(params.S**2, axis=0)
    wrong = jnp.trace(M.T @ M + jnp.diag(S2sum) @ Omega)
    assert float(wrong) == pytest.approx(
        float(jnp.trace(M.T @ M) + jnp.trace(jnp.diag(S2sum) @ Omega)), rel=1e-5
    )
    assert abs(
        float(wrong) - float(jnp.trace((M.T @ M + jnp.diag(S2sum)) @ Omega))
    ) > 0.01 * abs(float(wrong))
    _, p_bug, _ = seed.fit_with(jdata, 1000, seed.trace_bug_neg_elbo)
    bug_final = float(
        neg_elbo(p_bug, jdata, jnp.linalg.inv(closed_form_sigma(p_bug.M, p_bug.S)))
    )
    good_final = float(fit(jdata, 1000, "scan").losses[-1])
    assert bug_final > 1.05 * good_final


def test_seed_lr_is_unused_and_ours_is_used(jdata):
    a = seed.fit_with(jdata, 30, make_opt=seed.seed_optimizer, lr=1e-4)[0]
    b = seed.fit_with(jdata, 30, make_opt=seed.seed_optimizer, lr=1.0)[0]
    np.testing.assert_array_equal(a, b)
    c = seed.fit_with(jdata, 30, lr=1e-4)[0]
    assert float(c[-1]) > 1.5 * float(
        b[-1]
    )  # with lr used, small steps: a worse loss after 30 iterations


def test_seed_class_bugs(jdata, monkeypatch):
    obj = seed.SeedPLN(*jdata)
    target = seed.SeedPLN(*jdata)
    monkeypatch.setattr(seed, "pln", target)
    obj.M = obj.M + 1.0
    obj.update_Sigma()  # writes the global, not obj
    assert bool(jnp.all(obj.Sigma == jnp.eye(114))) and not bool(
        jnp.all(target.Sigma == obj.Sigma)
    )
    obj.Sigma = 2 * jnp.eye(114)
    leaves, treedef = jax.tree_util.tree_flatten(obj)
    back = jax.tree_util.tree_unflatten(treedef, leaves)
    assert bool(jnp.all(back.Sigma == jnp.eye(114)))  # Sigma lost on unflatten
    f = jax.jit(lambda m: m.M.sum())
    f(seed.SeedPLN(*jdata))
    with pytest.raises(ValueError, match="arrays cannot be passed as metadata"):
        f(seed.SeedPLN(jdata.Y + 0, jdata.O, jdata.X))


# ---- claims of the "where the time goes" section -------------------------------------------------


@pytest.mark.claim("sec-pln-fast-level", "clm-pln-fast-ones-product-dot")
def test_a_ones_product_compiles_to_a_dot_not_a_reduce_window():
    x = jnp.ones((11_600, 114))
    by_dot = jax.jit(lambda a: jnp.ones(a.shape[0]) @ a).lower(x).compile().as_text()
    assert "reduce-window" not in by_dot and " dot(" in by_dot


@pytest.mark.claim("sec-pln-profile", "clm-pln-fast-xla-names")
def test_cpu_linear_algebra_calls_lapack_custom_calls(jdata):
    """The profile's triangular_solve, lu and cholesky rows are LAPACK custom calls, every
    one of them on p x p matrices, in the fast and the scan level alike."""
    import re

    p = jdata.Y.shape[1]
    for level, names in (("fast", {"cholesky", "triangular_solve"}), ("scan", {"lu"})):
        text = compiled_fit(jdata, 3, level).as_text()
        calls = [
            line
            for line in text.splitlines()
            if re.search(r"%(cholesky|triangular_solve|lu)[.\d]* = ", line)
            and " custom-call(" in line
        ]
        assert {re.search(r"%([a-z_]+)", c).group(1) for c in calls} >= names, level
        for call in calls:
            assert 'custom_call_target="lapack_' in call, call
            result = call.split(" = ", 1)[1].split("custom-call")[0]
            assert re.findall(r"f32\[([\d,]+)\]", result) == [f"{p},{p}"], call


def test_blas_limited_is_scoped_and_fit_runs_inside_it(data, monkeypatch):
    """A plain fit runs with the OpenBLAS setting the chapter measures; the reader's setting comes back after."""
    from jitbook.chapters.pln import levels
    from jitbook.chapters.pln.threads import BLAS_THREADS, blas_limited, blas_threads

    before = blas_threads()
    with blas_limited(1):
        assert blas_threads() == 1
    assert blas_threads() == before
    seen = []
    real = levels.LEVELS["scan"]
    monkeypatch.setitem(
        levels.LEVELS, "scan", lambda *a: seen.append(blas_threads()) or real(*a)
    )
    fit(data, 2, "scan")
    assert seen == [BLAS_THREADS] and blas_threads() == before
    with pytest.raises(ValueError, match="positive whole number"):
        blas_limited(0)


LAPACK_ROUTE = """
import json, subprocess, sys
if sys.argv[1] == "without SciPy's LAPACK":
    sys.modules["scipy.linalg.cython_lapack"] = None  # unimportable from here on
import jax, jax.numpy as jnp
try:
    jax.block_until_ready(jnp.linalg.cholesky(jnp.eye(4) * 2.0))
    error = ""
except Exception as err:
    error = f"{type(err).__name__}: {err}"
route = {"cholesky error": error}
if not error:
    import scipy.linalg.cython_lapack as lapack
    from threadpoolctl import threadpool_info
    ldd = subprocess.run(["ldd", lapack.__file__], capture_output=True, text=True)
    route["SciPy's LAPACK links"] = [
        line.split()[0] for line in ldd.stdout.splitlines() if "blas" in line
    ]
    route["pools"] = {
        info["filepath"].rsplit("/", 1)[-1]: [info["internal_api"], info["num_threads"]]
        for info in threadpool_info()
    }
print(json.dumps(route))
"""


@pytest.mark.claim("sec-pln-threads", "clm-pln-fast-openblas-pool")
def test_jax_lapack_calls_go_through_scipys_openblas_which_keeps_its_own_threads(
    measured,
):
    """In fresh processes: with SciPy's LAPACK unimportable, JAX's cholesky fails (JAX
    brings no LAPACK of its own); with it, the library SciPy's LAPACK links is an
    OpenBLAS that threadpoolctl sees with a pool of its own."""
    without, with_scipy = (
        fresh.run_for_json(["-c", LAPACK_ROUTE, case], "a cholesky")
        for case in ("without SciPy's LAPACK", "with it")
    )
    assert "cython_lapack" in without["cholesky error"]
    assert with_scipy["cholesky error"] == ""
    (library,) = with_scipy["SciPy's LAPACK links"]
    api, threads = with_scipy["pools"][library]
    measured("the library SciPy's LAPACK links, as threadpoolctl names its pool", api)
    measured("threads in that pool", threads)
    assert api == "openblas" and threads >= 1


@pytest.mark.claim("sec-pln-one-loop", "clm-pln-warm-rate")
def test_jit_step_compiles_nothing_in_a_second_fit_but_a_rebuilt_update_would(data):
    """jit_step's pieces are built once, lr an argument: a warm fit compiles nothing. A
    jax.jit(opt.update) built per fit is a new function, lr a constant in it: it would
    compile at every fit."""
    from jitbook.chapters.pln import init_params, make_optimizer

    fit(data, 2, "jit_step")
    with count_compiles() as log:
        fit(data, 2, "jit_step", lr=0.5)
    assert log.count == 0
    params = init_params(data)
    grads = jax.tree_util.tree_map(jnp.ones_like, params)
    for _ in range(2):
        opt = make_optimizer(1.0)
        state = opt.init(params)
        with count_compiles() as log:
            jax.jit(opt.update)(grads, state, params)
        assert log.count_for("update_fn") == 1


# ---- on-page evidence, public helpers and exercises -----------------------------------------------


def test_seed_loss_is_minus_inf_from_the_first_iteration_after_det_overflows(jdata):
    """The chapter's inline numbers: det(Omega) overflows after iteration k, the seed's loss is -inf from k + 1."""
    losses = np.asarray(seed.fit_with(jdata, 8, seed.seed_neg_elbo)[0])
    k = next(
        k
        for k in range(1, 8)
        if np.isinf(float(jnp.linalg.det(fit(jdata, k, "scan").Omega)))
    )
    assert np.all(np.isfinite(losses[:k])) and np.all(losses[k:] == -np.inf)


@pytest.mark.claim("sec-pln-same-numbers", "clm-pln-levels-losses-positive")
def test_corrected_losses_are_finite_and_positive_so_their_log_is_too(runs):
    """The page's figure: minus the ELBO, with slogdet, is positive and finite at every level."""
    for level, res in runs.items():
        assert np.all(np.isfinite(res.losses)) and np.all(res.losses > 0), level


@pytest.mark.claim("sec-pln-levels", "clm-pln-levels-differ-in-compile")
def test_every_level_runs_the_same_iteration_and_each_compiles_other_programs(
    runs, jdata
):
    """The same iteration: every level's first losses are the scan level's, to float32
    rounding. Different compiles: no two levels' first fits, each from empty caches in a fresh
    process, compile the same programs."""
    from jitbook.chapters.pln.levels import first_fit_compiles

    ref = runs["scan"].losses
    for level, res in runs.items():
        np.testing.assert_allclose(res.losses[:5], ref[:5], rtol=1e-4, err_msg=level)
    compiled = {lv: sorted(first_fit_compiles(jdata, 3, lv)) for lv in LEVELS}
    for a in LEVELS:
        for b in LEVELS:
            if a < b:
                assert compiled[a] != compiled[b], (a, b)


def test_newton_loss_scales_with_repeat():
    """Repeating every row multiplies the loss by `repeat` (so the pyPLNmodels reference scales)."""
    one = fit_newton(load_oaks(1), 50).losses
    two = fit_newton(load_oaks(2), 50).losses
    np.testing.assert_allclose(two, 2 * one, rtol=1e-4)


def test_compiled_fit_and_cost(data):
    from jitbook.programs import cost_summary

    scan, fast_ = (
        cost_summary(compiled_fit(data, 3, "scan")),
        cost_summary(compiled_fit(data, 3, "fast")),
    )
    assert set(scan) == {"flops", "transcendentals", "bytes accessed"}
    assert (
        0 < fast_["flops"] < scan["flops"]
    )  # hand-written gradients: less arithmetic than autodiff
    with pytest.raises(ValueError, match="one-program levels"):
        compiled_fit(data, 3, "eager")


def test_ms_of_sums_matching_operations():
    from jitbook.chapters.pln.profile import ms_of

    rows = [
        {"operation": "lu.3", "ms / iter": 0.5},
        {"operation": "dot.1", "ms / iter": 0.25},
        {"operation": "triangular_solve.2", "ms / iter": 1.0},
    ]
    assert ms_of(rows, ("lu", "triangular_solve")) == 1.5 and ms_of(rows, ("",)) == 1.75
    assert ms_of(rows, ("cholesky",)) == 0


def test_op_profile_top_none_returns_every_operation(jdata):
    from jitbook.chapters.pln.profile import op_profile

    fit(jdata, 3, "scan")
    every = op_profile(lambda: fit(jdata, 3, "scan").losses, 3, top=None)
    assert (
        len(every) > 8
        and op_profile(lambda: fit(jdata, 3, "scan").losses, 3)[:1][0]["operation"]
    )


@pytest.mark.claim("sec-pln-fast-level", "clm-pln-fast-barrier")
def test_without_the_barrier_xla_fuses_the_gradient_into_more_updates(
    jdata, monkeypatch
):
    """Point 4 of the fast level: without optimization_barrier, more fused loops read the exponential A
    (each recomputes the gradient from it); the exponential itself is computed once either way."""
    import re

    from jitbook.chapters.pln import fast

    def readers_of_exp():
        jax.clear_caches()  # jit caches the traced function: force a fresh trace
        fn = jax.jit(fast.fast_program.__wrapped__, static_argnames="n_iter")
        text = fn.lower(jdata, 3, 1.0).compile().as_text()
        assert len(re.findall(r"\bexponential\(", text)) == 1
        return sum(
            1
            for line in text.splitlines()
            if re.search(r"\(.*%\w*exponential_fusion\b", line) and " = " in line
        )

    with_barrier = readers_of_exp()
    monkeypatch.setattr(jax.lax, "optimization_barrier", lambda x: x)
    assert readers_of_exp() > with_barrier


# exercises: the reference solutions pass when the chapter runs; here, plausible wrong answers fail


def _model_grad_M(params, data, Omega):
    return neg_elbo_grads(params, data, Omega).M


def test_exercise_seed_grad_M_rejects_the_corrected_gradient():
    from jitbook.exercises import check

    assert (
        "gradient of the corrected loss"
        in check("pln.seed-grad-M", _model_grad_M).message
    )
    assert check("pln.seed-grad-M", lambda p, d, O: p.M).passed is False


def test_exercise_grad_omega_rejects_sign_and_factor_errors():
    from jitbook.exercises import check

    def elbo_grad(M, S, Omega):
        G = M.T @ M + jnp.diag(jnp.sum(S * S, axis=0))
        return M.shape[0] / 2 * jnp.linalg.inv(Omega) - G / 2

    def no_n(M, S, Omega):
        return (M.T @ M + jnp.diag(jnp.sum(S * S, axis=0))) / 2 - jnp.linalg.inv(
            Omega
        ) / 2

    assert "flip the sign" in check("pln.grad-omega", elbo_grad).message
    assert "factor n/2" in check("pln.grad-omega", no_n).message


def test_exercise_trace_term_rejects_seed_value_and_MtM():
    from jitbook.exercises import check

    def seed_trace(M, S, Omega):
        return jnp.trace(M.T @ M + jnp.diag(jnp.sum(S * S, axis=0)) @ Omega)

    def with_MtM(M, S, Omega):
        return jnp.trace((M.T @ M + jnp.diag(jnp.sum(S * S, axis=0))) @ Omega)

    def broadcast_MtM(M, S, Omega):
        G = (M[:, :, None] * M[:, None, :]).sum(0) + jnp.diag(jnp.sum(S * S, axis=0))
        return jnp.sum(G * Omega)

    assert "2023 tutorial's value" in check("pln-fast.trace-term", seed_trace).message
    assert "that is MᵀM" in check("pln-fast.trace-term", with_MtM).message
    assert "that is MᵀM" in check("pln-fast.trace-term", broadcast_MtM).message


# ---- the tutorial's NaN log, its level 4, its un-jitted scan ------------------------------------


@pytest.mark.claim("sec-pln-seed-bugs", "clm-pln-log-nan-from-overflow")
def test_seed_log_of_losses_is_nan_where_det_overflowed_not_because_of_a_sign(jdata):
    """The tutorial stored minus the ELBO: positive, then -inf once det(Omega) overflows; log -> NaN."""
    losses = np.asarray(seed.fit_with(jdata, 8, seed.seed_neg_elbo)[0])
    finite = np.isfinite(losses)
    assert (
        finite[:4].all()
        and np.all(losses[finite] > 0)
        and np.all(losses[~finite] == -np.inf)
    )
    with pytest.warns(RuntimeWarning, match="invalid value encountered in log"):
        logs = np.log(losses)
    np.testing.assert_array_equal(np.isnan(logs), ~finite)
    np.testing.assert_allclose(logs[:4], np.log(losses[:4]))
    assert np.all(logs[:4] > 0)


@pytest.mark.claim("sec-pln-seed-bugs", "clm-pln-level4-identity")
def test_seed_level4_fits_omega_identity_and_leaves_a_tracer_in_the_global(
    jdata, monkeypatch
):
    """update_* write the global (not jitted: plain methods); the carried copy keeps Omega = I."""
    assert not hasattr(
        seed.SeedPLN.update_Sigma, "lower"
    )  # a plain method, not a jitted one
    monkeypatch.setattr(seed, "pln", seed.SeedPLN(*jdata))
    level4 = np.asarray(seed.fit_level4(seed.pln, 8))
    held = np.asarray(seed.fit_with(jdata, 8, seed.identity_omega_neg_elbo)[0])
    updated = np.asarray(seed.fit_with(jdata, 8, seed.seed_neg_elbo)[0])
    np.testing.assert_allclose(level4, held, rtol=1e-6)
    assert np.all(np.isfinite(level4)) and not np.allclose(
        level4[1:4], updated[1:4], rtol=1e-6
    )
    with warnings.catch_warnings():
        warnings.simplefilter(
            "error"
        )  # no NumPy warning: the tutorial's level-4 curve had none
        np.log(level4)
    for leaked in (seed.pln.Sigma, seed.pln.Omega):
        assert isinstance(leaked, jax.core.Tracer)
        with pytest.raises(jax.errors.UnexpectedTracerError):
            jnp.sum(leaked)


@pytest.mark.claim("sec-pln-seed-bugs", "clm-pln-scan-cached-by-body")
def test_unjitted_scan_compiles_per_body_function_so_the_tutorial_compiles_every_call(
    jdata,
):
    """lax.scan outside jit compiles its loop, cached by body function; scan_fit's body is new each call."""
    for _ in range(2):
        with count_compiles() as log:
            seed.scan_fit(jdata, 5)
        assert log.count_for("scan") == 1
    jitted = jax.jit(seed.scan_fit, static_argnums=1)
    counts = []
    for _ in range(2):
        with count_compiles() as log:
            jitted(jdata, 5)
        counts.append(log.count_for("scan_fit"))
    assert counts == [1, 0]

    def body(c, _):
        return c * 2.0 + 1.0, c

    x = jnp.ones(3)
    counts = []
    for _ in range(2):
        with count_compiles() as log:
            jax.lax.scan(body, x, length=4)
        counts.append(log.count_for("scan"))
    assert counts == [1, 0]  # one body function: compiled once, then cached


@pytest.mark.claim("sec-pln-seed-bugs", "clm-pln-aot-plain-compiles")
def test_aot_compiled_program_is_not_used_by_the_plain_function(jdata):
    with count_compiles() as aot:
        compiled = jax.jit(seed.scan_fit, static_argnums=1).lower(jdata, 6).compile()
    assert aot.count == 1
    with count_compiles() as plain:
        seed.scan_fit(jdata, 6)
    assert plain.count_for("scan") == 1
    with count_compiles() as call:
        losses = compiled(jdata)[0]
    assert call.count == 0 and losses.shape == (6,)


def test_scan_fit_is_the_jitted_fit_and_level4_needs_the_global(jdata, monkeypatch):
    np.testing.assert_allclose(
        np.asarray(seed.scan_fit(jdata, 4, seed.seed_neg_elbo)[0]),
        np.asarray(seed.fit_with(jdata, 4, seed.seed_neg_elbo)[0]),
        rtol=1e-6,
    )
    monkeypatch.setattr(seed, "pln", None)
    with pytest.raises(AttributeError, match="NoneType"):
        seed.fit_level4(seed.SeedPLN(*jdata), 2)


# ---- pln-fast: the guard's wording and its one factorisation -------------------------------------


@pytest.mark.claim("sec-pln-fast-level", "clm-pln-fast-one-cholesky")
def test_fast_level_factors_once_where_scan_factors_twice(jdata):
    """inv (an LU) plus slogdet (another LU) against one Cholesky; the two triangular solves stay."""
    from jitbook.chapters.pln.lapack import lapack_calls

    lu, chol, trsm = (
        "LU factorisation (getrf)",
        "Cholesky factorisation (potrf)",
        "triangular solve (trsm)",
    )
    a = jnp.eye(5) * 2.0
    assert lapack_calls(jax.jit(jnp.linalg.inv).lower(a).compile()) == {
        lu: 1,
        chol: 0,
        trsm: 2,
    }
    assert lapack_calls(jax.jit(jnp.linalg.slogdet).lower(a).compile())[lu] == 1
    assert lapack_calls(compiled_fit(jdata, 3, "scan")) == {lu: 2, chol: 0, trsm: 2}
    assert lapack_calls(compiled_fit(jdata, 3, "fast")) == {lu: 0, chol: 1, trsm: 2}
    with pytest.raises(TypeError, match="compiled program"):
        lapack_calls(3)


def _dot_text(xla_flags: str) -> str:
    import os

    code = (
        "import jax, jax.numpy as jnp\n"
        "a, w = jnp.ones((256, 114)), jnp.ones((114, 114))\n"
        "print(jax.jit(lambda a, w: a @ w).lower(a, w).compile().as_text())"
    )
    env = {**os.environ, "XLA_FLAGS": xla_flags}
    return fresh.python_output(code, env)


@pytest.mark.claim("sec-pln-profile", "clm-pln-fast-ynn-fusion-stays")
def test_guard_flag_takes_reductions_out_of_ynn_fusion_and_leaves_it_on(jdata):
    """'=-reduce' removes one fusion type; the empty value would turn YNN fusion off altogether."""
    assert jitbook.guard.XLA_FLAG.endswith("=-reduce")
    assert (
        '"kind":"__ynn_fusion"' in compiled_fit(jdata, 3, "scan").as_text()
    )  # this process: guarded
    assert "__ynn_fusion" in _dot_text(jitbook.guard.XLA_FLAG)
    assert "__ynn_fusion" not in _dot_text("--xla_cpu_experimental_ynn_fusion_type=")


# ---- the PLN pages' explanations, each a claim measured here -------------------------------------


@pytest.mark.claim("sec-pln-same-numbers", "clm-pln-integer-pow")
def test_power_is_integer_pow_eager_and_pow_under_jit():
    """`b2 ** count`: concrete count -> integer_pow, traced count -> pow; and optax's own
    update compiles integer_pow programs eagerly and records pow when traced."""
    import optax

    from jitbook.chapters.pln.radam import power_primitive

    assert power_primitive(traced=False) == "integer_pow"
    assert power_primitive(traced=True) == "pow"
    radam, g = optax.scale_by_radam(), jnp.ones(1)
    state = radam.init(g)
    jax.clear_caches()
    with count_compiles() as eager:
        radam.update(g, state)
    assert "integer_pow" in eager.compiles and "pow" not in eager.compiles
    traced = [e.primitive.name for e in jax.make_jaxpr(radam.update)(g, state).eqns]
    assert "pow" in traced


@pytest.mark.claim("sec-pln-same-numbers", "clm-pln-same-rho")
def test_same_b2t_gives_same_rho_eager_and_jit():
    """The two primitives give two b2^t; from either one, eager and jit give one rho."""
    from jitbook.chapters.pln.radam import rounding_apart

    rows = rounding_apart(6)
    assert rows[0]["b2^t"] != rows[1]["b2^t"]
    assert rows[0]["rho, eager"] != rows[1]["rho, eager"]
    for row in rows:
        assert row["rho, eager"] == row["rho, jit"]


@pytest.mark.claim("sec-pln-levels", "clm-pln-eager-per-function")
def test_eager_fit_compiles_one_program_per_jitted_jnp_function_and_per_primitive_otherwise(
    jdata,
):
    """An eager fit compiles a jitted jnp function as one program named after it (matmul,
    not the primitive dot_general) and jnp.eye, built from primitives, as one program per
    primitive (iota, ..., no program named eye); all compiled once, each further iteration
    adding one integer_pow only."""
    assert hasattr(jnp.matmul, "lower") and not hasattr(jnp.eye, "lower")
    logs = []
    for n_iter in (2, 3, 5):
        jax.clear_caches()
        with count_compiles() as log:
            fit(jdata, n_iter, "eager")
        logs.append(log.compiles)
        assert "matmul" in log.compiles and "dot_general" not in log.compiles
        assert "iota" in log.compiles and "eye" not in log.compiles
    assert len(logs[0]) > 20
    for fewer, more, extra in ((logs[0], logs[1], 1), (logs[1], logs[2], 2)):
        added = list(more)
        for name in fewer:
            added.remove(name)
        assert added == ["integer_pow"] * extra


@pytest.mark.claim("sec-pln-cost", "clm-pln-setup-programs")
def test_first_fit_compiles_eager_setup_programs_outside_the_loop(jdata):
    from jitbook.chapters.pln.levels import first_fit_compiles, first_fit_programs
    from jitbook.chapters.why_compile import op_by_op_programs

    row = first_fit_programs(jdata, 5, "jit_iteration")
    eager = row["eager programs (set-up and gathering)"]
    assert eager == row["programs compiled"] - 1 > 0  # all but the one loop program
    # a jitted jnp function is one program; one built from primitives is one per primitive
    p = jdata.Y.shape[1]
    eye = op_by_op_programs(jnp.eye, p)
    zeros = op_by_op_programs(jnp.zeros, jdata.Y.shape)
    stack = op_by_op_programs(jnp.stack, [jnp.float32(0.0)] * 3)
    assert "iota" in eye and "eye" not in eye
    assert (
        len(eye) >= len(jax.make_jaxpr(lambda: jnp.eye(p))().eqns) > 2
    )  # per primitive
    assert "broadcast_in_dim" in zeros and "zeros" not in zeros
    stacked = jax.make_jaxpr(lambda *v: jnp.stack(v))(*[jnp.float32(0.0)] * 3)
    assert stack == [e.primitive.name for e in stacked.eqns]  # its primitives, one each
    # a jitted jnp function, on shapes nothing compiled yet: one program, named after it
    a, b = jnp.ones((3, 7), jnp.float16), jnp.ones((7, 5), jnp.float16)
    assert hasattr(jnp.matmul, "lower")
    with count_compiles() as log:
        jnp.matmul(a, b).block_until_ready()
    assert log.compiles == ["matmul"]
    assert "dot_general" in str(jax.make_jaxpr(jnp.matmul)(a, b))
    # and the fit's eager count holds them: an eye at the set-up, a stack after the loop
    names = first_fit_compiles(jdata, 5, "jit_iteration")
    assert "stack" in names and "iota" in names and "one_iteration" in names
    assert "concatenate" not in names  # jnp.stack's inside stays inside its one program


@pytest.mark.claim("sec-pln-cost", "clm-pln-one-loop-program")
def test_loop_is_one_program_and_jit_step_one_per_piece(jdata):
    from jitbook.chapters.pln.levels import LOOP_PROGRAMS, first_fit_programs

    for level in ("jit_iteration", "scan", "namedtuple", "pytree", "equinox", "fast"):
        row = first_fit_programs(jdata, 5, level)
        assert row["jitted programs of the loop"] == 1, level
    row = first_fit_programs(jdata, 5, "jit_step")
    assert row["jitted programs of the loop"] == len(LOOP_PROGRAMS["jit_step"]) == 5


@pytest.mark.claim("sec-pln-organisations", "clm-pln-organisations-setup")
def test_pytree_and_equinox_build_their_start_eagerly(jdata):
    from jitbook.chapters.pln.levels import first_fit_programs

    key = "eager programs (set-up and gathering)"
    eager = {
        lv: first_fit_programs(jdata, 5, lv)[key] for lv in LEVELS if lv != "eager"
    }
    for outside in ("pytree", "equinox"):
        for inside in ("scan", "namedtuple"):
            assert eager[outside] > eager[inside], eager


@pytest.mark.claim("sec-pln-one-loop", "clm-pln-state-new-buffers")
def test_every_jitted_iteration_returns_its_state_in_new_buffers(jdata):
    """Undonated, the compiled iteration aliases no output to an input: each n x p array of
    the state (M, S and RAdam's two moments of each) comes back in a buffer of its own, and
    the old state stays alive beside it."""
    from jitbook.chapters.pln.levels import FitState, one_iteration
    from jitbook.chapters.pln.model import init_params, make_optimizer

    params = init_params(jdata)
    eye = jnp.eye(jdata.Y.shape[1])
    state = FitState(params, eye, eye + 0, make_optimizer(1.0).init(params))
    big = [x for x in jax.tree.leaves(state) if x.shape == jdata.Y.shape]
    assert len(big) == 6  # M, S, and the first and second moments of each
    memory = one_iteration.lower(state, jdata, 1.0).compile().memory_analysis()
    assert memory.alias_size_in_bytes == 0
    assert memory.output_size_in_bytes >= sum(x.nbytes for x in big)
    new, _ = one_iteration(state, jdata, 1.0)
    fresh = [x for x in jax.tree.leaves(new) if x.shape == jdata.Y.shape]
    assert not any(x.is_deleted() for x in big)
    old_pointers = {x.unsafe_buffer_pointer() for x in big}
    assert not old_pointers & {x.unsafe_buffer_pointer() for x in fresh}


@pytest.mark.claim("sec-pln-one-loop", "clm-pln-donation-aliases")
def test_donated_iteration_aliases_state_and_deletes_old_buffers(jdata):
    from jitbook.chapters.pln.levels import FitState, one_iteration_donated
    from jitbook.chapters.pln.model import init_params, make_optimizer

    params = init_params(jdata)
    eye = jnp.eye(jdata.Y.shape[1])
    state = FitState(params, eye, eye + 0, make_optimizer(1.0).init(params))
    text = one_iteration_donated.lower(state, jdata, 1.0).as_text()
    assert "tf.aliasing_output" in text or "jax.buffer_donor" in text
    old = jax.tree.leaves(state)
    one_iteration_donated(state, jdata, 1.0)
    assert all(x.is_deleted() for x in old if x.shape == jdata.Y.shape)


@pytest.mark.claim("sec-pln-seed-bugs", "clm-pln-not-valid-type")
def test_plain_class_is_not_a_valid_jax_type_in_a_scan_carry():
    obj = seed.PlainPLN(jnp.ones(2), jnp.ones(2))
    assert jax.tree.leaves(obj) == [obj]  # not a pytree: one opaque leaf
    with pytest.raises(TypeError, match="is not a valid JAX type"):
        seed.carry_through_scan(obj)


@pytest.mark.claim("sec-pln-seed-bugs", "clm-pln-register-dataclass")
def test_register_dataclass_makes_arrays_children_and_static_fields_structure():
    obj = seed.DataclassPLN(jnp.ones(2), 2 * jnp.ones(2), n_iter=3)
    leaves, treedef = jax.tree.flatten(obj)
    assert len(leaves) == 2 and "3" in str(treedef)
    back = seed.carry_through_scan(obj)
    assert back.n_iter == 3 and float(back.S.sum()) == 4.0
    other = seed.DataclassPLN(jnp.ones(2), jnp.ones(2), n_iter=4)
    assert jax.tree.structure(other) != treedef  # the static field is in the structure


@pytest.mark.claim("sec-pln-seed-bugs", "clm-pln-scan-body-new")
def test_lax_scan_outside_jit_caches_by_body_function():
    def shared(c, _):
        return c + 1.0, None

    def run(body):
        with count_compiles() as log:
            jax.lax.scan(body, 0.0, length=3)
        return log.count_for("scan")

    run(shared)
    assert run(shared) == 0  # the same body: the cached loop
    assert run(lambda c, _: (c + 1.0, None)) == 1  # a new body: compiled again


@pytest.mark.claim("sec-pln-profile", "clm-pln-fast-ynn-dots")
def test_each_ynn_fusion_computes_one_dot(jdata):
    from jitbook.chapters.pln.profile import ynn_fusion_ops

    for level in ("scan", "fast"):
        ops = ynn_fusion_ops(compiled_fit(jdata, 5, level))
        assert ops, level  # the profile's ynn_fusion rows exist in the program
        assert all(kinds == ["dot"] for kinds in ops.values()), ops


def test_ms_of_counts_ynn_fusion_rows_with_the_dots():
    from jitbook.chapters.pln.profile import ms_of

    rows = [
        {"operation": "dot.3", "ms / iter": 0.5},
        {"operation": "ynn_fusion.1", "ms / iter": 4.0},
        {"operation": "lu", "ms / iter": 0.25},
    ]
    assert ms_of(rows, ("dot", "ynn_fusion")) == 4.5 and ms_of(rows, ("lu",)) == 0.25


@pytest.mark.claim("sec-pln-profile", "clm-pln-fast-39103-fixed")
def test_issue_39103_reproducer_agrees_eager_and_jit_without_the_guard():
    from jitbook.chapters.pln.profile import issue_39103_in_fresh_process

    got = issue_39103_in_fresh_process()
    assert got["jax"] == jax.__version__
    assert got["eager"] == got["jit"] == float(32_768**2)


@pytest.mark.claim("sec-pln-profile", "clm-pln-fast-guard-reduce-window")
def test_guard_flag_turns_a_large_sum_into_a_reduce_window():
    from jitbook.chapters.pln.profile import big_sum_in_fresh_process
    from jitbook.guard import XLA_FLAG

    for shape in [(1000, 114), (11_600, 114)]:  # a small sum and the PLN problem's
        plain = big_sum_in_fresh_process("", shape)
        guarded = big_sum_in_fresh_process(XLA_FLAG, shape)
        assert not plain["reduce-window"] and plain["fusions"] >= 1, shape
        assert guarded["reduce-window"] and guarded["XLA_FLAGS"] == f"`{XLA_FLAG}`", (
            shape
        )


@pytest.mark.claim("sec-pln-threads", "clm-pln-fast-one-race")
def test_one_race_runs_every_loop_once_per_round_in_rotating_order():
    calls = []
    variants = {name: (lambda name=name: calls.append(name)) for name in "abcd"}
    jitbook.timing.race(variants, rounds=4, min_time=0, warmup=0)
    rounds = [calls[i : i + 4] for i in range(0, 16, 4)]
    assert all(sorted(r) == list("abcd") for r in rounds)
    assert [r[0] for r in rounds] == list("abcd")  # each round starts one later

    # a change of load falls on all four alike: a burst that slows every call of the third round
    # five-fold (as a busy machine would) slows each loop in that round, and no loop's ratio to
    # another moves
    import time

    done, base = [0], {"a": 0.02, "b": 0.04, "c": 0.06, "d": 0.08}

    def loaded(name):
        def call():
            burst = 5 if done[0] // 4 == 2 else 1  # the third round's four calls
            done[0] += 1
            time.sleep(base[name] * burst)

        return call

    raced = jitbook.timing.race(
        {n: loaded(n) for n in base}, rounds=4, min_time=0, warmup=0
    )
    for name, times in raced.times.items():
        assert times[2] > 2.5 * sorted(times[:2] + times[3:])[1], (
            name,
            times,
        )  # slowed in round 3
    for r in range(4):
        ratios = [raced.times[n][r] / raced.times["a"][r] for n in base]
        assert ratios == pytest.approx([1, 2, 3, 4], rel=0.4), (r, ratios)


@pytest.mark.claim("sec-pln-threads", "clm-pln-fast-limit-restored")
def test_fit_limits_openblas_for_the_fit_only(jdata):
    from threadpoolctl import threadpool_limits

    from jitbook.chapters.pln import threads

    with threadpool_limits(limits=2, user_api="blas"):
        seen = []
        original = threads.blas_limited

        def spy(*args):
            limiter = original(*args)
            seen.append(threads.blas_threads())
            return limiter

        import jitbook.chapters.pln.levels as levels_module

        levels_module.blas_limited, saved = spy, levels_module.blas_limited
        try:
            fit(jdata, 2, "scan")
        finally:
            levels_module.blas_limited = saved
        assert seen == [1] and threads.blas_threads() == 2


@pytest.mark.claim("sec-pln-fast-level", "clm-pln-fast-trace-np")
def test_trace_term_is_n_times_p_at_the_closed_form(jdata):
    from jitbook.chapters.pln.fast import gram

    result = fit(jdata, 20, "scan")
    M, S = result.params.M, result.params.S
    n, p = jdata.Y.shape
    Omega = jnp.linalg.inv(closed_form_sigma(M, S))
    assert float(jnp.trace(gram(M, S) @ Omega)) == pytest.approx(n * p, rel=1e-4)
