"""The testbed's network, through pyroute2's netlink calls: namespaces, the bridge, one veth
per host, addresses, and link shaping with tc.

::

    root namespace (the lab)                        namespace <prefix>h1
      <prefix>br0 10.231.7.1/24 ── <prefix>h1 ═══veth═══ eth0 10.231.7.11/24, lo
                                 ── <prefix>h2 ═══veth═══ (namespace <prefix>h2) ...

Every host reaches every other and the lab over the bridge; there is no default route and
no forwarding, so nothing leaves the machine. Shaping a host's link at R Mbit/s puts a ``tbf``
qdisc on both ends of its veth: on the root end it limits what goes *to* the host, on the
``eth0`` end what comes *from* it (each direction of a full-duplex link). A delay is netem's,
on both ends too (half of it each way, so a round trip through the host's link grows by the
whole delay); a kernel without sch_netem refuses it, and so does the testbed.
"""

from __future__ import annotations

import os
from pathlib import Path

from pyroute2 import IPRoute, NetNS, netns
from pyroute2.netlink.exceptions import NetlinkError

from ._names import Names, TestbedError

__all__ = ["NETEM_MISSING", "add_host_link", "make_bridge", "namespace_pids", "our_links", "our_namespaces",
           "remove_link", "remove_namespace"]

NETEM_MISSING = "this kernel has no netem (sch_netem); a delay cannot be emulated here"
# tbf's queue: what waits for the bucket, as time at the link's rate. Generous, so that many
# clients' replies queue rather than drop (a drop costs a TCP retransmission timeout).
TBF_LATENCY = "200ms"


def our_namespaces(names: Names) -> list[str]:
    return sorted(n for n in netns.listnetns() if names.ours(n))


def our_links(names: Names) -> list[str]:
    """Interfaces of the root namespace named with the prefix (the bridge and the veths)."""
    with IPRoute() as ipr:
        found = [link.get_attr("IFLA_IFNAME") for link in ipr.get_links()]
    return sorted(n for n in found if n and names.ours(n))


def make_bridge(names: Names) -> None:
    with IPRoute() as ipr:
        ipr.link("add", ifname=names.bridge, kind="bridge")
        index = ipr.link_lookup(ifname=names.bridge)[0]
        ipr.addr("add", index=index, address=names.bridge_address, prefixlen=names.network.prefixlen)
        ipr.link("set", index=index, state="up")


def add_host_link(names: Names, host: str, address: str, rate_mbit: float | None, delay_ms: float | None) -> None:
    """The host's namespace and its veth to the bridge, addressed and shaped."""
    namespace = names.namespace(host)
    netns.create(namespace)
    with IPRoute() as ipr:
        ipr.link("add", ifname=names.veth(host), kind="veth", peer={"ifname": "eth0", "net_ns_fd": namespace})
        index = ipr.link_lookup(ifname=names.veth(host))[0]
        bridge = ipr.link_lookup(ifname=names.bridge)[0]
        ipr.link("set", index=index, master=bridge, state="up")
        _shape(ipr, index, rate_mbit, delay_ms, f"{names.veth(host)} (to {host})")
    with NetNS(namespace) as ns:
        ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
        inner = ns.link_lookup(ifname="eth0")[0]
        ns.addr("add", index=inner, address=address, prefixlen=names.network.prefixlen)
        ns.link("set", index=inner, state="up")
        _shape(ns, inner, rate_mbit, delay_ms, f"eth0 of {namespace} (from {host})")


def _shape(ipr, index: int, rate_mbit: float | None, delay_ms: float | None, where: str) -> None:
    """tbf at the rate (and netem's delay under it, half the delay each way)."""
    try:
        if rate_mbit is not None:
            rate = int(rate_mbit * 1e6)  # bits per second
            # The bucket holds at least 2 ms of the rate and never less than 32 KiB (one
            # GSO super-packet must fit, or tbf would segment every large write).
            burst = max(32 * 1024, int(rate / 8 * 0.002))
            ipr.tc("add", "tbf", index=index, handle="1:", rate=f"{rate}bit", burst=burst, latency=TBF_LATENCY)
        if delay_ms is not None:
            parent = {"parent": "1:1"} if rate_mbit is not None else {}
            ipr.tc("add", "netem", index=index, handle="10:", delay=int(delay_ms * 1000 / 2), **parent)
    except NetlinkError as error:
        if delay_ms is not None and error.code == 2:  # ENOENT: the qdisc kind is unknown
            raise TestbedError(NETEM_MISSING) from None
        raise TestbedError(f"tc on {where}: {error}") from None


def remove_link(name: str) -> None:
    """Delete a root-namespace interface (a veth takes its peer with it); gone already is fine."""
    with IPRoute() as ipr:
        found = ipr.link_lookup(ifname=name)
        if found:
            try:
                ipr.link("del", index=found[0])
            except NetlinkError as error:
                if error.code != 19:  # ENODEV: went away meanwhile
                    raise


def remove_namespace(name: str) -> None:
    try:
        netns.remove(name)
    except OSError as error:
        if Path(f"/run/netns/{name}").exists():
            raise TestbedError(f"cannot remove namespace {name}: {error}") from None


def namespace_pids(name: str) -> list[int]:
    """Processes in the namespace (what ``ip netns pids`` lists: same network namespace inode)."""
    try:
        target = os.stat(f"/run/netns/{name}")
    except OSError:
        return []
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            mine = os.stat(f"/proc/{entry}/ns/net")
        except OSError:
            continue
        if (mine.st_dev, mine.st_ino) == (target.st_dev, target.st_ino):
            pids.append(int(entry))
    return pids
