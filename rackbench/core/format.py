"""The one number formatter: every table, message and page rackbench writes shows a number through here, so one
value reads the same everywhere (the summary, report.md, report.html, the terminal, ``rackbench compare``, a
verdict's message).

A unit says how a value reads:

=========  ==========================  ===============
unit       value                       reads
=========  ==========================  ===============
tok/s      tokens per second           1,079.9
rate       anything else per second    12.3
ms, s      a duration                  45.7
share      a fraction 0..1             64.5%
count      requests, tokens, GPUs      1,079,920
ratio      one arm over another        1.11x
conc       live sessions               5.8
change     a relative change           +12.3%
points     a change of a share         +1.2 pts
MHz, W     a clock, a power            1,980 MHz
C          a temperature               64 °C
pct        a percentage 0..100         87%
GiB        an amount of memory         141.1 GiB
J/tok      energy per token            0.412 J/tok
price      money per million tokens    1.234 (in the currency named beside it)
=========  ==========================  ===============

A value that is not measured (None, NaN) reads :data:`MISSING`; a non-zero value too small for its digits reads
``<0.1`` rather than a 0.0 that was never measured.
"""

from __future__ import annotations

import math

MISSING = "—"
DIGITS = {"tok/s": 1, "rate": 1, "ms": 1, "s": 1, "conc": 1, "share": 1, "ratio": 2, "change": 1, "points": 1, "count": 0,
          "MHz": 0, "W": 0, "C": 0, "GiB": 1, "pct": 0, "J/tok": 3, "price": 3, "cores": 2, "load": 2}
SUFFIX = {"MHz": " MHz", "W": " W", "C": " °C", "GiB": " GiB", "pct": "%", "J/tok": " J/tok",
          "cores": " cores"}      # units that read with their name
UNITS = tuple(DIGITS)


def measured(value) -> bool:
    """A finite number (bools are not numbers here)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _fixed(x: float, digits: int, signed: bool = False) -> str:
    text = f"{x:+,.{digits}f}" if signed else f"{x:,.{digits}f}"
    if x != 0 and float(text.replace(",", "")) == 0:     # too small to show: say so instead of a false zero
        floor = f"{10 ** -digits:.{digits}f}" if digits else "1"
        return f"{'-' if x < 0 else '+' if signed else ''}<{floor}"
    return text


def number(value, unit: str, missing: str = MISSING) -> str:
    """``value`` as it reads in ``unit`` (see the table above)."""
    if unit not in DIGITS:
        raise ValueError(f"unknown unit {unit!r} (known: {', '.join(UNITS)})")
    if not measured(value):
        return missing
    digits = DIGITS[unit]
    if unit == "share":
        return _fixed(100 * value, digits) + "%"
    if unit == "change":
        return _fixed(100 * value, digits, signed=True) + "%"
    if unit == "points":
        return _fixed(100 * value, digits, signed=True) + " pts"
    if unit == "ratio":
        return _fixed(value, digits) + "x"
    if unit == "count":
        return f"{round(value):,}"
    return _fixed(value, digits) + SUFFIX.get(unit, "")


def interval(low, high, unit: str = "change") -> str:
    """``[low, high]`` of a change, or empty when there is none."""
    if not (measured(low) and measured(high)):
        return ""
    return f"[{number(low, unit)}, {number(high, unit)}]"


def clip(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters at a word boundary, with an ellipsis when cut."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    cut = text[:width - 1]
    space = cut.rfind(" ")
    return (cut[:space] if space > width // 2 else cut).rstrip(" ,;:") + "…"
