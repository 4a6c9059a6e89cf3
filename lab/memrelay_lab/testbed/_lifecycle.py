"""`up`, `down` and `status` of the testbed, and its state file.

`up` first removes whatever an earlier testbed with the same prefix left (so it is idempotent,
and a partial leftover of a killed `up` is cleaned), then makes the bridge, per host the
namespace, veth, shaping and cgroup, the keys, and an sshd per namespace, waits until every
sshd accepts connections, and only then writes ``state.json``. A failure on the way removes
everything again.

`down` needs no state file: it finds the namespaces, interfaces and cgroups by their prefix,
kills every process inside a namespace or cgroup of the testbed (SIGTERM, SIGKILL after 2 s),
then removes them, and the testbed's own folder (`Names.folder`): the state file, keys, sshd
configurations and ``work/``, where the runs on its hosts keep their files (the namespaces
share this machine's file system; a run SIGKILLed mid-way leaves its files there). Another
prefix's folder is not touched.

Every function takes the *base* folder (``$MEMRELAY_LAB_TESTBED_DIR``) and works in
``names.folder(base)``. `status` lists what
exists, and whether it is what the state file describes: a piece without a host in the state
file is a leftover, a host of the state file without its pieces is broken.

The state file, ``<base>/<prefix>/state.json`` (read by `experiment._topology.testbed_hosts`)::

    {"prefix": "mrlab-", "subnet": "10.231.7.0/24", "bridge": "mrlab-br0", "dir": "<base>/mrlab-",
     "hosts": [{"name": "client1", "namespace": "mrlab-client1", "address": "10.231.7.11",
                "ssh_port": 22, "user": "root", "key": ".../keys/user_ed25519",
                "known_hosts": ".../keys/known_hosts", "veth": "mrlab-client1",
                "cgroup": "/sys/fs/cgroup/cpu/mrlab-client1", "sshd_pid": 1234,
                "cpu_shares": null, "cpus": null,
                "links": {"rate_mbit": 100, "delay_ms": null}}, ...]}
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import _cgroups, _links, _sshd
from ._names import Names, TestbedError

__all__ = ["HostPlan", "down", "require_root", "status", "up"]

Say = Callable[[str], None]
_CAP_NET_ADMIN, _CAP_SYS_ADMIN = 12, 21


@dataclass(frozen=True)
class HostPlan:
    """One host to bring up: its name, link and processor limits (None: not limited)."""

    name: str
    rate_mbit: float | None = None
    delay_ms: float | None = None
    cpu_shares: int | None = None
    cpus: float | None = None

    def check(self) -> None:
        for what, value in (("rate", self.rate_mbit), ("delay", self.delay_ms), ("cpus", self.cpus)):
            if value is not None and not value > 0:
                raise TestbedError(f"host {self.name}: the {what} must be positive, got {value:g}")
        if self.cpu_shares is not None and not 2 <= self.cpu_shares <= 262144:
            raise TestbedError(f"host {self.name}: cpu shares are 2..262144, got {self.cpu_shares}")


def require_root() -> None:
    """The testbed changes the machine's network: root (CAP_NET_ADMIN and CAP_SYS_ADMIN)."""
    try:
        status_text = Path("/proc/self/status").read_text()
        effective = int(next(line.split()[1] for line in status_text.splitlines() if line.startswith("CapEff:")), 16)
    except (OSError, StopIteration, ValueError):
        effective = 0
    if not (effective >> _CAP_NET_ADMIN & 1 and effective >> _CAP_SYS_ADMIN & 1):
        raise TestbedError("the testbed needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN): it creates network "
                           "namespaces, veths, tc qdiscs and cgroups; run `memrelay-lab testbed` as root")
    if not os.path.exists(_sshd.SSHD):
        raise TestbedError(f"the testbed runs a real OpenSSH server per host and {_sshd.SSHD} is missing "
                           "(Debian's openssh-server; make deps installs it)")


def _state_path(folder: Path) -> Path:
    return folder / "state.json"


def read_state(folder: Path) -> dict[str, Any] | None:
    try:
        return json.loads(_state_path(folder).read_text())
    except (OSError, ValueError):
        return None


# ---------------------------------------------------------------- up


def up(plans: Sequence[HostPlan], names: Names, base: Path, say: Say = lambda line: None) -> dict[str, Any]:
    """Bring the testbed up (module docstring); returns the state written."""
    folder = names.folder(base)
    if not plans:
        raise TestbedError("a testbed needs at least one host")
    seen = set()
    for plan in plans:
        names.check_host(plan.name)
        plan.check()
        if plan.name in seen:
            raise TestbedError(f"host {plan.name} is named twice")
        seen.add(plan.name)
    if len(plans) > names.network.num_addresses - 12:
        raise TestbedError(f"{len(plans)} hosts do not fit in {names.subnet}")
    require_root()
    if _cgroups.cgroup_root() is None:
        raise TestbedError("no cpu cgroup controller (neither /sys/fs/cgroup/cpu nor a unified tree with cpu)")
    removed = down(names, base)
    if removed:
        say(f"testbed: removed leftovers first: {', '.join(removed)}")
    folder.mkdir(parents=True, exist_ok=True)
    addresses = {plan.name: names.address(i) for i, plan in enumerate(plans)}
    try:
        _links.make_bridge(names)
        entries = []
        for plan in plans:
            _links.add_host_link(names, plan.name, addresses[plan.name], plan.rate_mbit, plan.delay_ms)
            cgroup = _cgroups.make_cgroup(names, plan.name, plan.cpu_shares, plan.cpus)
            entries.append((plan, cgroup))
        user_key, known_hosts = _sshd.make_keys(folder, addresses)
        started = [(plan, cgroup, _sshd.start_sshd(folder, plan.name, names.namespace(plan.name),
                                                   addresses[plan.name], cgroup)) for plan, cgroup in entries]
        hosts = []
        for plan, cgroup, process in started:
            _sshd.wait_listening(process, addresses[plan.name], folder / "hosts" / plan.name / "sshd.log")
            hosts.append({
                "name": plan.name, "namespace": names.namespace(plan.name), "address": addresses[plan.name],
                "ssh_port": _sshd.SSH_PORT, "user": "root", "key": str(user_key), "known_hosts": str(known_hosts),
                "veth": names.veth(plan.name), "cgroup": str(cgroup), "sshd_pid": process.pid,
                "cpu_shares": plan.cpu_shares, "cpus": plan.cpus,
                "links": {"rate_mbit": plan.rate_mbit, "delay_ms": plan.delay_ms},
            })
            say(f"testbed: host {plan.name} at {addresses[plan.name]} (namespace {names.namespace(plan.name)}, "
                f"link {_describe_rate(plan.rate_mbit)}, sshd pid {process.pid})")
        state = {"prefix": names.prefix, "subnet": names.subnet, "bridge": names.bridge,
                 "bridge_address": names.bridge_address, "dir": str(folder), "created_unix": time.time(),
                 "hosts": hosts}
        temporary = _state_path(folder).with_suffix(".tmp")
        temporary.write_text(json.dumps(state, indent=1))
        temporary.replace(_state_path(folder))
        return state
    except BaseException:
        down(names, base)
        raise


def _describe_rate(rate_mbit: float | None) -> str:
    return "not shaped" if rate_mbit is None else f"{rate_mbit:g} Mbit/s each way"


# ---------------------------------------------------------------- down


def _kill_all(pids: list[int], grace: float = 2.0) -> None:
    """SIGTERM, then SIGKILL what is left after ``grace`` seconds; returns once all are gone."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10.0)):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while pids and time.monotonic() < deadline:
            pids = [pid for pid in pids if _alive(pid)]
            time.sleep(0.02)
        if not pids:
            return


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone for our purposes
    except (OSError, IndexError):
        return False


def down(names: Names, base: Path, say: Say = lambda line: None) -> list[str]:
    """Remove everything of the testbed with ``names``' prefix; returns what was removed."""
    folder = names.folder(base)
    namespaces = _links.our_namespaces(names)
    cgroups = _cgroups.our_cgroups(names)
    if namespaces or cgroups or _links.our_links(names):
        require_root()
    removed = []
    pids = sorted({pid for ns in namespaces for pid in _links.namespace_pids(ns)}
                  | {pid for cgroup in cgroups for pid in _cgroup_members(cgroup)})
    pids = [pid for pid in pids if pid != os.getpid()]
    if pids:
        _kill_all(pids)
        removed.append(f"{len(pids)} processes")
    for cgroup in cgroups:
        _cgroups.remove_cgroup(cgroup)
        removed.append(f"cgroup {cgroup.name}")
    for namespace in namespaces:
        _links.remove_namespace(namespace)
        removed.append(f"namespace {namespace}")
    links = _links.our_links(names)  # a namespace's veth went with it; the bridge is left
    for link in sorted(links, key=lambda n: n == names.bridge):
        _links.remove_link(link)
        removed.append(f"interface {link}")
    if _state_path(folder).exists():
        removed.append(f"state file {_state_path(folder)}")
    work = _work_left(folder)
    if work:
        removed.append(f"{work} run folders left in {folder / 'work'}")
    shutil.rmtree(folder, ignore_errors=True)  # this prefix's folder only
    for line in removed:
        say(f"testbed: removed {line}")
    return removed


def _work_left(folder: Path) -> int:
    """Run folders left in the testbed's work folder (a run removes its own when it ends)."""
    try:
        return sum(1 for _ in (folder / "work").iterdir())
    except OSError:
        return 0


def _cgroup_members(path: Path) -> list[int]:
    try:
        return [int(p) for p in (path / "cgroup.procs").read_text().split()]
    except (OSError, ValueError):
        return []


# ---------------------------------------------------------------- status


def status(names: Names, base: Path) -> dict[str, Any]:
    """What exists of the testbed and whether it matches the state file (module docstring)."""
    folder = names.folder(base)
    state = read_state(folder)
    if state is not None and state.get("prefix", names.prefix) != names.prefix:
        state = None  # another testbed's state file
    namespaces = set(_links.our_namespaces(names))
    links = set(_links.our_links(names))
    cgroups = {p.name: p for p in _cgroups.our_cgroups(names)}
    processes = {ns: _links.namespace_pids(ns) for ns in sorted(namespaces)}
    hosts = []
    expected_ns, expected_links, expected_cgroups = set(), {names.bridge} if state else set(), set()
    for entry in (state or {}).get("hosts", []):
        name = entry["name"]
        namespace, veth, cgroup = names.namespace(name), names.veth(name), names.cgroup(name)
        expected_ns.add(namespace)
        expected_links.add(veth)
        expected_cgroups.add(cgroup)
        sshd_running = _alive(int(entry.get("sshd_pid", 0) or 0)) and int(entry["sshd_pid"]) in processes.get(
            namespace, [])
        problems = [what for what, ok in (("namespace", namespace in namespaces), ("veth", veth in links),
                                          ("cgroup", cgroup in cgroups), ("sshd", sshd_running)) if not ok]
        hosts.append({"name": name, "address": entry["address"], "namespace": namespace,
                      "rate_mbit": (entry.get("links") or {}).get("rate_mbit"),
                      "delay_ms": (entry.get("links") or {}).get("delay_ms"),
                      "cpu_shares": entry.get("cpu_shares"), "cpus": entry.get("cpus"),
                      "sshd_pid": entry.get("sshd_pid"), "processes": len(processes.get(namespace, [])),
                      "missing": problems})
    leftovers = ([f"namespace {n} ({len(processes[n])} processes)" for n in sorted(namespaces - expected_ns)]
                 + [f"interface {n}" for n in sorted(links - expected_links)]
                 + [f"cgroup {n}" for n in sorted(set(cgroups) - expected_cgroups)])
    if state is not None and names.bridge not in links:
        hosts_missing_bridge = True
    else:
        hosts_missing_bridge = False
    broken = [f"host {h['name']}: {', '.join(h['missing'])} missing" for h in hosts if h["missing"]]
    if hosts_missing_bridge:
        broken.append(f"bridge {names.bridge} missing")
    return {
        "prefix": names.prefix,
        "state_file": str(_state_path(folder)) if state is not None else None,
        "up": state is not None and not broken,
        "bridge": {"name": names.bridge, "exists": names.bridge in links, "address": names.bridge_address},
        "hosts": hosts,
        "leftovers": leftovers,
        "broken": broken,
        "clean": state is None and not namespaces and not links and not cgroups,
    }
