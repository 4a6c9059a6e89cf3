"""Warnings about an experiment file: keys the design sets but never uses, and settings that
leave the analysis without confidence intervals. The experiment still runs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._key_lines import KeyLocator

__all__ = ["SpecWarning", "set_at", "spec_warnings"]


@dataclass(frozen=True)
class SpecWarning:
    """A key the design ignores or contradicts, or a setting that weakens the analysis; the
    experiment still runs. ``str()`` is ``FILE:LINE: KEY: reason``."""

    source: str
    line: int | None
    key: str
    reason: str

    def __str__(self) -> str:
        where = self.source if self.line is None else f"{self.source}:{self.line}"
        return f"{where}: {self.key}: {self.reason}"


def set_at(locator: KeyLocator, key: str, profile: str | None, combos_table: tuple,
           combinations: tuple | None) -> int | None:
    """The line where the file sets `key` (None: left at its default)."""
    line = locator.find_setting(key, profile, None)
    if line is not None:
        return line
    for index, block in enumerate(combinations or ()):
        if key in block:
            return locator.find((*combos_table, "combinations"), key, index)
    return None


def spec_warnings(values: Mapping[str, tuple], combinations: tuple | None, settings: Mapping[str, Any],
              line_of: Callable[[str], int | None], source: str) -> tuple[SpecWarning, ...]:
    """Keys the design sets but never uses, and settings that leave the analysis without intervals."""
    blocks = combinations or ({},)

    def used(key: str) -> set:
        return {value for block in blocks for value in block.get(key, values[key])}

    found = []

    def ignored(key: str, reason: str) -> None:
        line = line_of(key)
        if line is not None:  # only keys the file sets
            found.append(SpecWarning(source, line, key, reason))

    if used("middlewares") == {0}:
        for key in ("middleware", "workers", "engine", "distribution", "replication", "read_from", "sharded"):
            ignored(key, "ignored: middlewares = 0 everywhere (the clients talk to the servers directly)")
    else:
        if "memrelay" not in used("middleware"):
            for key in ("workers", "engine"):
                ignored(key, "ignored: no configuration runs memrelay (twemproxy and memcached's proxy have "
                        "their own threads)")
        if "twemproxy" in used("middleware") and (used("distribution") == {"all"} and max(used("servers")) > 1
                                                  or used("replication") - {"1", None}):
            ignored("middleware", "twemproxy keeps one copy of each key: its configurations hash every key to "
                    "one server instead of replicating writes")
        if used("engine") == {"evented"}:
            ignored("workers", 'ignored: engine = "evented" everywhere, and only the pool engine has workers')
        if used("distribution") == {"all"}:
            ignored("read_from", 'ignored: distribution = "all" everywhere; read_from needs distribution = "ketama"')
        if True in used("sharded") and used("multiget") == {1}:
            ignored("sharded", "ignored: multiget = 1 everywhere, and sharded only splits multi-gets")
    if settings["repetitions"] == 1:
        found.append(SpecWarning(source, line_of("repetitions"), "repetitions",
                                 "repetitions = 1 gives no confidence intervals (at least 2 are needed)"))
    return tuple(found)
