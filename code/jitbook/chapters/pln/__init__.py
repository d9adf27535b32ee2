"""The Poisson log-normal worked example: data, model, the levels of compilation, and a
converging fit."""

from jitbook.chapters.pln.converge import fit_newton
from jitbook.chapters.pln.data import (
    TUTORIAL_REPEAT,
    PLNData,
    check_data,
    device_data,
    load_oaks,
)
from jitbook.chapters.pln.levels import LEVELS, FitResult, fit, fit_levels
from jitbook.chapters.pln.model import (
    Params,
    closed_form_sigma,
    init_params,
    log_stirling,
    make_optimizer,
    neg_elbo,
    neg_elbo_grads,
    neg_elbo_numpy,
)

__all__ = [
    "LEVELS",
    "TUTORIAL_REPEAT",
    "FitResult",
    "PLNData",
    "Params",
    "check_data",
    "closed_form_sigma",
    "device_data",
    "fit",
    "fit_levels",
    "fit_newton",
    "init_params",
    "load_oaks",
    "log_stirling",
    "make_optimizer",
    "neg_elbo",
    "neg_elbo_grads",
    "neg_elbo_numpy",
]
