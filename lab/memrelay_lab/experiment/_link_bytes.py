"""Bytes through each host's link, from the kernel's interface counters.

On the testbed every host's whole traffic crosses one veth whose other end is in the lab's
namespace (``HostSpec.link_interface``), so that end's counters are the host's link: what it
transmits went *to* the host, what it receives came *from* it. The counters include every
header the link carries (Ethernet, IP, TCP, and the acknowledgements), which is what a
shaped link's rate is spent on. Hosts without such an interface (real machines) are left
out.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["link_bytes"]


def _interface_bytes(name: str) -> tuple[int, int] | None:
    """(received, transmitted) bytes of one interface of the lab's namespace; None if absent."""
    base = Path("/sys/class/net") / name / "statistics"
    try:
        return int((base / "rx_bytes").read_text()), int((base / "tx_bytes").read_text())
    except (OSError, ValueError):
        return None


def link_bytes(interfaces: dict[str, str]) -> dict[str, tuple[int, int]]:
    """Per host (name -> interface): (bytes to the host, bytes from the host) so far."""
    found = {}
    for host, interface in interfaces.items():
        counters = _interface_bytes(interface)
        if counters is not None:
            received, transmitted = counters
            found[host] = (transmitted, received)
    return found
