"""The experiment file: a TOML file shaped like the seeds' configuration tables, and its validation.

One experiment is one file. Its top-level keys are the rows of a seed's configuration table
(seed 000 section 1.10); any row marked *sweepable* below may be a list, and the lab runs the
cross product of the lists. The other keys take exactly one value. Example (seed 000 §3.1 at a
small size)::

    name = "baseline-middleware-1"
    description = "Seed 000 §3.1: one middleware, one server"

    servers = 1                       # memcached servers
    client_machines = 1               # load-generating machines
    instances_per_machine = 1         # memrelay-bench processes per machine
    threads_per_instance = 2          # CT
    clients_per_thread = [1, 4, 16]   # VC
    workload = ["write-only", "read-only"]
    middlewares = 1                   # 0: clients talk to the servers directly (baselines)
    workers = [8, 32]                 # worker threads per middleware
    repetitions = 3
    test_time = 70                    # seconds per run
    warmup = 5                        # trimmed from the start of each run
    cooldown = 5                      # trimmed from the end of each run

    [profile.quick]                   # `memrelay-lab run FILE --profile quick`
    clients_per_thread = [1, 8]
    repetitions = 2
    test_time = 4
    warmup = 1
    cooldown = 1

Instead of the full cross product, ``combinations`` names the blocks of a design: a list of
tables, each setting some sweepable keys (one value or a list); each block is crossed with
the top-level values of the keys it does not set, and the blocks are run one after the other::

    combinations = [
      { servers = 1, client_machines = 3, instances_per_machine = 1, threads_per_instance = 2 },
      { servers = 2, client_machines = 1, instances_per_machine = 2, threads_per_instance = 1 },
    ]

A profile (``[profile.NAME]``) overrides any key but ``name`` and ``profile``, including
``combinations``, ``hosts`` and ``roles``. ``[hosts]`` and ``[roles]`` name the machines the
roles run on (``_topology``); without them everything runs on this machine. A file with a mistake is refused before anything starts with a
:class:`SpecError` naming the file, the line, the key and the reason (tomllib reports no
line numbers for valid TOML, so keys are found by scanning the text; see ``_key_lines``).
Keys the design sets but never uses give warnings instead (``_spec_warnings``).

Every key, its default and its meaning is in ``PARAMETERS`` (``describe_parameters()``
prints them); ``memrelay-lab run FILE --dry-run`` shows the expansion without running it.
"""

from __future__ import annotations

import difflib
import math
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._key_lines import KeyLocator
from ._spec_warnings import SpecWarning, set_at, spec_warnings
from ._topology import Topology, parse_topology

__all__ = [
    "Experiment",
    "PARAMETERS",
    "SETTINGS",
    "SpecError",
    "SpecWarning",
    "describe_parameters",
    "load_experiment",
    "parse_experiment",
    "workload_ratio",
]


def _where(source: str, line: int | None, column: int | None = None) -> str:
    if line is None:
        return source
    return f"{source}:{line}" if column is None else f"{source}:{line}:{column}"


class SpecError(ValueError):
    """A mistake in an experiment file: where it is (file, line, column for TOML syntax, key)
    and why it is one."""

    def __init__(self, source: str, line: int | None, key: str | None, reason: str, column: int | None = None):
        self.source = source
        self.line = line
        self.column = column
        self.key = key
        self.reason = reason
        where = _where(source, line, column)
        super().__init__(f"{where}: {key}: {reason}" if key else f"{where}: {reason}")


# ---------------------------------------------------------------- value checks
#
# Each check takes the TOML value and returns the normalised one, or raises ValueError with
# the reason (the caller adds file, line and key).


def _whole(minimum: int) -> Callable[[Any], int]:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected a whole number, got {value!r}")
        if value < minimum:
            raise ValueError(f"must be at least {minimum}, got {value}")
        return value

    return check


def _seconds(*, allow_zero: bool) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number of seconds, got {value!r}")
        if not math.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
            raise ValueError(f"must be {'zero or more' if allow_zero else 'more than zero'} seconds, got {value}")
        return float(value)

    return check


def _fraction(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(f"expected a fraction between 0 and 1, got {value!r}")
    return float(value)


def _choice(*options: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in options:
            raise ValueError(f"expected one of {', '.join(map(repr, options))}, got {value!r}")
        return value

    return check


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"expected true or false, got {value!r}")
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected a string, got {value!r}")
    return value


def _name(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", value):
        raise ValueError(f"expected a name of letters, digits, '.', '_' and '-', got {value!r}")
    return value


WORKLOADS = {"write-only": (1, 0), "read-only": (0, 1), "50-50": (1, 1)}


def workload_ratio(workload: str) -> tuple[int, int]:
    """(sets, gets) of a workload: a named one (write-only, read-only, 50-50) or "SETS:GETS"."""
    if workload in WORKLOADS:
        return WORKLOADS[workload]
    match = re.fullmatch(r"\s*(\d+)\s*:\s*(\d+)\s*", workload)
    if not match:
        raise ValueError(
            f"expected write-only, read-only, 50-50 or a ratio SETS:GETS such as \"1:10\", got {workload!r}"
        )
    sets, gets = int(match[1]), int(match[2])
    if sets == 0 and gets == 0:
        raise ValueError("the ratio 0:0 sends nothing")
    return sets, gets


def _workload(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError(f"expected write-only, read-only, 50-50 or a ratio string \"SETS:GETS\", got {value!r}")
    workload_ratio(value)
    return value.strip() if value.strip() in WORKLOADS else "{}:{}".format(*workload_ratio(value))


def _replication(value: Any) -> str:
    """Copies per key with ketama: a number, "none" (= 1 copy), "half" (⌈S/2⌉), "all"/"full"."""
    if isinstance(value, bool):
        raise ValueError(f"expected a number of copies, \"none\", \"half\" or \"all\", got {value!r}")
    if isinstance(value, int):
        if value < 1:
            raise ValueError(f"must be at least 1 copy, got {value}")
        return str(value)
    aliases = {"none": "1", "half": "half", "all": "all", "full": "all"}
    if isinstance(value, str) and value in aliases:
        return aliases[value]
    if isinstance(value, str) and value.isdigit() and int(value) >= 1:
        return str(int(value))
    raise ValueError(f"expected a number of copies, \"none\", \"half\" or \"all\"/\"full\", got {value!r}")


def _key_pattern(value: Any) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"[RSGZ](:[RSGZ])?", value):
        raise ValueError(f"expected R, S, G or Z (or SETS:GETS such as \"R:G\"), got {value!r}")
    return value


def _populate(value: Any) -> str | bool:
    if value == "auto" or isinstance(value, bool):
        return value
    raise ValueError(f"expected \"auto\", true or false, got {value!r}")


@dataclass(frozen=True)
class Parameter:
    """One key of the experiment file."""

    name: str
    check: Callable[[Any], Any]
    default: Any
    doc: str
    sweepable: bool


def _p(name: str, check: Callable[[Any], Any], default: Any, doc: str, sweepable: bool = True) -> Parameter:
    return Parameter(name, check, default, doc, sweepable)


# Sweepable keys, in the order of the seeds' configuration tables. REQUIRED marks no default.
# The clients measure in windows of this many seconds, starting on whole seconds of the load.
WINDOW_S = 1

REQUIRED = object()
PARAMETERS: dict[str, Parameter] = {
    p.name: p
    for p in [
        _p("servers", _whole(1), REQUIRED, "memcached servers"),
        _p("client_machines", _whole(1), 1, "load-generating machines"),
        _p("instances_per_machine", _whole(1), 1, "memrelay-bench processes per client machine"),
        _p("threads_per_instance", _whole(1), 1, "threads per memrelay-bench process (CT)"),
        _p("clients_per_thread", _whole(1), REQUIRED, "virtual clients per thread (VC)"),
        _p("workload", _workload, "read-only", "write-only, read-only, 50-50, or \"SETS:GETS\" counted in requests"),
        _p("multiget", _whole(1), 1, "keys per get request (1 = plain get)"),
        _p("sharded", _boolean, False, "split multi-gets over the servers (multi-get behaviour)"),
        _p("middlewares", _whole(0), REQUIRED, "middlewares; 0 = clients talk to the servers directly"),
        _p("middleware", _choice("memrelay", "twemproxy", "memcached-proxy"), "memrelay",
           "the middleware program: memrelay, twemproxy or memcached's proxy, each routing as memrelay does"),
        _p("workers", _whole(1), 8, "worker threads per middleware (pool engine)"),
        _p("engine", _choice("pool", "evented"), "pool", "middleware scheduler"),
        _p("distribution", _choice("all", "ketama"), "all", "all: every key on every server; ketama: a hash ring"),
        _p("replication", _replication, None, "copies per key with ketama: N, none, half, all/full (default 1)"),
        _p("read_from", _choice("primary", "any-replica"), "primary", "which replica serves a read with ketama"),
        _p("value_size", _whole(1), 1024, "bytes per value"),
        _p("keys", _whole(1), 10000, "key range: key ids 1..keys"),
        _p("key_pattern", _key_pattern, "R", "key choice: R uniform, S sequential, G gaussian, Z zipf"),
        _p("pipeline", _whole(1), 1, "requests in flight per virtual client"),
        _p("protocol", _choice("text", "meta"), "text",
           "what the clients speak: text (get/set) or meta (mg/ms; a multi-get is K quiet mg and mn)"),
    ]
}

# Keys taking exactly one value.
SETTINGS: dict[str, Parameter] = {
    p.name: p
    for p in [
        _p("name", _name, None, "experiment name (default: the file name); results go to results/NAME", False),
        _p("description", _text, "", "what the experiment is (e.g. its seed section)", False),
        _p("repetitions", _whole(1), 3, "runs per configuration", False),
        _p("test_time", _seconds(allow_zero=False), REQUIRED, "seconds of load per run", False),
        _p("warmup", _seconds(allow_zero=True), 0.0, "seconds trimmed from the start of each run", False),
        _p("cooldown", _seconds(allow_zero=True), 0.0, "seconds trimmed from the end of each run", False),
        _p("populate", _populate, "auto", "write every key once before the load (auto: when there are gets)", False),
        _p("max_error_rate", _fraction, 0.001, "a run whose clients see more errors per request fails", False),
        _p("seed", _whole(0), 1, "first key-choice seed (each bench instance adds its index)", False),
        _p("memcached_memory_mb", _whole(1), 1024, "memcached -m", False),
        _p("memcached_threads", _whole(1), 1, "memcached -t", False),
        _p("request_log_sample", _whole(1), None, "memrelay --request-log-sample N (off by default)", False),
    ]
}

_STRUCTURE = ("combinations", "profile", "hosts", "roles")
_ALL_KEYS = [*PARAMETERS, *SETTINGS, *_STRUCTURE]


def describe_parameters() -> str:
    """A table of every key of the experiment file, its default and its meaning."""
    rows = []
    for p in [*PARAMETERS.values(), *SETTINGS.values()]:
        default = "required" if p.default is REQUIRED else repr(p.default)
        rows.append((p.name + (" *" if p.sweepable else ""), default, p.doc))
    width = [max(len(row[i]) for row in rows) for i in range(2)]
    lines = [f"{a:<{width[0]}}  {b:<{width[1]}}  {c}" for a, b, c in rows]
    return "\n".join(lines) + "\n(* sweepable: one value or a list)"


# ---------------------------------------------------------------- the parsed experiment


@dataclass(frozen=True)
class Experiment:
    """A validated experiment file (with its profile applied).

    ``values`` maps every sweepable key to the tuple of its values (defaults filled in);
    ``settings`` maps every single-valued key to its value; ``combinations`` is None for the
    full cross product, else a tuple of blocks (key -> tuple of values) replacing ``values``
    for the keys they set. ``expand()`` (in ``_expand``) turns this into configurations.
    """

    name: str
    description: str
    profile: str | None
    values: Mapping[str, tuple]
    settings: Mapping[str, Any]
    combinations: tuple[Mapping[str, tuple], ...] | None
    source: str
    text: str
    profiles: tuple[str, ...] = ()
    warnings: tuple[SpecWarning, ...] = ()
    #: The machines (``[hosts]`` and ``[roles]``, see ``_topology``); None: everything on this machine.
    topology: Topology | None = None
    _locator: "KeyLocator" = field(default=None, repr=False, compare=False)  # type: ignore[assignment]

    def line_of(self, key: str, block: int | None = None) -> int | None:
        """The line that sets ``key`` (in combination ``block`` when given), honouring the profile."""
        return self._locator.find_setting(key, self.profile, block)

    def error(self, key: str, reason: str, block: int | None = None) -> SpecError:
        """A SpecError pointing at the line that sets ``key``."""
        return SpecError(self.source, self.line_of(key, block), key, reason)

    @property
    def swept(self) -> list[str]:
        """Keys that take more than one value somewhere in the design."""
        blocks = self.combinations or ({},)
        return [key for key in PARAMETERS if len({v for b in blocks for v in b.get(key, self.values[key])}) > 1]


def load_experiment(path: str | Path, profile: str | None = None) -> Experiment:
    """Read and validate an experiment file; raises SpecError (with the line) on a mistake."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise SpecError(str(path), None, None, "no such file") from None
    except UnicodeDecodeError as error:
        raise SpecError(str(path), None, None, f"not UTF-8 text ({error.reason})") from None
    return parse_experiment(text, source=str(path), profile=profile, default_name=path.stem)


def parse_experiment(
    text: str, *, source: str = "<experiment>", profile: str | None = None, default_name: str | None = None
) -> Experiment:
    """Validate experiment-file text (see the module docstring for the format)."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        # Python 3.14 gives lineno/colno; before, they are only in the message "(at line L, column C)".
        message = str(error)
        match = re.search(r"\(at line (\d+), column (\d+)\)", message)
        line = getattr(error, "lineno", None) or (int(match[1]) if match else None)
        column = getattr(error, "colno", None) or (int(match[2]) if match else None)
        reason = re.sub(r"\s*\(at (line \d+, column \d+|end of document)\)", "", message)
        raise SpecError(source, line, None, f"not valid TOML: {reason}", column=column) from None
    locator = KeyLocator(text)

    def fail(key: str, reason: str, table: tuple = (), block: int | None = None) -> SpecError:
        return SpecError(source, locator.find(table, key, block), key, reason)

    _check_keys(document, (), fail, allowed=_ALL_KEYS)

    profiles_table = document.get("profile", {})
    if not isinstance(profiles_table, dict) or not all(isinstance(v, dict) for v in profiles_table.values()):
        raise fail("profile", "expected tables such as [profile.quick]")
    overrides: dict[str, Any] = {}
    if profile is not None:
        if profile not in profiles_table:
            known = ", ".join(sorted(profiles_table)) or "none"
            raise SpecError(source, None, "profile", f"no profile {profile!r} in this file (profiles: {known})")
        overrides = profiles_table[profile]
    for name, table in profiles_table.items():
        allowed = [key for key in _ALL_KEYS if key not in ("name", "profile")]
        _check_keys(table, ("profile", name), fail, allowed=allowed)

    def raw(key: str) -> tuple[Any, tuple]:
        """The value of a key and the table it comes from (the profile wins)."""
        if key in overrides:
            return overrides[key], ("profile", profile)
        return document.get(key, REQUIRED), ()

    settings: dict[str, Any] = {}
    for key, parameter in SETTINGS.items():
        value, table = raw(key)
        if value is REQUIRED:
            if key == "name":
                value = default_name or "experiment"
            elif parameter.default is REQUIRED:
                raise SpecError(source, None, key, "missing (required)")
            else:
                settings[key] = parameter.default
                continue
        if isinstance(value, list):
            raise fail(key, "takes one value, not a list", table)
        try:
            settings[key] = parameter.check(value)
        except ValueError as error:
            raise fail(key, str(error), table) from None
    # The clients measure in 1 s windows starting on whole seconds of the load; the analysis
    # keeps the windows inside [warmup, test_time - cooldown]: at least one must fit.
    keep_from, keep_to = settings["warmup"], settings["test_time"] - settings["cooldown"]
    if math.floor(keep_to + 1e-9) - math.ceil(keep_from - 1e-9) < WINDOW_S:
        key = "warmup" if raw("warmup")[0] is not REQUIRED else "test_time"
        raise fail(
            key,
            f"test_time ({settings['test_time']:g} s) - warmup ({settings['warmup']:g} s) - cooldown "
            f"({settings['cooldown']:g} s) leaves no whole {WINDOW_S} s measurement window (windows start on "
            f"whole seconds of the load)",
            raw(key)[1],
        )

    combos_raw, combos_table = raw("combinations")
    combinations: tuple[dict[str, tuple], ...] | None = None
    if combos_raw is not REQUIRED:
        if not isinstance(combos_raw, list) or not combos_raw or not all(isinstance(c, dict) for c in combos_raw):
            raise fail("combinations", "expected a non-empty list of tables such as { servers = 2, workers = 8 }",
                       combos_table)
        blocks = []
        for index, block in enumerate(combos_raw):
            table = (*combos_table, "combinations")

            def block_fail(key: str, reason: str, _t: tuple = (), index: int = index, table: tuple = table) -> SpecError:
                return fail(key, f"{reason} (in combination {index + 1})", table, index)

            _check_keys(block, table, block_fail, allowed=list(PARAMETERS), block=index)
            blocks.append({key: _values(key, value, block_fail) for key, value in block.items()})
        combinations = tuple(blocks)

    values: dict[str, tuple] = {}
    for key, parameter in PARAMETERS.items():
        value, table = raw(key)
        if value is REQUIRED:
            if parameter.default is REQUIRED:
                if combinations and all(key in block for block in combinations):
                    values[key] = ()
                    continue
                raise SpecError(source, None, key, "missing (required)")
            values[key] = (parameter.default,)
            continue
        values[key] = _values(key, value, lambda k, r, _t=table: fail(k, r, _t))

    hosts_raw, hosts_table = raw("hosts")
    roles_raw, roles_table = raw("roles")
    topology = parse_topology(None if hosts_raw is REQUIRED else hosts_raw,
                              None if roles_raw is REQUIRED else roles_raw, hosts_table, roles_table, fail)

    warnings = spec_warnings(values, combinations, settings,
                             lambda key: set_at(locator, key, profile, combos_table, combinations), source)

    if profile is None:  # a mistake in any profile is a mistake in the file
        for name in profiles_table:
            parse_experiment(text, source=source, profile=name, default_name=default_name)
    return Experiment(
        name=settings.pop("name"),
        description=settings.pop("description"),
        profile=profile,
        values=values,
        settings=settings,
        combinations=combinations,
        source=source,
        text=text,
        profiles=tuple(profiles_table),
        warnings=warnings,
        topology=topology,
        _locator=locator,
    )


def _check_keys(table: dict, where: tuple, fail: Callable, *, allowed: list[str], block: int | None = None) -> None:
    """Refuses keys not in ``allowed`` (with a did-you-mean hint)."""
    for key in table:
        if key in allowed:
            continue
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        if key in _ALL_KEYS:
            reason = f"not allowed here{hint}"
        else:
            reason = f"unknown key{hint}"
        if block is None:
            raise fail(key, reason, where)
        raise fail(key, reason)


def _values(key: str, value: Any, fail: Callable[[str, str], SpecError]) -> tuple:
    """A sweepable key's value(s), checked and normalised, as a tuple."""
    items = value if isinstance(value, list) else [value]
    if not items:
        raise fail(key, "an empty list runs nothing; give at least one value")
    checked = []
    for item in items:
        if isinstance(item, list):
            raise fail(key, "a list inside a list; give one value or one flat list")
        try:
            checked.append(PARAMETERS[key].check(item))
        except ValueError as error:
            raise fail(key, str(error)) from None
    if len(set(checked)) != len(checked):
        raise fail(key, f"a value is listed twice: {items!r}")
    return tuple(checked)
