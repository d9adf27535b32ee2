"""The Poisson log-normal worked example: data, model, and the levels of compilation."""

from .data import PLNData, check_data, load_oaks
from .model import Params, closed_form_sigma, init_params, log_stirling, make_optimizer, neg_elbo, neg_elbo_grads
from .levels import FitResult, fit
