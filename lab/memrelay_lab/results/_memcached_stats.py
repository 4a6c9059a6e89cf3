"""memcached's ``stats`` reply (saved by the runner before and after the load) as a dict."""

from __future__ import annotations

__all__ = ["parse_stats"]


def parse_stats(text: str) -> dict[str, str]:
    """``STAT name value`` lines as a dict (values stay strings)."""
    result = {}
    for line in text.splitlines():
        parts = line.split(" ", 2)
        if len(parts) == 3 and parts[0] == "STAT":
            result[parts[1]] = parts[2]
    return result
