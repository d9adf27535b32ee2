"""One switch for problem sizes: ``JITBOOK_SMALL=1`` (set by the test suite) picks the
small size."""

import os

ENV_VAR = "JITBOOK_SMALL"


def is_small() -> bool:
    """Whether chapters should use their small problem sizes."""
    value = os.environ.get(ENV_VAR, "0").strip().lower()
    if value not in ("", "0", "1", "false", "true"):
        raise ValueError(
            f"{ENV_VAR} must be 1 (small problems, for tests) or 0 (full size), got "
            f"{value!r}."
        )
    return value in ("1", "true")


def pick(*, full, small):
    """``full`` normally, ``small`` when ``JITBOOK_SMALL=1``: ``pick(full=100,
    small=2)``."""
    return small if is_small() else full
