"""pymemcache over TLS, through memrelay, to memcached servers that speak TLS only (`-Z`).

Python's own `ssl` module and pymemcache's `tls_context` as the real TLS client; certificates
made here with the `openssl` command: a CA, a certificate for the servers and memrelay
(localhost, 127.0.0.1) and one per client identity. memrelay takes TLS from clients
(`--tls-listen`, client certificates required, their CN the identity of the access rules) and
speaks TLS to the servers (`--server-tls-ca`). What reached the servers is read from their own
`stats`, over TLS.
"""

from __future__ import annotations

import os
import socket
import ssl
import subprocess
from pathlib import Path

import pytest
from pymemcache.client.base import Client
from pymemcache.exceptions import MemcacheClientError, MemcacheUnexpectedCloseError

from conftest import HOST, free_port, memcached_binary, memrelay_binary

OPENSSL = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
           "-nodes", "-days", "2"]


def issue(dir: Path, name: str, subject: str, extra: list[str]) -> tuple[Path, Path]:
    cert, key = dir / f"{name}.pem", dir / f"{name}.key"
    subprocess.run([*OPENSSL, "-subj", subject, "-addext", "basicConstraints=critical,CA:FALSE",
                    "-CA", str(dir / "ca.pem"), "-CAkey", str(dir / "ca.key"), *extra,
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    dir = tmp_path_factory.mktemp("pki")
    subprocess.run([*OPENSSL, "-subj", "/CN=test CA", "-keyout", str(dir / "ca.key"), "-out", str(dir / "ca.pem")],
                   check=True, capture_output=True)
    issue(dir, "server", "/CN=localhost", ["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
    for tenant in ("tenant-a", "tenant-b"):
        issue(dir, tenant, f"/CN={tenant}", [])
    return dir


def context(pki: Path, identity: str | None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    if identity:
        ctx.load_cert_chain(str(pki / f"{identity}.pem"), str(pki / f"{identity}.key"))
    return ctx


@pytest.fixture(scope="module")
def relay(pki, processes_factory):
    """Two memcached -Z and memrelay (evented) with TLS both ways; yields (TLS port, servers)."""
    group = processes_factory()
    try:
        root = ["-u", "root"] if os.geteuid() == 0 else []
        tls = f"ssl_chain_cert={pki / 'server.pem'},ssl_key={pki / 'server.key'}"
        servers = [group.start("memcached-tls", lambda port: [memcached_binary(), "-Z", "-o", tls, "-p", str(port),
                                                              "-U", "0", "-l", HOST, "-t", "1", *root])
                   for _ in range(2)]
        tls_port = free_port()
        rules = ['{ identity = "tenant-a", prefixes = ["a:"] }', '{ identity = "tenant-b", prefixes = ["b:"] }']
        args = [
            "--tls-listen", f"{HOST}:{tls_port}", "--tls-cert", str(pki / "server.pem"),
            "--tls-key", str(pki / "server.key"), "--tls-client-ca", str(pki / "ca.pem"),
            "--server-tls-ca", str(pki / "ca.pem"),
            *[a for rule in rules for a in ("--access", rule)],
        ]
        servers_args = [a for s in servers for a in ("--server", f"{HOST}:{s.port}")]
        group.start("memrelay", lambda port: [str(memrelay_binary()), "--engine", "evented", "--listen",
                                              f"{HOST}:{port}", *servers_args, *args])
        yield tls_port, servers
    finally:
        group.close()


def server_stats(pki: Path, port: int) -> dict[str, int]:
    """A TLS server's own counters."""
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    with socket.create_connection((HOST, port), timeout=10) as raw, ctx.wrap_socket(raw, server_hostname=HOST) as s:
        s.sendall(b"stats\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            chunk = s.recv(65536)
            assert chunk, f"the server closed after {data!r}"
            data += chunk
    return {p[1]: int(p[2]) for p in (line.split() for line in data.decode().splitlines())
            if len(p) == 3 and p[2].isdigit()}


def totals(pki: Path, servers) -> tuple[int, int]:
    stats = [server_stats(pki, s.port) for s in servers]
    return sum(s["cmd_get"] for s in stats), sum(s["cmd_set"] for s in stats)


def test_pymemcache_over_tls_reaches_tls_servers_under_its_certificates_identity(pki, relay):
    port, servers = relay
    a = Client((HOST, port), tls_context=context(pki, "tenant-a"), default_noreply=False, timeout=10)
    b = Client((HOST, port), tls_context=context(pki, "tenant-b"), default_noreply=False, timeout=10)
    assert a.set("a:1", b"alpha") and b.set("b:1", b"beta")
    assert a.get("a:1") == b"alpha" and b.get("b:1") == b"beta"
    # Every server holds both values (writes go to all): read back over TLS on each.
    for server in servers:
        direct = Client((HOST, server.port), tls_context=ssl.create_default_context(cafile=str(pki / "ca.pem")),
                        timeout=10)
        assert direct.get_many(["a:1", "b:1"]) == {"a:1": b"alpha", "b:1": b"beta"}
        direct.close()
    # A tenant reaching for the other's keys: refused, and nothing reaches a server.
    before = totals(pki, servers)
    for attempt in (lambda: a.get("b:1"), lambda: a.get_many(["a:1", "b:1"]), lambda: a.set("b:1", b"x"),
                    lambda: b.delete("a:1")):
        with pytest.raises(MemcacheClientError, match="key not allowed"):
            attempt()
    assert totals(pki, servers) == before
    assert a.get("a:1") == b"alpha"


def test_a_client_without_a_certificate_is_refused_in_the_handshake(pki, relay):
    port, servers = relay
    before = totals(pki, servers)
    anonymous = Client((HOST, port), tls_context=context(pki, None), default_noreply=False, timeout=5)
    with pytest.raises((ssl.SSLError, OSError, MemcacheUnexpectedCloseError)):
        anonymous.get("a:1")
    assert totals(pki, servers) == before
