"""The three programs a run drives: memcached, memrelay and memrelay-bench.

This module knows their command lines, how to tell one is ready (it accepts TCP
connections: `plumbing.processes`), how to read a memcached server's ``stats``, and their
versions. Where their binaries are is :mod:`._binaries`. It starts nothing itself except through a
:class:`~memrelay_lab._hosts.Host`.
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from ..plumbing.peers import memrelay_routing_options
from ..plumbing.processes import NotListening, wait_for_port
from ._binaries import Binaries
from ._expand import Configuration
from ._hosts import Host, ProcessHandle

__all__ = [
    "ProcessFailed",
    "bench_command",
    "log_tail",
    "memcached_command",
    "memrelay_command",
    "populate_command",
    "program_versions",
    "server_stats",
    "wait_until_listening",
]

KEY_PREFIX = "memtier-"
KEY_MINIMUM = 1


class ProcessFailed(RuntimeError):
    """A process of a run died, never became ready, or reported a failure."""


def memcached_command(binary: str, address: str, port: int, memory_mb: int, threads: int,
                      as_root: bool | None = None) -> list[str]:
    """One memcached server, TCP only (seed 000 ran memcached with one thread); ``as_root``:
    the host runs it as root (default: this process does)."""
    argv = [binary, "-l", address, "-p", str(port), "-U", "0", "-m", str(memory_mb), "-t", str(threads)]
    if as_root is None:
        as_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if as_root:
        argv += ["-u", "root"]  # memcached refuses to run as root without it
    return argv


def memrelay_command(
    binary: str, config: Configuration, listen: str, servers: list[str], stats_dir: Path,
    request_log_sample: int | None = None,
) -> list[str]:
    """One middleware of a run, measuring into ``stats_dir`` in 1 s windows."""
    argv = [binary, "--listen", listen]
    for server in servers:
        argv += ["--server", server]
    argv += ["--engine", config.engine, "--workers", str(config.workers)]
    argv += memrelay_routing_options(config.key_routing, config.replication)
    argv += ["--stats-dir", str(stats_dir), "--stats-window", "1"]
    if request_log_sample:
        argv += ["--request-log-sample", str(request_log_sample)]
    return argv


def _key_options(config: Configuration) -> list[str]:
    return [
        "--key-prefix", KEY_PREFIX,
        "--key-minimum", str(KEY_MINIMUM),
        "--key-maximum", str(KEY_MINIMUM + config.keys - 1),
        "--data-size", str(config.value_size),
    ]


def bench_command(
    binary: str, config: Configuration, targets: list[str], seed: int, json_out: Path,
    start_at: float | None = None,
) -> list[str]:
    """One memtier-like instance: T threads x C virtual clients for the test time, from
    ``start_at`` (Unix seconds on the bench's host) when given (`_start_time`)."""
    argv = [binary]
    for target in targets:
        argv += ["--server", target]
    argv += [
        "--threads", str(config.threads_per_instance),
        "--clients", str(config.clients_per_thread),
        "--test-time", f"{config.test_time:g}",
        "--ratio", config.ratio,
        "--multiget", str(config.multiget),
        "--key-pattern", config.key_pattern,
        "--pipeline", str(config.pipeline),
        "--protocol", config.protocol,
        "--seed", str(seed),
        *_key_options(config),
        "--json-out", str(json_out),
        "--quiet",
    ]
    if start_at is not None:
        argv += ["--start-at", f"{start_at:.6f}"]
    return argv


def populate_command(binary: str, config: Configuration, target: str, json_out: Path) -> list[str]:
    """Writes every key of the range once (seed 000 §1.10), through ``target``."""
    return [
        binary, "--server", target, "--threads", "1", "--clients", "8", "--populate",
        *_key_options(config), "--json-out", str(json_out), "--quiet",
    ]


def wait_until_listening(host: Host, handle: ProcessHandle, port: int, timeout: float = 10.0) -> None:
    """Return once ``handle`` accepts TCP connections on ``port``; ProcessFailed if it dies or times out."""
    try:
        wait_for_port(port, lambda: host.poll(handle), timeout, host.address)
    except NotListening as failed:
        if failed.status is None:
            raise ProcessFailed(f"{handle.name} did not listen on port {port} within {timeout:g} s "
                                f"(log: {handle.log_path})") from None
        why = f" (port {port} taken?)" if failed.taken else f" before listening on port {port}"
        raise ProcessFailed(f"{handle.name} exited with status {failed.status}{why}"
                            f"{log_tail(handle.log_path)} (log: {handle.log_path})") from None


def log_tail(path: Path) -> str:
    """': <last line of the log>', to make a failure message say why; '' when there is none."""
    try:
        lines = [line.strip() for line in Path(path).read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return f": {lines[-1][:200]}" if lines else ""


def server_stats(address: str, port: int, timeout: float = 5.0) -> str:
    """The raw reply of memcached's ``stats`` command (``STAT name value`` lines, then END)."""
    with socket.create_connection((address, port), timeout=timeout) as connection:
        connection.sendall(b"stats\r\n")
        reply = b""
        while not reply.endswith(b"END\r\n"):
            chunk = connection.recv(65536)
            if not chunk:
                break
            reply += chunk
    return reply.decode("ascii", errors="replace")


def program_versions(binaries: Binaries) -> dict[str, str | None]:
    """The first line of each program's version output (None when it cannot say)."""

    def first_line(argv: list[str]) -> str | None:
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            return None
        text = (done.stdout or done.stderr).strip()
        return text.splitlines()[0] if text else None

    return {
        "memcached": first_line([binaries.memcached, "-V"]),
        "memrelay": first_line([binaries.memrelay, "--version"]),
        "memrelay-bench": first_line([binaries.bench, "--version"]),
    }
