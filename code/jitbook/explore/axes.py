"""Axes an explorer's reader can read: one tick format, numbers as the book writes them
(``1,024``, never ``1.02e+03``), several ticks on a log axis, none printed over another.
"""

import math
import numbers
from collections.abc import Sequence

from jitbook.display import number

# Log-axis ticks from coarse to fine: the first set that gives at least three ticks in
# the data's range is used (a narrow range gets 1-2-5 or every digit, a wide one
# powers of ten).
LOG_STEPS = ((1,), (1, 3), (1, 2, 5), (1, 2, 3, 5, 7), tuple(range(1, 10)))
MOST_TICKS = 8
# Neighbouring values closer than this factor on a log axis would print their labels
# over each other: the axis gets evenly spread ticks instead of one per value.
APART = 1.8


def nice(step: float) -> float:
    """The smallest of 1, 2, 5 times a power of ten that is at least ``step``."""
    power = 10 ** math.floor(math.log10(step))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= step)


def tick_text(value: float) -> str:
    """A tick label as the tables print it: ``1,024``, ``0.5``, ``20``."""
    value = float(value)
    return f"{int(value):,}" if value.is_integer() else number(value, 3)


def log_ticks(low: float, high: float) -> list[float]:
    """Several readable ticks between ``low`` and ``high`` (both > 0) on a log axis."""
    ticks: list[float] = []
    for steps in LOG_STEPS:
        ticks = [
            float(f"{m * 10.0**k:.3g}")
            for k in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1)
            for m in steps
            if low <= m * 10.0**k <= high
        ]
        if len(ticks) >= 3:
            break
    if len(ticks) < 3:  # inside one decade: evenly spaced round values
        step = nice((high - low) / 4)
        first = math.ceil(low / step)
        ticks = [float(f"{k * step:.6g}") for k in range(first, int(high // step) + 1)]
    while len(ticks) > MOST_TICKS:
        ticks = ticks[::2]
    return ticks or [low, high]


def _numbers(values: Sequence) -> list[float]:
    return [
        float(v)
        for v in values
        if isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v)
    ]


def axis(values: Sequence, log: bool) -> dict:
    """Ticks for an axis drawing ``values``: labelled by ``tick_text`` on a log axis,
    thousands separated and whole numbers for counts on a linear one, zero drawn."""
    nums = _numbers(values)
    if not nums:
        return {}  # categories: Plotly writes them as given
    if log:
        positive = sorted({v for v in nums if v > 0})
        if not positive:
            return {}
        ratios = [b / a for a, b in zip(positive, positive[1:], strict=False)]
        if 1 < len(positive) <= MOST_TICKS and min(ratios) >= APART:
            ticks = positive  # a few well-spread choices: a tick at each
        else:
            ticks = log_ticks(positive[0], positive[-1])
        return {"tickvals": ticks, "ticktext": [tick_text(v) for v in ticks]}
    style = {"zeroline": True, "zerolinewidth": 2, "separatethousands": True}
    if all(v.is_integer() for v in nums):
        top = max(abs(v) for v in nums) or 1
        style.update({"tickformat": ",d", "tick0": 0, "dtick": max(1, nice(top / 5))})
    else:
        style["tickformat"] = ",~r"  # 0.25, 1.5, 1,024: no SI suffix, no exponent
    style["nticks"] = 6
    return style


def with_axes(layout: dict, xs: Sequence, ys: Sequence) -> dict:
    """``layout`` with readable ticks on both axes for the values drawn."""
    layout["xaxis"].update(axis(xs, layout["xaxis"]["type"] == "log"))
    layout["yaxis"].update(axis(ys, layout["yaxis"]["type"] == "log"))
    return layout


def layout(
    title: str, x_title: str, y_title: str, log_x: bool = False, log_y: bool = False
) -> dict:
    """The layout every explorer starts from: titled axes, room for long tick labels."""
    return {
        "title": {"text": title},
        "height": 420,
        "margin": {"t": 90, "l": 70, "r": 20, "b": 60},
        "xaxis": {
            "title": {"text": x_title},
            "type": "log" if log_x else "-",
            "automargin": True,
        },
        "yaxis": {
            "title": {"text": y_title},
            "type": "log" if log_y else "-",
            "automargin": True,
        },
        "legend": {"orientation": "h", "y": -0.2},
    }
