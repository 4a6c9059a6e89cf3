"""TLS for the bench's TLS rows (layout `tls1`): certificates made with the `openssl` command in
the work directory, memcached speaking TLS (`-Z`) with a plain port beside it for populating
and for the work check's counters, and whether this memrelay can speak TLS to its servers.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Files:
    ca: Path
    cert: Path
    key: Path


def files(work: Path) -> Files:
    """Where the certificates are (made by `make`)."""
    folder = work / "tls"
    return Files(folder / "ca.pem", folder / "cert.pem", folder / "key.pem")


def make(work: Path) -> Files:
    """A test CA and a certificate it signed for localhost and 127.0.0.1 (EC P-256, 2 days)."""
    f = files(work)
    f.ca.parent.mkdir(parents=True, exist_ok=True)
    ca_key = f.ca.parent / "ca.key"
    base = ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
            "-days", "2"]
    run = lambda argv: subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # noqa: E731
    run(base + ["-subj", "/CN=memrelay bench CA", "-keyout", str(ca_key), "-out", str(f.ca)])
    run(base + ["-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                "-addext", "basicConstraints=critical,CA:FALSE",
                "-CA", str(f.ca), "-CAkey", str(ca_key), "-keyout", str(f.key), "-out", str(f.cert)])
    return f


def memcached_options(f: Files, plain_port: int) -> list[str]:
    """memcached's options for TLS on its `-p` port and plain text on `plain_port` (memcached
    joins its `-l` options)."""
    return ["-Z", "-o", f"ssl_chain_cert={f.cert},ssl_key={f.key}", "-l", f"notls:127.0.0.1:{plain_port}"]


def memrelay_speaks_tls_to_servers(binary: str) -> bool:
    """Whether `memrelay --help` lists --server-tls-ca."""
    try:
        out = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "--server-tls-ca" in out


def self_signed(work: Path) -> tuple[Path, Path]:
    """A self-signed certificate for localhost and its key (EC P-256, 1 day), made with openssl."""
    cert, key = work / "cert.pem", work / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                    "-nodes", "-days", "1", "-subj", "/CN=localhost", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert, key
