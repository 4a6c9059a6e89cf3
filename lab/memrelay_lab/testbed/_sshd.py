"""A real OpenSSH server in each host's namespace, with keys made for the testbed.

``ssh-keygen`` makes one user key (``keys/user_ed25519``, authorized for root on every host)
and a host key per host; ``keys/known_hosts`` names every host's address with its key, so
the lab's SSH client checks the hosts as it would real machines. Debian's ``/usr/sbin/sshd``
runs in the foreground (``-D``) through ``ip netns exec`` inside the namespace, listening on
the host's address, port 22, started inside the host's cgroup (the sessions it opens are its
children and stay there).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from ..plumbing.processes import NotListening, wait_for_port
from ._cgroups import enter_cgroup
from ._names import TestbedError

__all__ = ["SSHD", "make_keys", "sshd_config", "start_sshd", "wait_listening"]

SSHD = "/usr/sbin/sshd"
SSH_PORT = 22


def _keygen(path: Path) -> None:
    if path.exists():
        return
    done = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "memrelay-lab testbed",
                           "-f", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        raise TestbedError(f"ssh-keygen for {path} failed: {done.stderr.strip()}")


def make_keys(folder: Path, hosts: dict[str, str]) -> tuple[Path, Path]:
    """The user key and the known_hosts file for ``hosts`` (name -> address); host keys in
    ``folder/hosts/NAME``."""
    if shutil.which("ssh-keygen") is None:
        raise TestbedError("ssh-keygen is missing (Debian's openssh-client; make deps installs it)")
    keys = folder / "keys"
    keys.mkdir(parents=True, exist_ok=True)
    os.chmod(keys, 0o700)
    user = keys / "user_ed25519"
    _keygen(user)
    shutil.copyfile(keys / "user_ed25519.pub", keys / "authorized_keys")
    lines = []
    for name, address in hosts.items():
        host_dir = folder / "hosts" / name
        host_dir.mkdir(parents=True, exist_ok=True)
        _keygen(host_dir / "host_ed25519")
        kind, key = (host_dir / "host_ed25519.pub").read_text().split()[:2]
        lines.append(f"{address} {kind} {key}\n")
    known_hosts = keys / "known_hosts"
    known_hosts.write_text("".join(lines))
    return user, known_hosts


def sshd_config(address: str, port: int, host_key: Path, pid_file: Path, authorized_keys: Path) -> str:
    """An sshd_config for root logins by key only, on ``address``:``port`` (the testbed's hosts
    and the SSH host tests' own server on loopback)."""
    return f"""\
ListenAddress {address}:{port}
HostKey {host_key}
PidFile {pid_file}
AuthorizedKeysFile {authorized_keys}
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
UseDNS no
MaxSessions 10
MaxStartups 100
Subsystem sftp internal-sftp
LogLevel ERROR
"""


def start_sshd(folder: Path, name: str, namespace: str, address: str, cgroup: Path) -> subprocess.Popen:
    """sshd in ``namespace`` on ``address``:22, inside ``cgroup``; returns its process."""
    host_dir = folder / "hosts" / name
    config = host_dir / "sshd_config"
    config.write_text(sshd_config(address, SSH_PORT, host_dir / "host_ed25519", host_dir / "sshd.pid",
                                  folder / "keys" / "authorized_keys"))
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    log = open(host_dir / "sshd.log", "ab")
    try:
        return subprocess.Popen(["ip", "netns", "exec", namespace, SSHD, "-D", "-e", "-f", str(config)],
                                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True, preexec_fn=lambda: enter_cgroup(cgroup))
    finally:
        log.close()


def wait_listening(process: subprocess.Popen, address: str, log: Path, timeout: float = 30.0) -> None:
    """Returns once sshd accepts connections at ``address``:22 (from the lab's namespace)."""
    try:
        wait_for_port(SSH_PORT, process, timeout, address)
    except NotListening as failed:
        if failed.status is None:
            raise TestbedError(f"sshd at {address} did not listen within {timeout:g} s") from None
        raise TestbedError(f"sshd at {address} exited with status {failed.status}: "
                           f"{log.read_text(errors='replace').strip()[-300:]}") from None
