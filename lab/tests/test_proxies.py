"""Each middleware program as the lab starts it (`experiment._proxies`, `plumbing.peers`): it starts and listens,
routes as configured (a set through it lands on the server(s) the routing says, read back from
the servers themselves; a multi-get through it is served), and stops with nothing left running.

memcached's proxy is $MEMCACHED_PROXY or the one scripts/build-memcached-proxy.sh builds (cached
outside the repository); it is built when missing, and skipped only when that build cannot run here."""

from __future__ import annotations

import os
import socket
import time
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from memrelay_lab.experiment import BinaryNotFound, LocalHost, find_binaries
from memrelay_lab.experiment._binaries import find_proxy
from memrelay_lab.plumbing.binaries import build_memcached_proxy
from memrelay_lab.experiment._expand import Configuration
from memrelay_lab.experiment._processes import memcached_command, memrelay_command, wait_until_listening
from memrelay_lab.experiment._proxies import proxy_launch, routing


def _program(program: str) -> str:
    try:
        return build_memcached_proxy() if program == "memcached-proxy" else find_proxy(program)
    except BinaryNotFound as missing:
        pytest.skip(str(missing))


def _configuration(servers: int, **changes) -> Configuration:
    config = Configuration(
        index=0, servers=servers, client_machines=1, instances_per_machine=1, threads_per_instance=1,
        clients_per_thread=1, workload="1:10", multiget=4, sharded=True, middlewares=1, workers=2,
        engine="evented", distribution="all", replication="all", read_from=None, value_size=16, keys=100,
        key_pattern="R", pipeline=1, test_time=2, warmup=0, cooldown=0, populate=True)
    return replace(config, **changes)


def _say(port: int, request: bytes, until: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as connection:
        connection.sendall(request)
        reply = b""
        while not reply.endswith(until):
            chunk = connection.recv(65536)
            if not chunk:
                break
            reply += chunk
    return reply


def _held(port: int, keys: list[str]) -> set[str]:
    """The keys a memcached server holds (asked directly, not through the proxy)."""
    reply = _say(port, f"get {' '.join(keys)}\r\n".encode(), b"END\r\n").decode()
    return {line.split()[1] for line in reply.splitlines() if line.startswith("VALUE ")}


class _Stack:
    """memcached servers and one middleware on this machine, all stopped by `close`."""

    def __init__(self, tmp_path: Path, servers: int):
        self.host = LocalHost()
        self.tmp = tmp_path
        self.handles = []
        self.server_ports = []
        memcached = find_binaries().memcached
        for j in range(servers):
            port = self.host.free_port()
            handle = self.host.start(f"server-{j}", memcached_command(memcached, "127.0.0.1", port, 16, 1),
                                     tmp_path / f"server-{j}.log")
            self.handles.append(handle)
            wait_until_listening(self.host, handle, port)
            self.server_ports.append(port)
        self.port = None
        self.proxy = None

    @property
    def servers(self) -> list[str]:
        return [f"127.0.0.1:{p}" for p in self.server_ports]

    def start(self, program: str, config: Configuration) -> None:
        self.port = self.host.free_port()
        if program == "memrelay":
            argv = memrelay_command(find_binaries().memrelay, config, f"127.0.0.1:{self.port}", self.servers,
                                    self.tmp / "stats")
        else:
            launch = proxy_launch(program, _program(program), config, "127.0.0.1", self.port, self.host.free_port(),
                                  self.servers)
            path = self.tmp / f"middleware.{launch.config_name}"
            path.write_text(launch.config_text)
            argv = launch.command(str(path))
        self.proxy = self.host.start("middleware-0", argv, self.tmp / "middleware.log")
        self.handles.append(self.proxy)
        wait_until_listening(self.host, self.proxy, self.port)
        self._ready()

    def _ready(self, timeout: float = 10.0) -> None:
        """memcached's proxy listens before its routes are loaded: wait until a request is routed."""
        deadline = time.monotonic() + timeout
        while True:
            reply = _say(self.port, b"get ready-probe\r\n", b"\r\n")
            if reply.startswith(b"END") or time.monotonic() > deadline:
                return
            time.sleep(0.1)

    def close(self) -> None:
        self.host.stop_many(self.handles, grace=3.0)


@pytest.fixture
def stack(tmp_path):
    stacks = []

    def make(servers: int) -> _Stack:
        stacks.append(_Stack(tmp_path, servers))
        return stacks[-1]

    yield make
    for each in stacks:
        each.close()


def _set_keys(port: int, keys: list[str]) -> None:
    for key in keys:
        assert _say(port, f"set {key} 0 0 5\r\nhello\r\n".encode(), b"\r\n") == b"STORED\r\n"


KEYS = [f"key-{i}" for i in range(12)]


@pytest.mark.parametrize("program", ["memrelay", "twemproxy", "memcached-proxy"])
def test_one_server_every_set_lands_on_it_and_a_multiget_is_served(stack, program):
    one = stack(1)
    one.start(program, _configuration(1))
    _set_keys(one.port, KEYS)
    assert _held(one.server_ports[0], KEYS) == set(KEYS)
    reply = _say(one.port, f"get {' '.join(KEYS[:4])}\r\n".encode(), b"END\r\n").decode()
    assert [line.split()[1] for line in reply.splitlines() if line.startswith("VALUE ")] == KEYS[:4]
    pid = one.proxy.pid
    one.close()
    assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE


@pytest.mark.parametrize("program", ["memrelay", "memcached-proxy"])
def test_replicated_writes_land_on_every_server(stack, program):
    """distribution all: every key on every server (memrelay's default; memcached's proxy waits for all)."""
    three = stack(3)
    three.start(program, _configuration(3))
    _set_keys(three.port, KEYS)
    for port in three.server_ports:
        assert _held(port, KEYS) == set(KEYS)
    reply = _say(three.port, f"get {' '.join(KEYS)}\r\n".encode(), b"END\r\n").decode()
    assert sorted(line.split()[1] for line in reply.splitlines() if line.startswith("VALUE ")) == sorted(KEYS)


def test_twemproxy_hashes_every_key_to_one_server(stack):
    """twemproxy cannot replicate: each key on exactly one of the servers, all keys spread over them."""
    three = stack(3)
    config = _configuration(3)
    assert "cannot replicate" in routing(config, "twemproxy")
    three.start("twemproxy", config)
    _set_keys(three.port, KEYS)
    held = [_held(port, KEYS) for port in three.server_ports]
    assert sorted(k for h in held for k in h) == sorted(KEYS)  # each exactly once
    assert sum(1 for h in held if h) >= 2  # hashed over several servers
    reply = _say(three.port, f"get {' '.join(KEYS)}\r\n".encode(), b"END\r\n").decode()
    assert sorted(line.split()[1] for line in reply.splitlines() if line.startswith("VALUE ")) == sorted(KEYS)


def test_memcached_proxy_two_copies_on_distinct_servers(stack):
    """ketama with replication 2: R pools over rotated lists put each key on two distinct servers."""
    three = stack(3)
    three.start("memcached-proxy", _configuration(3, distribution="ketama", replication="2", read_from="primary"))
    _set_keys(three.port, KEYS)
    held = [_held(port, KEYS) for port in three.server_ports]
    for key in KEYS:
        assert sum(key in h for h in held) == 2, key
    reply = _say(three.port, f"get {' '.join(KEYS)}\r\n".encode(), b"END\r\n").decode()
    assert sorted(line.split()[1] for line in reply.splitlines() if line.startswith("VALUE ")) == sorted(KEYS)


def test_a_missing_memcached_proxy_names_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setenv("MEMCACHED_PROXY", str(tmp_path / "no-such-memcached"))
    with pytest.raises(BinaryNotFound, match="scripts/build-memcached-proxy.sh"):
        find_proxy("memcached-proxy")


# ---------------------------------------------------------------- the comparison in the report

COMPARED = """\
name = "proxies-compared-test"
middleware = ["memrelay", "twemproxy", "memcached-proxy"]
servers = 1
threads_per_instance = 2
clients_per_thread = [1, 4]
middlewares = 1
engine = "evented"
repetitions = 2
test_time = 2
warmup = 0
keys = 1000
"""


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    """A real run of the three programs (12 runs of 2 s, about 30 s) and its report. What the tests
    read (a row per program and population, intervals over the two repetitions, CPU per request,
    the processes that ran) needs neither a warm-up nor more than the 2 s the runs keep."""
    from memrelay_lab import parse_experiment, run_experiment
    from memrelay_lab.report import write_report

    _program("twemproxy")
    _program("memcached-proxy")
    out = tmp_path_factory.mktemp("compared") / "results"
    with open(os.devnull, "w") as quiet:
        summary = run_experiment(parse_experiment(COMPARED, source="proxies-compared-test.toml"), out,
                                 binaries=find_binaries(), progress=quiet, handle_signals=False)
    assert summary.ok
    return out, write_report(out)


def test_the_report_compares_the_three_programs_with_intervals(compared):
    out, report = compared
    assert "Proxies compared" in report.sections
    html = report.html.read_text()
    section = html[html.index('<section id="proxies-compared">'):]
    section = section[:section.index("</section>")]
    for program in ("memrelay", "twemproxy", "memcached-proxy"):
        assert section.count(f">{program}<") >= 2, program  # a row per population
    assert "±" in section and "µs/request" in section
    assert section.count("<img") >= 2  # throughput and response-time curves
    import csv

    rows = list(csv.DictReader(open(report.tables["proxies_compared"])))
    assert {r["middleware"] for r in rows} == {"memrelay", "twemproxy", "memcached-proxy"}
    for row in rows:
        assert "±" in row["throughput (req/s)"] and "±" in row["middleware CPU (µs/request)"]


def test_every_proxy_is_measured_from_outside_and_modelled(compared):
    from memrelay_lab import load
    from memrelay_lab.analysis import predict_configurations
    from memrelay_lab.results import summarize

    out, _ = compared
    results = load(out)
    clients = results.runs[results.runs["source"] == "clients"]
    for program in ("twemproxy", "memcached-proxy"):
        mine = clients[clients["middleware"] == program]
        assert (mine["cpu_proxy_us"] > 0).all() and (mine["cpu_middleware_us"] == mine["cpu_proxy_us"]).all()
        assert not (results.runs["source"].str.startswith("middleware") & (results.runs["middleware"] == program)).any()
        roles = results.processes[results.processes["run_id"].isin(mine["run_id"])]["role"]
        assert "proxy" in set(roles) and "memrelay" not in set(roles)
    summary = summarize(results)
    predictions = predict_configurations(summary.pooled_table(), summary.config_columns)
    stages = {p.parameters["middleware"]: set(p.predicted["utilizations"]) for p in predictions}
    assert "twemproxy" in stages["twemproxy"] and "memcached-proxy" in stages["memcached-proxy"]
