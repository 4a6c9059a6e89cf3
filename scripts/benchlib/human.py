"""Numbers as people read them: thousands separators, bytes in B, KiB, MiB or GiB, never 1.7e+04."""

from __future__ import annotations


def number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def size(value: float | None) -> str:
    """Bytes with the largest binary unit below the value, one decimal (e.g. "3.1 KiB", "512 KiB")."""
    if value is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(value) >= scale:
            text = f"{value / scale:,.1f}"
            return f"{text.removesuffix('.0')} {unit}"
    return f"{value:,.0f} B"


def micros(value: float | None) -> str:
    """A duration given in µs: "512 µs", "2.1 ms", "4.0 s" (never 1.7e+04)."""
    if value is None:
        return "-"
    if abs(value) >= 1_000_000:
        return f"{value / 1_000_000:,.1f} s"
    if abs(value) >= 1_000:
        return f"{value / 1_000:,.1f} ms"
    return f"{value:,.0f} µs"
