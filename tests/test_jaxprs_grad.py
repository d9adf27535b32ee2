"""jaxprs, the jaxpr of a gradient: jax.grad(f) is a function whose jaxpr jit compiles."""

import jax
import jax.numpy as jnp
import pytest

from jitbook.chapters import jaxprs_grad, pitfalls


@pytest.mark.claim("sec-jaxprs-grad", "clm-jaxprs-grad-jaxpr")
def test_the_jaxpr_of_a_gradient_holds_the_function_then_its_derivative_and_jit_compiles_it():
    facts = jaxprs_grad.grad_jaxpr_facts(1.0)
    forward, gradient = facts["wiggle"], facts["jax.grad(wiggle)"]
    assert forward == ["sin", "mul"] and "cos" not in forward
    assert "cos" in gradient and gradient[-1] == "add_any"
    rest = iter(gradient)  # wiggle's equations appear in order within the gradient's
    assert all(name in rest for name in forward)
    assert facts["inside jax.jit(jax.grad(wiggle))"] == gradient
    assert facts["the gradient's jaxpr, evaluated"] == facts["jax.grad(wiggle)(x)"]
    assert facts["jax.grad(wiggle)(x)"] == pytest.approx(
        facts["cos(x) x + sin(x), by hand"], rel=1e-6
    )
    # not a property of sin: cos(x) * x gets a sin it never calls
    other = jax.make_jaxpr(jax.grad(lambda x: jnp.cos(x) * x))(1.0)
    assert "sin" in jaxprs_grad.primitive_names(other)
    with pytest.raises(TypeError, match="Python number"):
        jaxprs_grad.grad_jaxpr_facts(jnp.ones(()))


@pytest.mark.claim("sec-jaxprs-grad", "clm-jaxprs-grad-without-jaxpr")
def test_grad_runs_a_value_branch_that_make_jaxpr_refuses():
    for x, want in ((3.0, 6.0), (-2.0, -1.0)):  # both branches, each taken on its value
        assert float(jax.grad(pitfalls.branchy)(x)) == want
        with pytest.raises(jax.errors.ConcretizationTypeError):
            jax.make_jaxpr(pitfalls.branchy)(x)
