"""What the testbed's pieces are called and where they live: one prefix names them all.

Every namespace, interface and cgroup the testbed makes starts with its prefix (``mrlab-``
unless ``MEMRELAY_LAB_TESTBED_PREFIX`` or ``--prefix`` says otherwise), so `down` finds them
by name alone, with or without the state file. For a host NAME:

- namespace ``<prefix>NAME`` (``ip netns`` lists it),
- the link's root-namespace end ``<prefix>NAME`` (a veth on the bridge; the namespace end is
  ``eth0``), the bridge ``<prefix>br0``,
- the cpu cgroup ``<prefix>NAME`` (``/sys/fs/cgroup/cpu/`` on cgroup v1, the unified tree on
  v2).

Interface names have at most 15 bytes (IFNAMSIZ), which bounds prefix + host name.

Files are kept per prefix too: ``folder()`` is ``$MEMRELAY_LAB_TESTBED_DIR/<prefix>`` (default
``/run/memrelay-lab/testbed/mrlab-/``), holding the state file, the keys, each host's sshd
files and the folder its runs work in (``work/``), so two testbeds side by side never touch
each other's files and `down` removes only its own.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DEFAULT_PREFIX", "DEFAULT_SUBNET", "Names", "TestbedError", "testbed_dir"]

DEFAULT_PREFIX = "mrlab-"
DEFAULT_SUBNET = "10.231.7.0/24"
FIRST_HOST = 11  # hosts are .11, .12, ...; .1 is the bridge (the lab's side)
_IFNAMSIZ = 15
_BRIDGE = "br0"
_PREFIX = re.compile(r"^[a-z][a-z0-9]*-$")
_HOST = re.compile(r"^[a-z][a-z0-9]*$")


class TestbedError(RuntimeError):
    """Something the testbed cannot do (the message says what and why)."""

    __test__ = False  # not a pytest class


def testbed_dir() -> Path:
    """Where the state file, keys and sshd configurations go."""
    return Path(os.environ.get("MEMRELAY_LAB_TESTBED_DIR", "/run/memrelay-lab/testbed"))


@dataclass(frozen=True)
class Names:
    """The names and addresses of one testbed (a prefix and a subnet)."""

    prefix: str = DEFAULT_PREFIX
    subnet: str = DEFAULT_SUBNET

    def __post_init__(self) -> None:
        if not _PREFIX.match(self.prefix):
            raise TestbedError(f"prefix {self.prefix!r}: lower-case letters and digits ending in '-' (e.g. mrlab-)")
        try:
            network = ipaddress.IPv4Network(self.subnet)
        except ValueError as error:
            raise TestbedError(f"subnet {self.subnet!r}: {error}") from None
        if network.prefixlen > 26 or not network.is_private:
            raise TestbedError(f"subnet {self.subnet}: expected a private IPv4 network of at least 64 addresses")

    @classmethod
    def from_environment(cls, prefix: str | None = None, subnet: str | None = None) -> Names:
        return cls(prefix or os.environ.get("MEMRELAY_LAB_TESTBED_PREFIX", DEFAULT_PREFIX),
                   subnet or os.environ.get("MEMRELAY_LAB_TESTBED_SUBNET", DEFAULT_SUBNET))

    @property
    def bridge(self) -> str:
        return self.prefix + _BRIDGE

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.subnet)

    @property
    def bridge_address(self) -> str:
        return str(self.network.network_address + 1)

    def address(self, index: int) -> str:
        """The address of the index-th host (0-based)."""
        return str(self.network.network_address + FIRST_HOST + index)

    def namespace(self, host: str) -> str:
        return self.prefix + host

    def veth(self, host: str) -> str:
        return self.prefix + host

    def cgroup(self, host: str) -> str:
        return self.prefix + host

    def host_of(self, name: str) -> str:
        """The host a namespace, interface or cgroup name belongs to."""
        return name[len(self.prefix):]

    def folder(self, base: Path | None = None) -> Path:
        """This testbed's own folder (module docstring) under `base` (default `testbed_dir()`)."""
        return Path(base if base is not None else testbed_dir()) / self.prefix

    def ours(self, name: str) -> bool:
        return name.startswith(self.prefix)

    def check_host(self, host: str) -> None:
        if not _HOST.match(host):
            raise TestbedError(f"host name {host!r}: lower-case letters and digits, starting with a letter")
        if host == _BRIDGE:
            raise TestbedError(f"host name {host!r} is the bridge's")
        if len(self.veth(host)) > _IFNAMSIZ:
            raise TestbedError(f"host name {host!r}: {self.prefix}{host} is longer than the {_IFNAMSIZ} bytes an "
                               f"interface name may have; use at most {_IFNAMSIZ - len(self.prefix)} characters")
