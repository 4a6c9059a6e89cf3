"""The measured environment of an experiment, recorded in the manifest before the first run.

Per host: its cores, processor model, memory and kernel, and its clock's offset against the
lab's. The offset is NTP's: the lab reads its clock (t0), asks the host for its time
(``date +%s.%N`` from a shell kept open over SSH, r) and reads its clock again (t1); offset =
r - (t0 + t1) / 2, off by at most half the round trip; of `CLOCK_SAMPLES` tries the one with
the smallest round trip is kept. The results loader subtracts it from every time a host wrote
(the clients' start, the middlewares' windows), so windows from several hosts are merged on
the lab's time line.

Per link between two hosts that talk in a run (clients to middlewares and middlewares to
servers when a run has middlewares; clients to servers when one has none, a baseline): its
round trip (smallest and median of 50 one-byte pings) and bandwidth (a bulk transfer of
`LINK_SECONDS`), measured with ``memrelay-bench --link-listen`` on the receiving host and
``--link-probe`` on the sending one. Two roles on the same host talk over loopback: no link,
and the manifest says so. With every role on one host, ``single_machine`` is true and the
report says that all roles shared one machine. A host's link rate, where known (the
testbed's shaping, or ``link_mbit`` in ``[hosts]``), is recorded as ``link_rate_mbit``: the
models make the link a centre.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ._hosts import Host, HostError
from ._manifest import machine_facts
from ._processes import ProcessFailed, wait_until_listening
from ._roles import RoleHosts
from ._ssh import SSHHost

__all__ = ["CLOCK_SAMPLES", "LINK_SECONDS", "measure_environment"]

CLOCK_SAMPLES = 5
LINK_SECONDS = 1.0
# The role pairs that exchange requests, sender first.
_LINKS = (("clients", "middlewares"), ("middlewares", "servers"), ("clients", "servers"))


def measure_environment(roles: RoleHosts, folder: Path, *, middlewares: bool = True, baselines: bool = True,
                        say: Callable[[str], None] = lambda line: None) -> dict[str, Any]:
    """Hosts, clock offsets and links (module docstring); the probes' logs go to ``folder``.

    ``middlewares``: some run has middlewares (clients→middlewares→servers links);
    ``baselines``: some run has none (clients→servers links)."""
    hosts = {}
    for host in roles.all():
        facts = _remote_facts(host) if isinstance(host, SSHHost) else machine_facts()
        facts["address"] = host.address
        facts["roles"] = [role for role in ("servers", "middlewares", "clients")
                          if host in getattr(roles, role)]
        facts["processes_visible_to_lab"] = host.name in roles.visible
        if isinstance(host, SSHHost) and host.spec.link_mbit is not None:
            facts["link_rate_mbit"] = host.spec.link_mbit  # the testbed's shaping or the file's link_mbit
        programs = roles.binaries_on(host)
        facts["binaries"] = {"memcached": programs.memcached, "memrelay": programs.memrelay,
                             "memrelay-bench": programs.bench}
        facts.update(_clock(host))
        hosts[host.name] = facts
    links = []
    used = [pair for pair in _LINKS if (middlewares if "middlewares" in pair else baselines)]
    for sender_role, receiver_role in used:
        for sender in _unique(getattr(roles, sender_role)):
            for receiver in _unique(getattr(roles, receiver_role)):
                if any(l["from"] == sender.name and l["to"] == receiver.name for l in links):
                    continue
                link = {"from": sender.name, "to": receiver.name, "roles": f"{sender_role}→{receiver_role}"}
                if sender is receiver:
                    link["loopback"] = True
                else:
                    link.update(_measure_link(roles, sender, receiver, folder))
                    say(f"environment: link {sender.name} → {receiver.name}: " + (
                        f"not measured: {link['error']}" if "error" in link else
                        f"round trip {link['rtt_min_ms']:.3f} ms, {link['mbit_per_s']:,.1f} Mbit/s"))
                links.append(link)
    return {"single_machine": roles.single_machine, "hosts": hosts, "links": links}


def _unique(hosts: list[Host]) -> list[Host]:
    return list({host.name: host for host in hosts}.values())


def _remote_facts(host: SSHHost) -> dict[str, Any]:
    script = ("nproc; grep -m1 '^model name' /proc/cpuinfo | cut -d: -f2-; "
              "awk '/^MemTotal:/ {print $2}' /proc/meminfo; uname -r; hostname")
    lines = [line.strip() for line in (host.run(script).stdout or "").splitlines()]
    lines += [""] * (5 - len(lines))

    def number(text: str) -> int | None:
        try:
            return int(float(text))
        except ValueError:
            return None

    memory_kib = number(lines[2])
    return {"cores": number(lines[0]), "cpu_model": lines[1] or None,
            "memory_bytes": memory_kib * 1024 if memory_kib is not None else None,
            "kernel": lines[3] or None, "hostname": lines[4] or None}


def _clock(host: Host) -> dict[str, Any]:
    """The host's clock offset against the lab's (seconds; host minus lab) and the round trip
    of the sample it comes from."""
    if not isinstance(host, SSHHost):
        return {"clock_offset_s": 0.0, "clock_rtt_s": 0.0}
    best: tuple[float, float] | None = None
    for t0, remote, t1 in host.clock_samples(CLOCK_SAMPLES):
        sample = (t1 - t0, remote - (t0 + t1) / 2)
        if best is None or sample[0] < best[0]:
            best = sample
    assert best is not None
    return {"clock_offset_s": best[1], "clock_rtt_s": best[0]}


def _measure_link(roles: RoleHosts, sender: Host, receiver: Host, folder: Path) -> dict[str, Any]:
    """Round trip and bandwidth from ``sender`` to ``receiver``; {"error": ...} when it fails."""
    name = f"link-{sender.name}-{receiver.name}"
    port = receiver.free_port()
    listen = receiver.start(f"{name}-listen", [roles.binaries_on(receiver).bench, "--link-listen",
                                                f"{receiver.address}:{port}"], folder / f"{name}-listen.log")
    probe = None
    try:
        wait_until_listening(receiver, listen, port)
        probe = sender.start(f"{name}-probe", [roles.binaries_on(sender).bench, "--link-probe",
                                                f"{receiver.address}:{port}", "--link-seconds", f"{LINK_SECONDS:g}"],
                             folder / f"{name}-probe.log")
        status = sender.wait(probe, 60.0)
        sender.fetch(probe.log_path, probe.log_path)
        text = Path(probe.log_path).read_text(errors="replace") if Path(probe.log_path).exists() else ""
        if status != 0:
            return {"error": f"the probe exited with status {status}: {text.strip()[-200:]}"}
        measured = json.loads(text.strip().splitlines()[-1])
    except (ProcessFailed, HostError, ValueError, IndexError) as error:
        return {"error": str(error)}
    finally:
        for host, handle in ((sender, probe), (receiver, listen)):
            if handle is not None:
                host.stop(handle, grace=2.0)
    return {"rtt_min_ms": measured["rtt_min_us"] / 1000, "rtt_median_ms": measured["rtt_median_us"] / 1000,
            "mbit_per_s": measured["mbit_per_s"], "bytes": measured["bytes"], "seconds": measured["seconds"],
            "tool": "memrelay-bench --link-probe " + shlex.quote(f"{receiver.address}:{port}")}
