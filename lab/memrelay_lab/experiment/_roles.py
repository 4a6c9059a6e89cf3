"""Which host each process of a run runs on, and where the programs are on that host.

Server j runs on ``servers[j mod len]``, middleware k on ``middlewares[k mod len]``, the bench
instances of client machine m on ``clients[m mod len]`` (the populating bench on client host
0), as the seeds place their processes on VMs. Without ``[hosts]`` every role is one
:class:`LocalHost`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ._hosts import Host, LocalHost
from ._binaries import Binaries

__all__ = ["RoleHosts"]


@dataclass
class RoleHosts:
    """The hosts of the three roles and each host's binaries (by host name)."""

    servers: list[Host]
    middlewares: list[Host]
    clients: list[Host]
    binaries: dict[str, Binaries]
    #: Names of the hosts whose processes this machine sees (same kernel, same process ids):
    #: the processor sampler reads them with psutil.
    visible: set[str] = field(default_factory=set)

    @classmethod
    def local(cls, host: Host, binaries: Binaries) -> RoleHosts:
        """Every role on one host (this machine unless another host is given)."""
        return cls([host], [host], [host], {host.name: binaries},
                   visible={host.name} if isinstance(host, LocalHost) else set())

    def server(self, j: int) -> Host:
        return self.servers[j % len(self.servers)]

    def middleware(self, k: int) -> Host:
        return self.middlewares[k % len(self.middlewares)]

    def client(self, machine: int) -> Host:
        return self.clients[machine % len(self.clients)]

    def all(self) -> list[Host]:
        """Every host once, in role order."""
        seen: dict[str, Host] = {}
        for host in [*self.servers, *self.middlewares, *self.clients]:
            seen.setdefault(host.name, host)
        return list(seen.values())

    def binaries_on(self, host: Host) -> Binaries:
        return self.binaries[host.name]

    @property
    def single_machine(self) -> bool:
        """Every role shares one host."""
        return len(self.all()) == 1
