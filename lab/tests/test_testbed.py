"""The network-namespace testbed for real: three hosts (namespaces on a bridge, an OpenSSH
server in each, cpu cgroups), the server host's link shaped to 20 Mbit/s with tbf.

One module-scoped testbed (prefix ``mrlt-``, subnet 10.231.8.0/24, its files in a temporary
folder, so a developer's own ``mrlab-`` testbed is never touched), removed in a ``finally``
(also on Ctrl-C). The tests: a quick experiment over SSH end to end, whose link-bound
throughput is checked against the rate and the bytes the kernel counted on the link, and
predicted by the model from the other configuration; the report's machines section; the
preflight's clear errors against the testbed's hosts; netem's refusal; leftovers found by
name; a second testbed (another prefix, the same folder) taken down beside this one, which
keeps running experiments; and last, the lab SIGKILLed mid-run, then `testbed down` and
`status`, which also removes the files the run left on the hosts (and the module's testbed:
its teardown then finds nothing).

Needs root (namespaces, veths, tc, cgroups), Debian's sshd and a cpu cgroup controller;
without them every test here is skipped with a message saying which.

The names (``mrlt-``, ``mrlu-``, ``mrln-``) and subnets (10.231.8-10.0/24) are fixed and
machine-wide, and `down` and the leftover checks go by prefix: two runs of this module at once
on one machine (two checkouts' `make test`) would take down each other's testbed. So the module
holds an exclusive lock (``fcntl.flock`` on LOCK_FILE) from its first test to its last; a second
run waits for it (at most LOCK_WAIT_S, saying whom it waits for), then fails with a message
naming the holder.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import binaries

from memrelay_lab import load, parse_experiment, run_experiment
from memrelay_lab.analysis import network_model
from memrelay_lab.experiment import HostError
from memrelay_lab.report._machines_section import machines_overview
from memrelay_lab.results import summarize
from started_together import assert_start_records, assert_verdict_agrees, overlap_from_starts, together_verdicts

PREFIX, SUBNET = "mrlt-", "10.231.8.0/24"
# Shared by every checkout on the machine (/run/lock is Debian's world-writable lock folder).
LOCK_FILE = Path("/run/lock" if Path("/run/lock").is_dir() else "/tmp") / "memrelay-lab-test-testbed.lock"
LOCK_WAIT_S = 900.0  # this module takes 3-5 minutes on a loaded 2-core machine
RATE_MBIT = 20.0
HOSTS = ("c1", "m1", "s1")  # clients, middleware, server (its link shaped)


def skip_without_testbed() -> None:
    from memrelay_lab.testbed import TestbedError, require_root
    from memrelay_lab.testbed._cgroups import cgroup_root

    try:
        require_root()
    except TestbedError as missing:
        pytest.skip(f"testbed tests skipped: {missing}")
    if cgroup_root() is None:
        pytest.skip("testbed tests skipped: no cpu cgroup controller on this machine")


def lab(*args: str, env: dict, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "memrelay_lab.cli", *args], capture_output=True, text=True,
                          env=env, timeout=timeout)
    if check:
        assert done.returncode == 0, done.stderr
    return done


@pytest.fixture(scope="module", autouse=True)
def machine_wide_names():
    """Holds LOCK_FILE for the whole module: no other run of it on this machine uses the same
    prefixes and subnets meanwhile (see the module's docstring)."""
    with open(LOCK_FILE, "a+") as lock:
        deadline, said = time.monotonic() + LOCK_WAIT_S, False
        while True:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                lock.seek(0)
                holder = lock.read().strip() or "another process"
                if time.monotonic() > deadline:
                    pytest.fail(f"{LOCK_FILE} still held after {LOCK_WAIT_S:.0f} s by {holder}: another run of "
                                f"test_testbed.py uses the testbed names {PREFIX}, mrlu-, mrln- on this machine")
                if not said:
                    print(f"test_testbed: waiting for {LOCK_FILE} (held by {holder})", file=sys.stderr, flush=True)
                    said = True
                time.sleep(1.0)
        lock.seek(0)
        lock.truncate()
        lock.write(f"pid {os.getpid()} ({Path.cwd()})\n")
        lock.flush()
        try:
            yield
        finally:
            lock.seek(0)
            lock.truncate()
            fcntl.flock(lock, fcntl.LOCK_UN)


@pytest.fixture(scope="module")
def testbed(machine_wide_names, tmp_path_factory):
    skip_without_testbed()
    from memrelay_lab.testbed import HostPlan, Names, down, up

    folder = tmp_path_factory.mktemp("testbed")
    names = Names(PREFIX, SUBNET)
    plans = [HostPlan("c1"), HostPlan("m1"), HostPlan("s1", rate_mbit=RATE_MBIT)]
    saved = {k: os.environ.get(k) for k in ("MEMRELAY_LAB_TESTBED_DIR", "MEMRELAY_LAB_TESTBED_PREFIX",
                                            "MEMRELAY_LAB_TESTBED_SUBNET")}
    os.environ.update(MEMRELAY_LAB_TESTBED_DIR=str(folder), MEMRELAY_LAB_TESTBED_PREFIX=PREFIX,
                      MEMRELAY_LAB_TESTBED_SUBNET=SUBNET)
    try:
        state = up(plans, names, folder)
        yield {"folder": folder, "names": names, "state": state, "plans": plans}
    finally:
        down(names, folder)
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def nothing_left(prefix: str = PREFIX) -> list[str]:
    """Every namespace, interface, cgroup or process named with the prefix, looked up directly."""
    from pyroute2 import IPRoute, netns

    found = [f"namespace {n}" for n in netns.listnetns() if n.startswith(prefix)]
    with IPRoute() as ipr:
        found += [f"interface {link.get_attr('IFLA_IFNAME')}" for link in ipr.get_links()
                  if (link.get_attr("IFLA_IFNAME") or "").startswith(prefix)]
    for root in (Path("/sys/fs/cgroup/cpu"), Path("/sys/fs/cgroup")):
        if root.is_dir():
            found += [f"cgroup {p}" for p in root.iterdir() if p.is_dir() and p.name.startswith(prefix)]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if f"{prefix}" in (entry / "cgroup").read_text():
                    found.append(f"process {entry.name}")
            except OSError:
                pass
    return found


def only_sshd_left(host: dict, timeout: float = 20.0) -> None:
    """Waits until sshd is the only process in the host's namespace (its sessions end as the
    lab's connections close)."""
    from memrelay_lab.testbed._links import namespace_pids

    deadline = time.monotonic() + timeout
    while (pids := namespace_pids(host["namespace"])) != [host["sshd_pid"]]:
        if time.monotonic() > deadline:
            commands = {pid: Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:80] for pid in pids
                        if Path(f"/proc/{pid}/cmdline").exists()}
            raise AssertionError(f"host {host['name']}: more than sshd left: {commands}")
        time.sleep(0.05)


# ---------------------------------------------------------------- a quick experiment over SSH

# One client (the link is not yet the only limit: the configuration the model is calibrated
# on) and 16 (the link saturated: the one it predicts), 1 KiB values read from one server.
SHAPED = """\
name = "testbed-shaped"
servers = 1
middlewares = 1
workers = 8
client_machines = 1
instances_per_machine = 1
threads_per_instance = 1
clients_per_thread = [1, 16]
workload = "read-only"
value_size = 1024
keys = 1000
repetitions = 1
test_time = 6
warmup = 2
cooldown = 1
memcached_memory_mb = 64
hosts = "testbed"

[roles]
servers = ["s1"]
middlewares = ["m1"]
clients = ["c1"]
"""


@pytest.fixture(scope="module")
def shaped_run(testbed, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("shaped") / "results"
    with open(os.devnull, "w") as quiet:
        summary = run_experiment(parse_experiment(SHAPED, source="shaped.toml"), out, binaries=binaries(),
                                 progress=quiet, handle_signals=False)
    assert summary.ok, summary.failures
    return out


def test_a_quick_experiment_runs_over_ssh_on_the_testbed_hosts(testbed, shaped_run):
    manifest = json.loads((shaped_run / "manifest.json").read_text())
    assert [r["status"] for r in manifest["runs"]] == ["completed", "completed"]
    addresses = {h["name"]: h["address"] for h in testbed["state"]["hosts"]}
    for record in manifest["runs"]:
        hosts = {p["name"]: p["host"] for p in record["processes"]}
        assert hosts["server-0"] == "s1" and hosts["middleware-0"] == "m1" and hosts["client-0-0"] == "c1"
        run_dir = shaped_run / record["dir"]
        assert json.loads((run_dir / "client-0-0.json").read_text())["totals"]["count"] > 0
        # The middleware was told the server's testbed address, and the bench the middleware's.
        clients = record["files"]["clients"][0]
        assert clients["targets"][0].startswith(addresses["m1"] + ":")
    environment = manifest["environment"]
    assert not environment["single_machine"]
    assert environment["hosts"]["s1"]["link_rate_mbit"] == RATE_MBIT
    assert "link_rate_mbit" not in environment["hosts"]["c1"]
    links = {(link["from"], link["to"]): link for link in environment["links"]}
    assert set(links) == {("c1", "m1"), ("m1", "s1")}
    # The probe's bulk transfer to s1 went through the 20 Mbit/s tbf; the other link is not shaped.
    assert 0.8 * RATE_MBIT <= links[("m1", "s1")]["mbit_per_s"] <= 1.1 * RATE_MBIT
    assert links[("c1", "m1")]["mbit_per_s"] > 5 * RATE_MBIT
    # Only sshd is left in each namespace once the experiment is over.
    for host in testbed["state"]["hosts"]:
        only_sshd_left(host)


def test_the_shaped_link_bounds_throughput_and_the_model_predicts_it(shaped_run):
    table = summarize(load(shaped_run)).pooled_table().sort_values("clients").reset_index(drop=True)
    saturated = table.iloc[1]
    # Bytes per request on the server's link, as the kernel counted them on its veth (every
    # header and acknowledgement): the replies go from s1, the requests to it.
    bytes_from = saturated["link:s1:from_bytes_per_request"]
    assert 1024 < bytes_from < 1400 and saturated["link:s1:to_bytes_per_request"] < 200, (
        bytes_from, saturated["link:s1:to_bytes_per_request"], saturated["throughput"])
    bound = RATE_MBIT * 1e6 / 8 / bytes_from
    assert abs(saturated["throughput"] - bound) <= 0.10 * bound, (saturated["throughput"], bound)
    # The model's demands come from the one-client configuration only (demands="lowest"):
    # the 16-client throughput is a prediction, and the bottleneck it names is the link.
    model = network_model(table, demands="lowest", config_columns=["clients"]).comparison
    predicted = model.iloc[1]
    assert predicted["bottleneck"] == "link from s1" and predicted["asymptotic_bottleneck"] == "link from s1"
    measured = saturated["throughput"]
    print(f"shaped link {RATE_MBIT} Mbit/s: {bytes_from:.0f} B/request from s1, bound {bound:,.0f}/s, "
          f"measured {measured:,.0f}/s, predicted {predicted['throughput_predicted']:,.0f}/s "
          f"(bottleneck {predicted['bottleneck']})")
    assert abs(predicted["throughput_predicted"] - measured) <= 0.10 * measured, (predicted["throughput_predicted"],
                                                                                 measured)


def test_the_report_shows_hosts_links_and_clock_offsets(shaped_run):
    text, tables = machines_overview(json.loads((shaped_run / "manifest.json").read_text()))
    assert any("network namespaces" in paragraph for paragraph in text)
    hosts = {t.name: t for t in tables}["hosts"].frame.set_index("host")
    assert set(hosts.index) == set(HOSTS)
    assert hosts.loc["s1", "link rate (Mbit/s)"] == "20" and hosts.loc["c1", "link rate (Mbit/s)"] == "–"
    assert hosts["clock offset (ms)"].str.match(r"^[+-]\d").all()
    links = {t.name: t for t in tables}["links"].frame
    assert set(zip(links["from"], links["to"])) == {("c1", "m1"), ("m1", "s1")}
    assert not links["round trip min (ms)"].isin(["not measured", "loopback"]).any()


# ---------------------------------------------------------------- load generators on two hosts begin together

# Six benches on two client hosts, each started over its own SSH channel (some tenths of a
# second each): issue 22 saw such starts take 2.4 s, longer than some benches' load.
TOGETHER = """\
name = "testbed-together"
servers = 1
middlewares = 1
workers = 4
client_machines = 2
instances_per_machine = 3
threads_per_instance = 1
clients_per_thread = 2
workload = "1:4"
value_size = 100
keys = 500
repetitions = 1
test_time = 4
warmup = 1
cooldown = 0
memcached_memory_mb = 64
hosts = "testbed"

[roles]
servers = ["s1"]
middlewares = ["m1"]
clients = ["c1", "m1"]
"""


def test_load_generators_on_two_hosts_begin_together(testbed, tmp_path):
    """Every bench begins its load at the one instant the lab chose, on its own host's clock
    (its own JSON says when), never before it; the overlap check agrees with the benches' own
    start times (`started_together`: no assertion on how fast the machine launched them)."""
    out = tmp_path / "together"
    with open(os.devnull, "w") as quiet:
        summary = run_experiment(parse_experiment(TOGETHER, source="together.toml"), out, binaries=binaries(),
                                 progress=quiet, handle_signals=False)
    assert summary.ok, summary.failures
    manifest = json.loads((out / "manifest.json").read_text())
    offsets = {name: facts["clock_offset_s"] for name, facts in manifest["environment"]["hosts"].items()}
    (record,) = manifest["runs"]
    clients = record["files"]["clients"]
    assert sorted(c["host"] for c in clients) == ["c1", "c1", "c1", "m1", "m1", "m1"]
    benches = assert_start_records(out, record, offsets)
    (verdict, value, detail), = together_verdicts(out)
    kept_s = 3.0  # TOGETHER: 4 s of load, 1 s of warm-up
    assert_verdict_agrees(verdict, value, detail,
                          overlap_from_starts(benches, [offsets[c["host"]] for c in clients], kept_s))


# ---------------------------------------------------------------- two testbeds side by side

SMALL = SHAPED.replace("clients_per_thread = [1, 16]", "clients_per_thread = 2").replace(
    "test_time = 6", "test_time = 2").replace("warmup = 2", "warmup = 0").replace("cooldown = 1", "cooldown = 0")


def test_another_testbed_taken_down_leaves_this_one_running(testbed, tmp_path):
    """`testbed down --prefix` of a second testbed in the same folder removes its files only:
    this testbed's state, keys and sshd files stay, `status` says up, and an experiment runs."""
    base = testbed["folder"]
    other = {**os.environ, "MEMRELAY_LAB_TESTBED_PREFIX": "mrlu-", "MEMRELAY_LAB_TESTBED_SUBNET": "10.231.10.0/24"}
    ours = base / PREFIX
    kept = sorted(str(p.relative_to(ours)) for p in ours.rglob("*") if p.is_file())
    assert {"state.json", "keys/user_ed25519"} <= set(kept)
    try:
        lab("testbed", "up", "--hosts", "u1", env=other)
        assert (base / "mrlu-" / "state.json").is_file()
    finally:
        lab("testbed", "down", env=other)
    assert nothing_left("mrlu-") == [] and not (base / "mrlu-").exists()
    assert sorted(str(p.relative_to(ours)) for p in ours.rglob("*") if p.is_file()) == kept
    assert json.loads(lab("testbed", "status", "--format", "json", env=dict(os.environ)).stdout)["up"]
    out = tmp_path / "still-running"
    with open(os.devnull, "w") as quiet:
        summary = run_experiment(parse_experiment(SMALL, source="small.toml"), out, binaries=binaries(),
                                 progress=quiet, handle_signals=False)
    assert summary.ok, summary.failures


# ---------------------------------------------------------------- preflight against the testbed

def _one_host_experiment(table: str) -> str:
    body = SHAPED.split('hosts = "testbed"')[0]
    return body + table + '[roles]\nservers = ["t"]\nmiddlewares = ["t"]\nclients = ["t"]\n'


@pytest.mark.parametrize("case", ["unreachable", "wrong key", "missing memcached"])
def test_the_preflight_names_a_broken_testbed_host_before_anything_starts(testbed, tmp_path, case):
    host = testbed["state"]["hosts"][0]
    other_key = tmp_path / "other_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other_key)], check=True)
    address = host["address"] if case != "unreachable" else testbed["names"].address(40)  # nobody there
    key = str(other_key) if case == "wrong key" else host["key"]
    memcached = "/nonexistent/memcached" if case == "missing memcached" else binaries().memcached
    table = (f'[hosts.t]\naddress = "{address}"\nuser = "root"\nkey = "{key}"\n'
             f'known_hosts = "{host["known_hosts"]}"\nmemcached = "{memcached}"\n')
    with pytest.raises(HostError) as error, open(os.devnull, "w") as quiet:
        run_experiment(parse_experiment(_one_host_experiment(table), source="t.toml"), tmp_path / "out",
                       binaries=binaries(), progress=quiet, handle_signals=False)
    expected = {"unreachable": f"host t ({address}): cannot connect",
                "wrong key": f"host t ({address}): authentication failed for user root with key {other_key}",
                "missing memcached": f"host t ({address}): memcached not found at /nonexistent/memcached"}[case]
    assert str(error.value).startswith(expected), str(error.value)
    assert not (tmp_path / "out").exists()
    only_sshd_left(host)


# ---------------------------------------------------------------- refusals and leftovers


def test_a_delay_without_netem_is_refused_and_leaves_nothing(testbed, tmp_path):
    from memrelay_lab.testbed import NETEM_MISSING, HostPlan, Names, TestbedError, up

    names = Names("mrln-", "10.231.9.0/24")
    try:
        up([HostPlan("x1", rate_mbit=100, delay_ms=2)], names, tmp_path)
    except TestbedError as error:
        assert str(error) == NETEM_MISSING
    else:
        from memrelay_lab.testbed import down

        down(names, tmp_path)
        pytest.skip("this kernel has netem: the delay was applied, nothing to refuse")
    assert nothing_left("mrln-") == []


def test_status_names_leftovers_and_down_removes_them_without_a_state_file(testbed, tmp_path):
    from pyroute2 import netns

    env = {**os.environ, "MEMRELAY_LAB_TESTBED_DIR": str(tmp_path), "MEMRELAY_LAB_TESTBED_PREFIX": "mrln-",
           "MEMRELAY_LAB_TESTBED_SUBNET": "10.231.9.0/24"}
    netns.create("mrln-stray")  # what a killed `up` could leave: a namespace and a sleeping process in it
    sleeper = subprocess.Popen(["ip", "netns", "exec", "mrln-stray", "sleep", "60"], start_new_session=True)
    try:
        done = lab("testbed", "status", "--format", "json", env=env, check=False)
        assert done.returncode == 1
        report = json.loads(done.stdout)
        assert report["state_file"] is None and not report["clean"]
        assert report["leftovers"] == ["namespace mrln-stray (1 processes)"]
        lab("testbed", "down", env=env)
        assert sleeper.wait(10) == -signal.SIGTERM
        assert nothing_left("mrln-") == []
        assert json.loads(lab("testbed", "status", "--format", "json", env=env).stdout)["clean"]
    finally:
        if sleeper.poll() is None:
            sleeper.kill()
        sleeper.wait(10)


# ---------------------------------------------------------------- the lab killed mid-run (last: it takes the testbed down)

LONG = SHAPED.replace("clients_per_thread = [1, 16]", "clients_per_thread = 4").replace("test_time = 6",
                                                                                          "test_time = 60")


def _benches_running() -> bool:
    from memrelay_lab.testbed._links import namespace_pids

    for pid in namespace_pids(PREFIX + "c1"):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if command[0].endswith(b"memrelay-bench") and b"--link-probe" not in command and b"--link-listen" not in \
                command and any(a.endswith(b"client-0-0.json") for a in command):
            return True
    return False


def test_a_lab_killed_with_sigkill_mid_run_then_testbed_down_leaves_nothing(testbed, tmp_path):
    env = {**os.environ}
    # `up` over the live testbed is idempotent: it removes the old one first.
    lab("testbed", "up", "--hosts", ",".join(HOSTS), "--host-rate", f"s1={RATE_MBIT:g}", env=env)
    spec = tmp_path / "long.toml"
    spec.write_text(LONG)
    run = subprocess.Popen([sys.executable, "-m", "memrelay_lab.cli", "run", str(spec), "--out",
                            str(tmp_path / "out")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.monotonic() + 90
        while not _benches_running():
            assert run.poll() is None, "the run ended before its load started"
            assert time.monotonic() < deadline, "the load never started"
            time.sleep(0.1)
    finally:
        run.send_signal(signal.SIGKILL)
        run.wait(10)
    assert nothing_left() != []  # the killed lab left its processes and the testbed behind
    work = testbed["folder"] / PREFIX / "work"
    assert any(work.iterdir()), "the killed run left no files on the hosts"  # (they share this file system)
    lab("testbed", "down", env=env)
    assert nothing_left() == []
    assert not work.exists()
    report = json.loads(lab("testbed", "status", "--format", "json", env=env).stdout)
    assert report["clean"] and report["leftovers"] == [] and report["state_file"] is None
