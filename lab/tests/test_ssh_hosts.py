"""SSHHost against a real OpenSSH server (tests/sshd.py): processes as process groups, exit
statuses, files back by SFTP, the preflight's one clear error per broken host, and a tiny
experiment with every role on the SSH host, end to end."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import binaries
from sshd import start_sshd, stop_sshd
from test_hosts import group_members

from memrelay_lab import parse_experiment, run_experiment
from memrelay_lab.experiment import HostError, HostSpec, SSHHost


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    stop_sshd(server.process)


def spec(sshd, **overrides) -> HostSpec:
    values = dict(name="box", address="127.0.0.1", port=sshd.port, user="root", key=str(sshd.key),
                  known_hosts=str(sshd.known_hosts))
    return HostSpec(**{**values, **overrides})


def wait_for(condition, what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_process_runs_in_its_own_group_and_stops_with_it(sshd, tmp_path):
    host = SSHHost(spec(sshd), lab_root=tmp_path)
    try:
        log = tmp_path / "run" / "shell.log"
        handle = host.start("shell", ["sh", "-c", "echo started; sleep 30 & sleep 30"], log)
        # sshd runs on this machine: its process ids are ours.
        wait_for(lambda: len(group_members(handle.pid)) >= 2, "the shell and its sleep")
        assert host.poll(handle) is None and host.live == [handle]
        assert host.stop(handle, grace=5.0) == -signal.SIGTERM
        wait_for(lambda: group_members(handle.pid) == [], "the group to be gone")
        assert log.read_text() == "started\n"  # the log came back when the process ended
        assert host.path(log) != log and str(host.path(log)).startswith("/tmp/memrelay-lab/")

        quick = host.start("quick", ["sh", "-c", "echo out; exit 7"], tmp_path / "run" / "quick.log")
        wait_for(lambda: host.wait(quick, 1.0) is not None, "exit 7")
        assert quick.returncode == 7 and not quick.stopped_by_us

        stubborn = host.start("stubborn", ["sh", "-c", "trap '' TERM; echo ready; sleep 30"],
                              tmp_path / "run" / "s.log")
        wait_for(lambda: len(group_members(stubborn.pid)) >= 2, "the stubborn shell")
        assert host.stop(stubborn, grace=0.5) == -signal.SIGKILL
        wait_for(lambda: group_members(stubborn.pid) == [], "the stubborn group to be gone")
    finally:
        host.stop_all()
        host.remove_files()
        host.close()


def test_more_processes_than_sshd_allows_sessions_per_connection(sshd, tmp_path):
    """sshd (like Debian's default) allows 10 sessions per connection: 12 processes still start."""
    host = SSHHost(spec(sshd), lab_root=tmp_path)
    try:
        handles = [host.start(f"sleeper-{i}", ["sleep", "60"], tmp_path / f"{i}.log") for i in range(12)]
        assert len(host.live) == 12
        assert sorted(h.pid for h in host.stop_all(grace=5.0)) == sorted(h.pid for h in handles)
        assert all(h.returncode == -signal.SIGTERM for h in handles)
    finally:
        host.stop_all()
        host.remove_files()
        host.close()


def test_the_processes_die_with_the_connection(sshd, tmp_path):
    """The lab killed mid-run: its connection drops, and the watchers kill their groups."""
    host = SSHHost(spec(sshd), lab_root=tmp_path)
    handles = [host.start(f"sleeper-{i}", ["sleep", "60"], tmp_path / f"{i}.log") for i in range(2)]
    wait_for(lambda: all(group_members(h.pid) for h in handles), "the sleepers")
    host.close()  # no stop: as if the lab were gone
    for handle in handles:
        wait_for(lambda h=handle: group_members(h.pid) == [], f"{handle.name}'s group to be killed")
    shutil.rmtree(host.remote_root)  # sshd runs here: its files are ours


KILLED_LAB = """
import sys, time
from pathlib import Path
from memrelay_lab.experiment import HostSpec, SSHHost
port, key, known_hosts, folder = sys.argv[1:]
host = SSHHost(HostSpec(name="box", address="127.0.0.1", port=int(port), user="root", key=key,
                        known_hosts=known_hosts), lab_root=Path(folder))
handle = host.start("sleeper", ["sleep", "60"], Path(folder) / "sleeper.log")
print(handle.pid, flush=True)
time.sleep(60)
"""


def test_a_lab_killed_with_sigkill_leaves_nothing_on_the_host(sshd, tmp_path):
    """A real SIGKILL of the lab's process: no cleanup code runs, the watcher alone ends the group."""
    lab = subprocess.Popen([sys.executable, "-c", KILLED_LAB, str(sshd.port), str(sshd.key), str(sshd.known_hosts),
                            str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(lab.stdout.readline())
        wait_for(lambda: group_members(pid) != [], "the sleeper")
    finally:
        lab.kill()
        lab.wait(10)
    wait_for(lambda: group_members(pid) == [], "the sleeper's group to be killed by its watcher")
    for folder in Path("/tmp/memrelay-lab").glob(f"{tmp_path.name}-*-{lab.pid}"):
        shutil.rmtree(folder)  # sshd runs here: the killed lab's folder is ours to remove


def test_the_cli_names_an_unreachable_host_and_exits_2(tmp_path):
    """No sshd needed: a loopback port nobody listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    spec = tmp_path / "e.toml"
    spec.write_text(EXPERIMENT + f'[hosts.far]\naddress = "127.0.0.1"\nport = {port}\n' + ROLES.replace("box", "far"))
    done = subprocess.run([sys.executable, "-m", "memrelay_lab.cli", "run", str(spec), "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert f"error: host far (127.0.0.1:{port}): cannot connect" in done.stderr
    assert not (tmp_path / "out").exists()


def test_files_ports_and_collect(sshd, tmp_path):
    host = SSHHost(spec(sshd), lab_root=tmp_path)
    try:
        run_dir = tmp_path / "runs" / "r1"
        handle = host.start("writer", ["sh", "-c", "mkdir -p sub && echo a > a.txt && echo b > sub/b.txt"],
                            run_dir / "writer.log")
        # The process runs in the host's folder for the results; write under the run's folder there.
        assert host.wait(handle, 20.0) == 0
        writer = host.start("writer2", ["sh", "-c", f"cd {host.path(run_dir)} && mkdir -p sub && echo a > a.txt "
                                                    "&& echo b > sub/b.txt"], run_dir / "writer2.log")
        assert host.wait(writer, 20.0) == 0
        assert host.fetch(run_dir / "a.txt", tmp_path / "copy.txt").read_text() == "a\n"
        assert host.fetch(run_dir / "missing.txt", tmp_path / "none.txt") is None
        host.collect(run_dir)
        assert (run_dir / "sub" / "b.txt").read_text() == "b\n"
        ports = {host.free_port() for _ in range(5)}
        assert len(ports) == 5 and all(20000 <= p < 32000 for p in ports)
        with pytest.raises(HostError, match="outside the results folder"):
            host.path(Path("/etc/passwd"))
    finally:
        host.remove_files()
        host.close()


# ---------------------------------------------------------------- preflight

EXPERIMENT = """\
name = "ssh-tiny"
servers = 1
middlewares = 1
client_machines = 1
clients_per_thread = 2
workload = "50-50"
repetitions = 1
test_time = 2
keys = 500
memcached_memory_mb = 64
"""

ROLES = '[roles]\nservers = ["box"]\nmiddlewares = ["box"]\nclients = ["box"]\n'


def experiment_text(sshd, **host) -> str:
    return EXPERIMENT + sshd.host_table("box", **host) + ROLES


def run(text: str, out: Path):
    with open(os.devnull, "w") as quiet:
        return run_experiment(parse_experiment(text, source="ssh.toml"), out, binaries=binaries(), progress=quiet,
                              handle_signals=False)


def sshd_sessions(sshd) -> list[int]:
    """Processes sshd started that still run (its sessions' children), by parent chain."""
    import psutil

    return [p.pid for p in psutil.Process(sshd.process.pid).children(recursive=True)]


def test_preflight_unreachable_host(sshd, tmp_path):
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    text = experiment_text(sshd, memcached=binaries().memcached).replace(f"port = {sshd.port}", f"port = {port}")
    with pytest.raises(HostError) as error:
        run(text, tmp_path / "out")
    assert str(error.value).startswith(f"host box (127.0.0.1:{port}): cannot connect")
    assert not (tmp_path / "out").exists()


def test_preflight_wrong_key(sshd, tmp_path):
    text = experiment_text(sshd).replace(str(sshd.key), str(sshd.other_key))
    with pytest.raises(HostError) as error:
        run(text, tmp_path / "out")
    assert str(error.value) == (f"host box (127.0.0.1:{sshd.port}): authentication failed for user root "
                                f"with key {sshd.other_key}")
    assert not (tmp_path / "out").exists()
    wait_for(lambda: sshd_sessions(sshd) == [], "sshd's sessions to end")


@pytest.mark.parametrize("host, missing", [
    ({"memcached": "/nonexistent/memcached"}, "memcached not found at /nonexistent/memcached"),
    ({"bin_dir": "/nonexistent"}, "memrelay not found at /nonexistent/memrelay"),
])
def test_preflight_missing_binary(sshd, tmp_path, host, missing):
    host.setdefault("memcached", binaries().memcached)
    with pytest.raises(HostError) as error:
        run(experiment_text(sshd, **host), tmp_path / "out")
    assert str(error.value) == f"host box (127.0.0.1:{sshd.port}): {missing}"
    assert not (tmp_path / "out").exists()
    wait_for(lambda: sshd_sessions(sshd) == [], "sshd's sessions to end")


def test_preflight_wrong_version(sshd, tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    for program in ("memrelay", "memrelay-bench"):
        (fake / program).write_text(f"#!/bin/sh\necho '{program} 0.0.0-old'\n")
        (fake / program).chmod(0o755)
    with pytest.raises(HostError, match=r"memrelay is 'memrelay 0.0.0-old', this build is .* set ship = true"):
        run(experiment_text(sshd, bin_dir=str(fake), memcached=binaries().memcached), tmp_path / "out")


# ---------------------------------------------------------------- end to end


def test_a_tiny_experiment_with_every_role_on_ssh_hosts(sshd, tmp_path):
    """Two hosts of [hosts] (both this sshd): servers and clients on "front", the middleware on
    "back", so the links between them are measured as well."""
    out = tmp_path / "results"
    memcached = binaries().memcached
    text = (EXPERIMENT + sshd.host_table("front", ship=True, memcached=memcached)
            + sshd.host_table("back", ship=True, memcached=memcached)
            + '[roles]\nservers = ["front"]\nmiddlewares = ["back"]\nclients = ["front"]\n')
    summary = run(text, out)
    assert summary.ok, summary.failures
    manifest = json.loads((out / "manifest.json").read_text())
    record = manifest["runs"][0]
    assert record["status"] == "completed"
    hosts = {p["name"]: p["host"] for p in record["processes"]}
    assert hosts["middleware-0"] == "back" and hosts["server-0"] == "front" and hosts["client-0-0"] == "front"
    run_dir = out / record["dir"]
    # Every file the processes wrote on the hosts came back: bench JSON, middleware windows, logs.
    bench = json.loads((run_dir / "client-0-0.json").read_text())
    assert bench["status"] == "completed" and bench["totals"]["count"] > 0
    assert (run_dir / "middleware-0" / "windows.jsonl").read_text().strip()
    assert (run_dir / "middleware-0" / "summary.json").is_file()
    assert (run_dir / "server-0.log").is_file() and (run_dir / "middleware-0.log").is_file()
    # The gets and sets the clients were answered are what memcached counted (its own stats).
    stats = {}
    for when in ("before", "after"):
        for line in (run_dir / f"server-0.stats-{when}.txt").read_text().splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in ("cmd_get", "cmd_set"):
                stats[(when, parts[1])] = int(parts[2])
    served = sum(stats[("after", c)] - stats[("before", c)] for c in ("cmd_get", "cmd_set"))
    assert served == bench["totals"]["count"]

    environment = manifest["environment"]
    assert not environment["single_machine"]
    for facts in environment["hosts"].values():
        assert facts["cores"] == os.cpu_count() and facts["processes_visible_to_lab"]
        # sshd runs on this machine: the true offset is 0, and NTP's estimate is within half its round trip.
        assert abs(facts["clock_offset_s"]) <= facts["clock_rtt_s"] / 2
    links = {(link["from"], link["to"]): link for link in environment["links"]}
    # Every run has a middleware: no clients-to-servers link (the baselines' one) is measured.
    assert set(links) == {("front", "back"), ("back", "front")}
    for pair in (("front", "back"), ("back", "front")):
        assert "error" not in links[pair], links[pair]
        assert 0 < links[pair]["rtt_min_ms"] <= links[pair]["rtt_median_ms"] and links[pair]["mbit_per_s"] > 0
    # The hosts' folders for the experiment are gone (everything was fetched).
    assert not list(Path("/tmp/memrelay-lab").glob(f"results-*-{os.getpid()}"))
    # Nothing left running on the hosts: every process group the run started is gone.
    for process in record["processes"]:
        assert group_members(process["pid"]) == []
    wait_for(lambda: sshd_sessions(sshd) == [], "sshd's sessions to end")


def test_hosts_from_the_testbed_state_file(sshd, tmp_path, monkeypatch):
    """hosts = "testbed": the hosts come from the state file `memrelay-lab testbed up` writes (here
    naming this sshd), and they run this build's binaries in place."""
    from memrelay_lab.experiment._preflight import connect_hosts

    monkeypatch.setenv("MEMRELAY_LAB_TESTBED_DIR", str(tmp_path))
    monkeypatch.delenv("MEMRELAY_LAB_TESTBED_PREFIX", raising=False)
    (tmp_path / "mrlab-").mkdir()
    entry = {"namespace": "mrlab-x", "address": "127.0.0.1", "ssh_port": sshd.port, "user": "root",
             "key": str(sshd.key), "known_hosts": str(sshd.known_hosts), "links": {"rate_mbit": 100}}
    (tmp_path / "mrlab-" / "state.json").write_text(
        json.dumps({"hosts": [{"name": "h1", **entry}, {"name": "h2", **entry}]}))
    experiment = parse_experiment(EXPERIMENT + 'hosts = "testbed"\n[roles]\nservers = ["h1"]\nmiddlewares = ["h2"]\n'
                                  'clients = ["h1"]\n', source="testbed.toml")
    local = binaries()
    roles = connect_hosts(experiment.topology, tmp_path / "out", local)
    try:
        assert [h.name for h in roles.all()] == ["h1", "h2"] and roles.visible == {"h1", "h2"}
        assert roles.binaries_on(roles.server(0)).memcached == local.memcached
        assert roles.binaries_on(roles.middleware(0)).memrelay == local.memrelay
        assert roles.server(0).user_is_root
    finally:
        for host in roles.all():
            host.close()
