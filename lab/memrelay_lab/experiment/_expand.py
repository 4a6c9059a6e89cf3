"""The runs of an experiment: configurations (the cross product or the named blocks), repetitions,
and where each load generator connects.

A :class:`Configuration` is one point of the design with every parameter resolved; a
:class:`Run` is one repetition of it. ``expand(experiment)`` returns the configurations in
design order (the last key of the seeds' table, virtual clients per thread, varies fastest);
``plan(experiment)`` returns the runs *repetition-major*: every configuration once, then every
configuration a second time, and so on, so that a slow drift of the machine spreads over all
configurations instead of biasing the last ones.

Cross-key rules (an impossible combination raises SpecError pointing at the key's line):

- ``middlewares = 0`` is a baseline: workers, engine, distribution, replication, read_from and
  sharded mean nothing and are set to None (duplicates this creates are dropped).
- ``distribution = "all"`` keeps every key on every server: replication must be "all".
  With ``"ketama"``, replication defaults to 1 and may not exceed the number of servers.
- Every middleware needs at least one load generator (instances >= middlewares).

Placement (:func:`placement`) follows seed 000: bench instance k (numbered over all client
machines, machine-major) connects to middleware ``k mod M`` (so with two middlewares and two
instances per machine, each machine runs one instance per middleware, §3.2 and §4). Without
middleware (§2) instance k connects to server ``k mod S`` when there are at least as many
instances as servers (§2.2: two instances, two servers, one each), otherwise to every server
j with ``j mod N == k`` (its connections spread round robin over them).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from .._values import configuration_label
from ..plumbing.peers import Routing
from ._spec import PARAMETERS, Experiment, workload_ratio

__all__ = ["Configuration", "Instance", "Run", "expand", "placement", "plan"]

# Nesting of the cross product, outermost first; the last varies fastest.
_PRODUCT_ORDER = [
    "workload",
    "protocol",
    "multiget",
    "sharded",
    "servers",
    "middlewares",
    "middleware",
    "engine",
    "distribution",
    "replication",
    "read_from",
    "workers",
    "value_size",
    "keys",
    "key_pattern",
    "pipeline",
    "client_machines",
    "instances_per_machine",
    "threads_per_instance",
    "clients_per_thread",
]
assert sorted(_PRODUCT_ORDER) == sorted(PARAMETERS)

_MIDDLEWARE_ONLY = ("middleware", "workers", "engine", "distribution", "replication", "read_from", "sharded")


@dataclass(frozen=True)
class Configuration:
    """One point of the design, every parameter resolved (None: does not apply)."""

    index: int
    servers: int
    client_machines: int
    instances_per_machine: int
    threads_per_instance: int
    clients_per_thread: int
    workload: str
    multiget: int
    sharded: bool | None
    middlewares: int
    workers: int | None
    engine: str | None
    distribution: str | None
    replication: str | None
    read_from: str | None
    value_size: int
    keys: int
    key_pattern: str
    pipeline: int
    test_time: float
    warmup: float
    cooldown: float
    populate: bool
    block: int | None = None
    protocol: str = "text"
    #: The middleware program (`_proxies`); None without middleware.
    middleware: str | None = "memrelay"

    @property
    def sets(self) -> int:
        return workload_ratio(self.workload)[0]

    @property
    def gets(self) -> int:
        return workload_ratio(self.workload)[1]

    @property
    def ratio(self) -> str:
        return f"{self.sets}:{self.gets}"

    @property
    def write_fraction(self) -> float:
        return self.sets / (self.sets + self.gets)

    @property
    def instances(self) -> int:
        """memrelay-bench processes in the run."""
        return self.client_machines * self.instances_per_machine

    @property
    def clients_per_instance(self) -> int:
        return self.threads_per_instance * self.clients_per_thread

    @property
    def clients(self) -> int:
        """NumClients of seed 000 §1.10: instances x threads x virtual clients."""
        return self.instances * self.clients_per_instance

    @property
    def replicas(self) -> int | None:
        """Copies of each key (the number the replication label means with these servers)."""
        if self.middlewares == 0:
            return None
        if self.replication == "all":
            return self.servers
        if self.replication == "half":
            return math.ceil(self.servers / 2)
        return int(self.replication) if self.replication else None

    @property
    def key_routing(self) -> Routing:
        """Where memrelay sends keys here; memcached's proxy and twemproxy follow it as far as they can."""
        return Routing(self.distribution, self.replicas or 1, self.read_from == "any-replica", self.sharded)

    def as_dict(self) -> dict[str, Any]:
        """Every parameter and derived column (the configuration columns of the DataFrames)."""
        record = asdict(self)
        record.update(
            sets=self.sets,
            gets=self.gets,
            ratio=self.ratio,
            write_fraction=self.write_fraction,
            instances=self.instances,
            clients_per_instance=self.clients_per_instance,
            clients=self.clients,
            replicas=self.replicas,
        )
        return record

    def parameters(self) -> dict[str, Any]:
        """The design parameters only (what identifies the configuration across files)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("index", "block")}

    def label(self) -> str:
        """A short human description for progress lines (the parameters that matter here)."""
        shown: dict[str, Any] = {"servers": self.servers, "middlewares": self.middlewares}
        if self.middlewares and self.middleware not in (None, "memrelay"):
            shown["middleware"] = self.middleware
        elif self.middlewares:
            shown["workers"] = self.workers
            if self.engine != "pool":
                shown["engine"] = self.engine
            if self.distribution != "all":
                shown["distribution"] = f"ketama/{self.replication}"
        shown["clients"] = (
            f"{self.clients} ({self.client_machines}x{self.instances_per_machine}x"
            f"{self.threads_per_instance}x{self.clients_per_thread})"
        )
        shown["workload"] = self.workload
        if self.protocol != "text":
            shown["protocol"] = self.protocol
        if self.multiget > 1:
            shown["multiget"] = f"{self.multiget}{' sharded' if self.sharded else ''}"
        return configuration_label(shown)


@dataclass(frozen=True)
class Run:
    """One repetition of one configuration; ``id`` names its folder (runs/<id>/)."""

    configuration: Configuration
    repetition: int  # 1-based

    @property
    def id(self) -> str:
        return f"c{self.configuration.index:03d}-r{self.repetition}"


@dataclass(frozen=True)
class Instance:
    """One memrelay-bench process: which machine, which instance there, what it connects to."""

    machine: int
    instance: int
    index: int  # over all machines, machine-major
    target_kind: str  # "middleware" or "server"
    targets: tuple[int, ...]

    @property
    def name(self) -> str:
        return f"client-{self.machine}-{self.instance}"


def placement(config: Configuration) -> list[Instance]:
    """Which middleware (or servers) each bench instance connects to (module docstring)."""
    result = []
    n = config.instances
    for machine in range(config.client_machines):
        for instance in range(config.instances_per_machine):
            k = machine * config.instances_per_machine + instance
            if config.middlewares:
                kind, targets = "middleware", (k % config.middlewares,)
            elif n >= config.servers:
                kind, targets = "server", (k % config.servers,)
            else:
                kind, targets = "server", tuple(j for j in range(config.servers) if j % n == k)
            result.append(Instance(machine, instance, k, kind, targets))
    return result


def expand(experiment: Experiment) -> list[Configuration]:
    """The configurations of the design, validated, in order, without duplicates."""
    blocks = experiment.combinations or ({},)
    configs: list[Configuration] = []
    seen: set[tuple] = set()
    for block_index, block in enumerate(blocks):
        values = {key: block.get(key, experiment.values[key]) for key in _PRODUCT_ORDER}
        for key, options in values.items():
            if not options:  # required, missing at top level and in this block
                raise experiment.error(key, "missing (required): set it at the top level or in every combination",
                                       block_index if experiment.combinations else None)
        for combo in itertools.product(*(values[key] for key in _PRODUCT_ORDER)):
            chosen = dict(zip(_PRODUCT_ORDER, combo))
            config = _resolve(experiment, chosen, len(configs), block_index if experiment.combinations else None,
                              block)
            identity = tuple(sorted(config.parameters().items(), key=lambda kv: kv[0]))
            if identity in seen:
                continue
            seen.add(identity)
            configs.append(config)
    return configs


def plan(experiment: Experiment) -> list[Run]:
    """Every run: each configuration ``repetitions`` times, repetition-major."""
    configs = expand(experiment)
    return [Run(config, rep) for rep in range(1, experiment.settings["repetitions"] + 1) for config in configs]


def _resolve(experiment: Experiment, chosen: dict[str, Any], index: int, block: int | None,
             block_values: dict) -> Configuration:
    """Apply the cross-key rules to one point of the product."""

    def error(key: str, reason: str) -> Exception:
        return experiment.error(key, reason, block if key in block_values else None)

    settings = experiment.settings
    servers, middlewares = chosen["servers"], chosen["middlewares"]
    instances = chosen["client_machines"] * chosen["instances_per_machine"]
    if middlewares > instances:
        raise error(
            "middlewares",
            f"{middlewares} middlewares but only {instances} memrelay-bench instances "
            "(client_machines x instances_per_machine): every middleware needs at least one",
        )
    if middlewares == 0:
        for key in _MIDDLEWARE_ONLY:
            chosen[key] = None
    else:
        replication = chosen["replication"]
        if chosen["distribution"] == "all":
            if replication not in (None, "all"):
                raise error(
                    "replication",
                    f"replication {replication!r} needs distribution = \"ketama\" "
                    "(distribution \"all\" keeps every key on every server)",
                )
            chosen["replication"] = "all"
            chosen["read_from"] = None
        else:
            replication = replication or "1"
            if replication not in ("all", "half") and int(replication) > servers:
                raise error("replication", f"{replication} copies of each key need at least {replication} servers, "
                            f"not {servers}")
            chosen["replication"] = replication
    if chosen["multiget"] > chosen["keys"]:
        raise error("multiget", f"multi-gets of {chosen['multiget']} keys need at least that many keys, "
                    f"not {chosen['keys']}")
    sets, gets = workload_ratio(chosen["workload"])
    populate = settings["populate"]
    if populate == "auto":
        populate = gets > 0
    return Configuration(
        index=index,
        test_time=settings["test_time"],
        warmup=settings["warmup"],
        cooldown=settings["cooldown"],
        populate=populate,
        block=block,
        **chosen,
    )
