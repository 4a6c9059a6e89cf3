"""A testbed on one machine: every host a Linux network namespace on a bridge, with a real
OpenSSH server, its own shaped link and its own cpu cgroup (``memrelay-lab testbed``).

`up` brings the hosts up and writes the state file that ``hosts = "testbed"`` in an
experiment file reads; `down` removes everything with the testbed's prefix, state file or
not; `status` says what exists and whether it matches. Names: `_names`; network and tc:
`_links`; processor limits: `_cgroups`; sshd and keys: `_sshd`; the three commands:
`_lifecycle`.
"""

from ._lifecycle import HostPlan, down, read_state, require_root, status, up
from ._links import NETEM_MISSING
from ._names import DEFAULT_PREFIX, DEFAULT_SUBNET, Names, TestbedError, testbed_dir

__all__ = [
    "DEFAULT_PREFIX",
    "DEFAULT_SUBNET",
    "NETEM_MISSING",
    "HostPlan",
    "Names",
    "TestbedError",
    "down",
    "read_state",
    "require_root",
    "status",
    "testbed_dir",
    "up",
]
