"""The client matrix: each real client library's program and how to run it (tests/clients).

Every program takes `--addr HOST:PORT --mode script|load|probe --prefix P [--keys N]
[--seconds S]` and prints one JSON summary line (see README.md beside this file). The Go, Java
and Node programs are built by scripts/install-clients.sh (run by scripts/install-deps.sh);
`missing()` names what that left unbuilt.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
PYTHON = str(REPO / "lab" / ".venv" / "bin" / "python")
GO_BIN = HERE / "go" / "bin" / "gomemcache-client"
JAVA_CP = f"{HERE / 'java' / 'target' / 'classes'}:{HERE / 'java' / 'target' / 'lib'}/*"


@dataclass(frozen=True)
class Client:
    name: str
    language: str
    argv: tuple[str, ...]
    binary_protocol: bool = False

    def missing(self) -> str | None:
        """What scripts/install-clients.sh left unbuilt for this client, if anything."""
        if self.language == "go" and not GO_BIN.exists():
            return str(GO_BIN)
        if self.language == "java" and not (HERE / "java" / "target" / "classes" / "memrelay" / "Main.class").exists():
            return "tests/clients/java/target (mvn package)"
        if self.language == "node" and not (HERE / "node" / "node_modules").is_dir():
            return "tests/clients/node/node_modules (npm ci)"
        return None

    def command(self, addr: str, mode: str, prefix: str, **extra) -> list[str]:
        go_style = self.language == "go"
        args = list(self.argv)
        extra = {("timeout" if k == "timeout_arg" else k): v for k, v in extra.items()}
        for k, v in {"addr": addr, "mode": mode, "prefix": prefix, **extra}.items():
            args += [f"-{k}" if go_style else f"--{k}", str(v)]
        return args

    def run(self, addr: str, mode: str, prefix: str, timeout: float, **extra) -> dict:
        """Runs the program to its end (killed after `timeout` s) and returns its summary."""
        cmd = self.command(addr, mode, prefix, **extra)
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=HERE)
        lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
        if proc.returncode != 0 or not lines:
            raise AssertionError(
                f"{self.name} exited {proc.returncode}: {' '.join(cmd)}\n"
                f"stdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
            )
        return json.loads(lines[-1])


PY = str(HERE / "python" / "client.py")
JAVA = ("java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", JAVA_CP, "memrelay.Main")
NODE = ("node", str(HERE / "node" / "client.js"))

CLIENTS = {
    c.name: c
    for c in [
        Client("gomemcache", "go", (str(GO_BIN),)),
        Client("spymemcached", "java", (*JAVA, "--lib", "spymemcached")),
        Client("xmemcached", "java", (*JAVA, "--lib", "xmemcached")),
        Client("node-memcached", "node", (*NODE, "--lib", "memcached")),
        Client("pymemcache", "python", (PYTHON, PY, "--lib", "pymemcache")),
        Client("pylibmc", "python", (PYTHON, PY, "--lib", "pylibmc")),
    ]
}
# Binary-protocol clients: memrelay speaks the text protocol; they must get an error at once.
BINARY_CLIENTS = {
    c.name: c
    for c in [
        Client("memjs", "node", (*NODE, "--lib", "memjs"), binary_protocol=True),
        Client("pylibmc-binary", "python", (PYTHON, PY, "--lib", "pylibmc", "--binary"), binary_protocol=True),
    ]
}

if __name__ == "__main__":  # python clients.py NAME ARGS...: run one client's program by hand
    c = {**CLIENTS, **BINARY_CLIENTS}[sys.argv[1]]
    os.execvp(c.argv[0], [*c.argv, *sys.argv[2:]])
