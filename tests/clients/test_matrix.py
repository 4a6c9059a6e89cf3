"""Each real client library's own workload, against memcached directly and through memrelay.

Every client in clients.CLIENTS runs its `script` (a fixed sequence of set, get, multi-get,
delete, add, replace, incr/decr, gets/cas, touch and a too-large value, as that library exposes
them) once against one memcached and once against memrelay in front of 3 memcached servers:
the answers (and the values read) must be the same. Then its `load` through memrelay, a fixed
number of operations: every one answered as the client expects (no error, no read older than
the key's last acknowledged write, every value read one it wrote).
"""

from __future__ import annotations

import pytest

from clients import CLIENTS

RUN_TIMEOUT_S = 60


@pytest.fixture(scope="module")
def direct(processes_factory):
    group = processes_factory()
    try:
        yield group.memcached()
    finally:
        group.close()


def built(client):
    missing = client.missing()
    if missing:
        pytest.fail(f"{client.name}: {missing} is not built: run scripts/install-deps.sh", pytrace=False)
    return client


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_same_answers_as_memcached(name, direct, relay):
    client = built(CLIENTS[name])
    want = client.run(f"127.0.0.1:{direct.port}", "script", f"{name}:", timeout=RUN_TIMEOUT_S)
    got = client.run(relay.spec, "script", f"{name}:", timeout=RUN_TIMEOUT_S)
    assert got["answers"] == want["answers"], relay.relay.stderr()[-2000:]
    assert got["reads"] == want["reads"]
    # The sequence reaches every kind of answer: a miss, a refused add, a stale cas at least.
    assert want["ops"] >= 55 and len(want["reads"]) >= 20


# The load: a fixed number of operations (5 rounds over its keys, every kind of operation on
# them), however long the machine takes; LOAD_LIMIT_S only stops a client that hangs. How many
# operations fit in a second is the CPU share the client got, not memrelay's doing: a JVM client
# on a loaded 2-core machine once did 31 in 2 s.
LOAD_KEYS, LOAD_OPS, LOAD_LIMIT_S = 40, 200, 40


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_load_through_memrelay(name, relay):
    client = built(CLIENTS[name])
    got = client.run(relay.spec, "load", f"{name}-load:", timeout=RUN_TIMEOUT_S, seconds=LOAD_LIMIT_S,
                     keys=LOAD_KEYS, ops=LOAD_OPS)
    assert got["ops"] == LOAD_OPS, f"{name}: {got['ops']} of {LOAD_OPS} operations in {got['seconds']:.1f} s"
    assert got["errors"] == {}, got["errors"]
    # Nor a write refused without an error (a set not stored): the timeline counts every
    # operation that did not do what it asked.
    assert sum(b[2] for b in got["timeline"]) == 0, got["timeline"]
    assert got["stale_reads"] == 0
    # Every value read is one this client wrote (values carry their key and sequence number),
    # and there were values to read.
    assert got["reads"], got
    for key, value in got["reads"].items():
        assert value in got["attempted"].get(key, []), (key, value)


@pytest.mark.proxy25
def test_node_memcached_reads_version_as_memcached_1_6(direct, relay):
    """The node `memcached` package takes the last x.y.z of `VERSION ...` as the version: it must
    read memrelay as a 1.6 memcached, as it reads memcached (issue 25)."""
    import json

    client = built(CLIENTS["node-memcached"])
    versions = []
    for addr in (f"127.0.0.1:{direct.port}", relay.spec):
        (answer,) = client.run(addr, "version", "v:", timeout=RUN_TIMEOUT_S)["answers"]
        (version,) = json.loads(answer)
        versions.append((version["major"], version["minor"]))
    assert versions[0] == ("1", "6"), versions  # Debian's memcached
    assert versions[1] == versions[0], f"node memcached reads memrelay as {versions[1]}"
