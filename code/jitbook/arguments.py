"""Checks of a reader's arguments, each refusing bad input with a message that says
what was expected and what came."""

import numbers


def whole_number(value, name: str, minimum: int = 1, example: str = "") -> int:
    """``value`` as an int if it is a whole number (a NumPy integer too, not a bool) of
    at least ``minimum``, else a ValueError naming ``name``, what it must be, an example
    and what came."""
    whole = isinstance(value, numbers.Integral) and not isinstance(value, bool)
    if not whole or value < minimum:
        must = (
            "a positive whole number"
            if minimum == 1
            else f"a whole number >= {minimum}"
        )
        such = f", e.g. {example}" if example else ""
        raise ValueError(f"{name} must be {must}{such}, got {value!r}.")
    return int(value)
