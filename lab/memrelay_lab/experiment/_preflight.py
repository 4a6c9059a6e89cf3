"""Preflight: before anything starts, every host the roles use is reached and checked.

`connect_hosts` logs in to each host (a timeout each), and checks what its roles need:
memcached on server hosts (``-V`` answers), memrelay on middleware hosts and memrelay-bench
on every host (it loads the servers on client hosts and measures the links on all) with this
build's version (``--version``), after copying them there when the host says ``ship = true``. Any problem is one :class:`HostError` naming the host, and the
connections made so far are closed: nothing has been started on any host.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path

from ._binaries import Binaries
from ._processes import program_versions
from ._roles import RoleHosts
from ._ssh import HostError, SSHHost
from ._topology import HostSpec, Topology

__all__ = ["connect_hosts"]

# What each role runs: (the Binaries field, the program's name, its version option).
_PROGRAMS = {
    "servers": ("memcached", "memcached", "-V"),
    "middlewares": ("memrelay", "memrelay", "--version"),
    "clients": ("bench", "memrelay-bench", "--version"),
}


def connect_hosts(topology: Topology, lab_root: Path, local: Binaries,
                  say: Callable[[str], None] = lambda line: None) -> RoleHosts:
    """The hosts of ``topology``, connected and checked (module docstring); HostError otherwise.
    ``say`` gets a line per host checked."""
    specs = topology.resolved()
    names = list(dict.fromkeys(n for role in ("servers", "middlewares", "clients") for n in topology.roles[role]))
    hosts: dict[str, SSHHost] = {}
    try:
        for name in names:
            hosts[name] = SSHHost(specs[name], lab_root=lab_root)
            hosts[name].connect()
        versions = program_versions(local)
        identity = _local_identity()
        binaries, visible = {}, set()
        for name, host in hosts.items():
            roles = [role for role in _PROGRAMS if name in topology.roles[role]]
            binaries[name] = _check_programs(host, roles, local, versions)
            if _identity(host) == identity:
                visible.add(name)
            shipped = " (memrelay and memrelay-bench shipped)" if host.spec.ship else ""
            say(f"preflight: {host.describe()} ready for {', '.join(roles)}{shipped}")
    except BaseException:
        for host in hosts.values():
            host.close()
        raise
    return RoleHosts(
        servers=[hosts[n] for n in topology.roles["servers"]],
        middlewares=[hosts[n] for n in topology.roles["middlewares"]],
        clients=[hosts[n] for n in topology.roles["clients"]],
        binaries=binaries,
        visible=visible,
    )


def _check_programs(host: SSHHost, roles: list[str], local: Binaries, versions: dict[str, str | None]) -> Binaries:
    """The host's paths of the programs its roles run, each checked to answer its version."""
    spec: HostSpec = host.spec
    done = host.run("id -u")
    host.user_is_root = done.stdout.strip() == "0"
    paths = {"memcached": spec.memcached, "memrelay": "memrelay", "bench": "memrelay-bench"}
    # memrelay-bench also measures the links (`_environment`): every host needs it.
    for role in [*roles, *([] if "clients" in roles else ["clients"])]:
        field, program, option = _PROGRAMS[role]
        if field == "memcached":
            path = _where(host, spec.memcached, "memcached")
        elif spec.ship:
            path = str(host.remote_root / "bin" / program)
            host.put(Path(getattr(local, field)), path)
        elif spec.bin_dir:
            path = _where(host, f"{spec.bin_dir.rstrip('/')}/{program}", program)
        else:
            path = _where(host, program, program)
        answer = host.run(f"{shlex.quote(path)} {option} 2>&1")
        first = (answer.stdout or "").strip().splitlines()[:1]
        if answer.exit_status != 0 or not first:
            raise HostError(f"{host.describe()}: {path} {option} failed (exit status {answer.exit_status}): "
                            f"{(answer.stdout or '').strip()[:200]}")
        expected = versions.get(program)
        if field != "memcached" and expected and first[0] != expected:
            raise HostError(f"{host.describe()}: {path} is {first[0]!r}, this build is {expected!r}; install "
                            f"this build there or set ship = true")
        paths[field] = path
    return Binaries(memcached=paths["memcached"], memrelay=paths["memrelay"], bench=paths["bench"])


def _where(host: SSHHost, path: str, program: str) -> str:
    """``path`` resolved on the host (a bare name through its PATH); HostError when missing."""
    done = host.run(f"command -v {shlex.quote(path)}")
    found = (done.stdout or "").strip()
    if done.exit_status != 0 or not found:
        where = "on its PATH" if "/" not in path else f"at {path}"
        raise HostError(f"{host.describe()}: {program} not found {where}")
    return found


def _local_identity() -> tuple[str, str]:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip(), os.readlink("/proc/self/ns/pid")
    except OSError:
        return "", ""


def _identity(host: SSHHost) -> tuple[str, str]:
    """The host's kernel boot id and process-id namespace: equal to ours, its pids are ours."""
    done = host.run("cat /proc/sys/kernel/random/boot_id; readlink /proc/self/ns/pid")
    lines = (done.stdout or "").split()
    return (lines[0], lines[1]) if len(lines) == 2 else ("?", "?")
