"""What a column of the loaded rows is: the run's identity, a configuration parameter or a
measure. This module owns that rule; every table the lab groups by configuration asks it.

The rule: **a configuration parameter is a key the manifest's configurations carry** (what the
experiment file set and its expansion derived: ``workers``, ``clients``, ``write_fraction``,
``block``, ...). Everything else a run produced is a measure, whatever its name and whether or
not it happens to differ between configurations: ``loaders``, ``loaders_start_spread_s`` and
``loaders_overlap`` (measured on the load generators' clocks), ``cores``, ``cpu_*``, ``link:*``.
A measure taken for a parameter would split configurations that are one (the start spread of
the load generators is never twice the same) and leave the models nothing to predict.

Tables that come without a manifest (a table built by hand, a CSV) fall back on `is_measure`,
the measures the lab writes by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

__all__ = ["IDENTITY", "MEASURED", "configuration_columns", "is_measure"]

#: Which run a row is of (neither parameter nor measure).
IDENTITY = ("experiment", "profile", "run_id", "configuration", "repetition", "source")

#: Measures the lab writes, by name (the fallback without a manifest) ...
MEASURED = frozenset({
    "kept_s", "count", "hits", "misses", "errors", "count_total", "errors_total", "duration_s", "cores",
    "loaders", "loaders_start_spread_s", "loaders_overlap", "miss_rate", "error_rate", "keys_per_request",
    "keys_throughput", "queue_length", "in_system", "network_ms", "repetitions",
})
#: ... and by prefix or suffix.
_MEASURED_PREFIXES = (
    "throughput", "response_", "queue_", "service_", "cpu_", "link:", "mw_", "loaders", "keys_", "miss", "error",
    "count", "hits",
)
_MEASURED_SUFFIXES = ("_half_width", "_weighted", "_ms")


def is_measure(column: object) -> bool:
    """A column the lab measured (or derived from measurements), by its name."""
    name = str(column)
    return name in MEASURED or name.startswith(_MEASURED_PREFIXES) or name.endswith(_MEASURED_SUFFIXES)


def configuration_columns(columns: Iterable[object], manifest: Mapping | None = None) -> list[str]:
    """The configuration parameters among `columns`, in their order: the manifest's
    configuration keys when there is a manifest (module docstring), else every column that is
    neither identity nor `is_measure`."""
    configurations = (manifest or {}).get("configurations") or []
    if configurations:
        keys = {key for configuration in configurations for key in configuration if key != "index"}
        return [str(c) for c in columns if c in keys and c not in IDENTITY]
    return [str(c) for c in columns if c not in IDENTITY and not is_measure(c)]
