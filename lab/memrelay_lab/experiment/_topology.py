"""Which machines an experiment runs on: the ``[hosts]`` and ``[roles]`` tables of the
experiment file, and the testbed's state file.

Without ``[hosts]`` every process runs on this machine (:class:`LocalHost`). With it, the
file names machines reached over SSH and maps the three roles to them, as the seeds'
configuration tables name VMs::

    [hosts.client1]
    address = "10.0.0.5"              # what the lab connects to, and what peers use
    user = "lab"                      # default: the lab's user
    port = 22
    key = "~/.ssh/id_ed25519"         # default: the SSH agent and ~/.ssh/id_*
    known_hosts = "~/.ssh/known_hosts"  # the host keys to trust (default ~/.ssh/known_hosts)
    bin_dir = "/opt/memrelay/bin"     # memrelay, memrelay-bench there (default: the host's PATH)
    # ship = true                     # or: copy this build's memrelay and memrelay-bench over
    memcached = "/usr/bin/memcached"  # default: memcached on the host's PATH
    work_dir = "/tmp/memrelay-lab"    # where a run's files go on the host (default)
    link_mbit = 100                   # the host's link rate, Mbit/s: a centre of the models

    [roles]
    servers = ["server1", "server2"]  # server j runs on servers[j mod len]
    middlewares = ["mw1"]             # middleware k on middlewares[k mod len]
    clients = ["client1", "client2"]  # client machine m on clients[m mod len]

``hosts = "testbed"`` (a string instead of the table) takes the hosts from the state file
that ``memrelay-lab testbed up`` writes (``$MEMRELAY_LAB_TESTBED_DIR/<prefix>/state.json``,
default ``/run/memrelay-lab/testbed/mrlab-/state.json``, the prefix ``MEMRELAY_LAB_TESTBED_PREFIX``);
``[roles]`` still names them. The testbed's namespaces share this machine's files, so its hosts
use this build's binaries where they are, and its runs keep their files in the testbed's own
folder (``work/``), which `testbed down` removes.

This module only parses and checks; `_ssh` connects, `_preflight` checks the machines.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..testbed._names import Names
from ._binaries import find_binaries

__all__ = [
    "ROLES",
    "HostSpec",
    "TestbedUnavailable",
    "Topology",
    "parse_topology",
    "testbed_hosts",
    "testbed_state_path",
]

ROLES = ("servers", "middlewares", "clients")
TESTBED = "testbed"
_HOST_KEYS = ("address", "user", "port", "key", "known_hosts", "bin_dir", "ship", "memcached", "work_dir",
              "link_mbit")


@dataclass(frozen=True)
class HostSpec:
    """One machine of ``[hosts]``: how to reach it and where its programs are."""

    name: str
    address: str
    user: str | None = None
    port: int = 22
    key: str | None = None
    known_hosts: str | None = None
    bin_dir: str | None = None
    ship: bool = False
    memcached: str = "memcached"
    work_dir: str = "/tmp/memrelay-lab"
    #: The host's link rate (Mbit/s each way), for the models: the testbed's shaping or
    #: ``link_mbit`` in the file (None: unknown, the link is no centre of the models).
    link_mbit: float | None = None
    #: The lab's own interface that carries exactly this host's traffic (the testbed's veth),
    #: whose byte counters give the bytes per request on the link; None elsewhere.
    link_interface: str | None = None

    def describe(self) -> str:
        """``host NAME (ADDRESS)``: how error messages name it."""
        return f"host {self.name} ({self.address}{'' if self.port == 22 else f':{self.port}'})"

    def as_dict(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in ("name", *_HOST_KEYS, "link_interface")}


@dataclass(frozen=True)
class Topology:
    """The machines of an experiment: ``hosts`` (None with ``testbed``) and the role mapping."""

    hosts: Mapping[str, HostSpec] | None
    roles: Mapping[str, tuple[str, ...]]
    testbed: bool = False

    def resolved(self) -> dict[str, HostSpec]:
        """The hosts, read from the testbed's state file when ``hosts = "testbed"``."""
        hosts = dict(testbed_hosts()) if self.testbed else dict(self.hosts or {})
        for role, names in self.roles.items():
            for name in names:
                if name not in hosts:
                    where = f"the testbed ({testbed_state_path()})" if self.testbed else "[hosts]"
                    raise TestbedUnavailable(f"roles.{role}: no host {name!r} in {where}; "
                                             f"hosts: {', '.join(sorted(hosts)) or 'none'}")
        return hosts

    def as_dict(self) -> dict[str, Any]:
        return {
            "hosts": TESTBED if self.testbed else {n: h.as_dict() for n, h in (self.hosts or {}).items()},
            "roles": {role: list(names) for role, names in self.roles.items()},
        }


class TestbedUnavailable(RuntimeError):
    """``hosts = "testbed"`` but there is no testbed up (or it lacks a host the roles name)."""

    __test__ = False  # not a pytest class


# ---------------------------------------------------------------- the experiment file

Fail = Callable[[str, str, tuple], Exception]  # (key, reason, table path) -> SpecError


def parse_topology(hosts_raw: Any, roles_raw: Any, hosts_table: tuple, roles_table: tuple,
                   fail: Fail) -> Topology | None:
    """``[hosts]`` and ``[roles]`` checked (``fail`` builds the error for a key in a table)."""
    if hosts_raw is None and roles_raw is None:
        return None
    if hosts_raw is None:
        raise fail("roles", "[roles] needs [hosts] (or hosts = \"testbed\") naming the machines",
                   (*roles_table, "roles"))
    testbed = hosts_raw == TESTBED
    hosts: dict[str, HostSpec] | None = None
    if not testbed:
        if not isinstance(hosts_raw, dict) or not hosts_raw:
            raise fail("hosts", "expected tables such as [hosts.client1] (address = ..., user = ...) "
                                "or the string \"testbed\"", (*hosts_table, "hosts"))
        hosts = {name: _host(name, table, (*hosts_table, "hosts", name), fail) for name, table in hosts_raw.items()}
    if roles_raw is None:
        raise fail("hosts", "[hosts] needs a [roles] table mapping servers, middlewares and clients to hosts",
                   (*hosts_table, "hosts"))
    if not isinstance(roles_raw, dict):
        raise fail("roles", "expected a table: servers = [...], middlewares = [...], clients = [...]",
                   (*roles_table, "roles"))
    table = (*roles_table, "roles")
    roles: dict[str, tuple[str, ...]] = {}
    for role, names in roles_raw.items():
        if role not in ROLES:
            raise fail(role, f"unknown role; the roles are {', '.join(ROLES)}", table)
        if isinstance(names, str):
            names = [names]
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            raise fail(role, "expected a non-empty list of host names", table)
        for name in names:
            if hosts is not None and name not in hosts:
                raise fail(role, f"no host {name!r} in [hosts] (hosts: {', '.join(hosts)})", table)
        roles[role] = tuple(names)
    for role in ROLES:
        if role not in roles:
            raise fail("roles", f"missing {role} = [...] (every role needs its hosts)", table)
    return Topology(hosts=hosts, roles=roles, testbed=testbed)


def _host(name: str, raw: Any, table: tuple, fail: Fail) -> HostSpec:
    if not isinstance(raw, dict):
        raise fail(name, "expected a table with at least address = \"...\"", table[:-1])
    for key in raw:
        if key not in _HOST_KEYS:
            raise fail(key, f"unknown key; a host takes {', '.join(_HOST_KEYS)}", table)
    if "address" not in raw:
        raise fail(name, "missing address = \"...\"", table)  # points at the [hosts.NAME] header
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key == "port":
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
                raise fail(key, f"expected a TCP port 1..65535, got {value!r}", table)
        elif key == "link_mbit":
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise fail(key, f"expected a positive rate in Mbit/s, got {value!r}", table)
            value = float(value)
        elif key == "ship":
            if not isinstance(value, bool):
                raise fail(key, f"expected true or false, got {value!r}", table)
        elif not isinstance(value, str) or not value:
            raise fail(key, f"expected a non-empty string, got {value!r}", table)
        values[key] = value
    if values.get("ship") and "bin_dir" in values:
        raise fail("ship", "give either ship = true (copy this build's binaries) or bin_dir, not both", table)
    for key in ("key", "known_hosts"):
        if key in values:
            values[key] = os.path.expanduser(values[key])
    return HostSpec(name=name, **values)


# ---------------------------------------------------------------- the testbed


def testbed_state_path() -> Path:
    """The state file of the testbed ``MEMRELAY_LAB_TESTBED_PREFIX`` names (default ``mrlab-``)."""
    return Names.from_environment().folder() / "state.json"


def testbed_hosts(bin_dir: str | None = None, memcached: str | None = None) -> dict[str, HostSpec]:
    """The hosts of the testbed that is up, from its state file (TestbedUnavailable if none).

    The namespaces share this machine's files: the hosts run this build's binaries in place.
    """
    path = testbed_state_path()
    try:
        state = json.loads(path.read_text())
    except FileNotFoundError:
        raise TestbedUnavailable(f"hosts = \"testbed\" but no testbed is up ({path} is missing); "
                                 "start one with `memrelay-lab testbed up`") from None
    except (OSError, ValueError) as error:
        raise TestbedUnavailable(f"the testbed's state file {path} is unreadable: {error}") from None
    if bin_dir is None or memcached is None:
        binaries = find_binaries()
        bin_dir = bin_dir or str(Path(binaries.memrelay).parent)
        memcached = memcached or binaries.memcached
    hosts = {}
    for entry in state.get("hosts", []):
        try:
            hosts[entry["name"]] = HostSpec(
                name=entry["name"], address=entry["address"], user=entry.get("user"),
                port=int(entry.get("ssh_port", 22)), key=entry.get("key"), known_hosts=entry.get("known_hosts"),
                bin_dir=bin_dir, memcached=memcached,
                link_mbit=_rate((entry.get("links") or {}).get("rate_mbit")), link_interface=entry.get("veth"),
                # The runs' files in the testbed's own folder: `testbed down` removes what a killed run left.
                work_dir=str(Path(state.get("dir") or path.parent) / "work"),
            )
        except (KeyError, TypeError, ValueError) as error:
            raise TestbedUnavailable(f"the testbed's state file {path} has a bad host entry {entry!r}: "
                                     f"{error}") from None
    return hosts


def _rate(value: Any) -> float | None:
    return None if value is None else float(value)
