"""The [hosts] and [roles] tables of the experiment file, and the testbed's state file."""

import json

import pytest

from memrelay_lab.experiment import SpecError, parse_experiment
from memrelay_lab.experiment._topology import TestbedUnavailable
from memrelay_lab.experiment._topology import testbed_hosts as hosts_of_testbed

BASE = """
servers = 2
clients_per_thread = 1
middlewares = 1
test_time = 2
"""

HOSTS = BASE + """
[hosts.s1]
address = "10.0.0.11"
key = "~/.ssh/id_ed25519"
[hosts.c1]
address = "10.0.0.31"
port = 2222
ship = true

[roles]
servers = ["s1"]
middlewares = "s1"
clients = ["c1", "s1"]
"""


def test_hosts_and_roles_are_parsed():
    topology = parse_experiment(HOSTS).topology
    assert topology.roles == {"servers": ("s1",), "middlewares": ("s1",), "clients": ("c1", "s1")}
    assert topology.hosts["c1"].port == 2222 and topology.hosts["c1"].ship
    assert topology.hosts["s1"].key.endswith("/.ssh/id_ed25519") and not topology.hosts["s1"].key.startswith("~")
    assert topology.hosts["s1"].describe() == "host s1 (10.0.0.11)"


def test_no_hosts_means_this_machine():
    assert parse_experiment(BASE).topology is None


@pytest.mark.parametrize("text, line, reason", [
    (HOSTS.replace('clients = ["c1", "s1"]', 'clients = ["c2"]'), 18, "no host 'c2' in [hosts]"),
    (HOSTS.replace('port = 2222', 'port = "x"'), 12, "expected a TCP port"),
    (HOSTS.replace('port = 2222', 'prot = 2222'), 12, "unknown key"),
    (HOSTS.replace('clients = ["c1", "s1"]', ''), 15, "missing clients"),
    (HOSTS.replace('ship = true', 'ship = true\nbin_dir = "/opt"'), 13, "either ship = true"),
    (HOSTS.replace('[roles]', '[rolez]'), None, "unknown key"),
    (BASE + '[roles]\nservers = ["a"]\n', 6, "[roles] needs [hosts]"),
    (HOSTS.replace('address = "10.0.0.31"', 'user = "x"'), 10, "c1: missing address"),
])
def test_mistakes_are_refused_with_the_line(text, line, reason):
    with pytest.raises(SpecError) as error:
        parse_experiment(text, source="x.toml")
    assert reason in str(error.value)
    if line is not None:
        assert error.value.line == line, str(error.value)


def test_a_profile_may_move_the_roles_to_the_testbed():
    text = HOSTS + '[profile.testbed]\nhosts = "testbed"\nroles = { servers = ["h1"], middlewares = ["h2"], clients = ["h3"] }\n'
    topology = parse_experiment(text, profile="testbed").topology
    assert topology.testbed and topology.roles["clients"] == ("h3",)


def test_testbed_hosts_come_from_its_state_file(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMRELAY_LAB_TESTBED_DIR", str(tmp_path))
    monkeypatch.delenv("MEMRELAY_LAB_TESTBED_PREFIX", raising=False)
    with pytest.raises(TestbedUnavailable, match="no testbed is up"):
        hosts_of_testbed("/bin", "/usr/bin/memcached")
    # Each testbed keeps its files in a folder of its prefix's (the default mrlab-).
    (tmp_path / "mrlab-").mkdir()
    (tmp_path / "mrlab-" / "state.json").write_text(json.dumps({"hosts": [{
        "name": "h1", "namespace": "mrlab-h1", "address": "10.231.7.11", "ssh_port": 22, "user": "root",
        "key": "/k", "known_hosts": "/kh", "links": {"rate_mbit": 100}}]}))
    hosts = hosts_of_testbed("/bin", "/usr/bin/memcached")
    assert hosts["h1"].address == "10.231.7.11" and hosts["h1"].user == "root" and hosts["h1"].bin_dir == "/bin"
    assert hosts["h1"].work_dir == str(tmp_path / "mrlab-" / "work")  # `testbed down` removes what runs leave
    topology = parse_experiment(BASE + 'hosts = "testbed"\n[roles]\nservers = ["h1"]\nmiddlewares = ["h1"]\n'
                                'clients = ["h9"]\n').topology
    with pytest.raises(TestbedUnavailable, match="no host 'h9'"):
        topology.resolved()
