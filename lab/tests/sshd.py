"""A real OpenSSH server for the tests of SSH hosts: Debian's sshd, on 127.0.0.1 on a free
port, with host and user keys made by ssh-keygen in a temporary folder, stopped at the end.

It needs root (sshd drops privileges to its separation user and logs users in) and
/usr/sbin/sshd (scripts/install-deps.sh installs openssh-server); without either the tests
that use it are skipped with a message saying so.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from memrelay_lab.testbed._sshd import sshd_config

SSHD = "/usr/sbin/sshd"


@dataclass
class Sshd:
    port: int
    key: Path  # the user's private key (authorized)
    other_key: Path  # a key sshd does not know
    known_hosts: Path  # the server's host key, for 127.0.0.1:port
    process: subprocess.Popen
    log: Path

    def host_table(self, name: str = "box", **extra: str | bool | int) -> str:
        """A [hosts.NAME] table for an experiment file reaching this server as root."""
        lines = [f"[hosts.{name}]", 'address = "127.0.0.1"', f"port = {self.port}", 'user = "root"',
                 f'key = "{self.key}"', f'known_hosts = "{self.known_hosts}"']
        for key, value in extra.items():
            lines.append(f"{key} = " + ("true" if value is True else "false" if value is False
                                        else str(value) if isinstance(value, int) else f'"{value}"'))
        return "\n".join(lines) + "\n"


def skip_without_sshd() -> None:
    if not os.path.exists(SSHD):
        pytest.skip(f"SSH host tests need a real OpenSSH server ({SSHD} is missing; make deps installs it)")
    if os.geteuid() != 0:
        pytest.skip("SSH host tests need root (the test's own sshd logs in as root)")


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_sshd(folder: Path) -> Sshd:
    """Start sshd in ``folder`` (keys, config, log); returns once it accepts connections."""
    skip_without_sshd()
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder, 0o700)
    for name in ("host_ed25519", "user_ed25519", "other_ed25519"):
        _keygen(folder / name)
    shutil.copyfile(folder / "user_ed25519.pub", folder / "authorized_keys")
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    port = _free_port()
    config = folder / "sshd_config"
    config.write_text(sshd_config("127.0.0.1", port, folder / "host_ed25519", folder / "sshd.pid",
                                  folder / "authorized_keys"))
    host_key = (folder / "host_ed25519.pub").read_text().split()
    (folder / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    log = folder / "sshd.log"
    with open(log, "ab") as output:
        process = subprocess.Popen([SSHD, "-D", "-e", "-f", str(config)], stdin=subprocess.DEVNULL,
                                   stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 30
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"sshd exited with status {process.returncode}: {log.read_text()[-500:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if time.monotonic() > deadline:
                stop_sshd(process)
                raise RuntimeError(f"sshd did not listen on port {port} within 30 s") from None
            time.sleep(0.05)
    return Sshd(port, folder / "user_ed25519", folder / "other_ed25519", folder / "known_hosts", process, log)


def stop_sshd(process: subprocess.Popen) -> None:
    """Stop sshd and every session it still has (its process group)."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
