"""memrelay driven by real Python memcached clients, judged by what a real memcached does.

Every test taking `target` runs against one memcached directly (the reference: the test states
memcached's behaviour) and against memrelay, both engines, in every mode, in front of 3
memcached servers (see conftest.py). The clients:
- pymemcache's `Client` and `HashClient` (the text protocol; note that pymemcache sends
  `noreply` by default for set/add/replace/append/prepend/delete/touch/set_many);
- meta-memcache (RevenueCat's, the meta protocol: mg/ms/md/ma/mn), compared with a fresh
  memcached driven the same way;
- libmemcached's `memccp` and `memccat` (Debian's libmemcached-tools).
pymemcache has no `gat`/`gats`; those are sent as raw bytes on a socket.
"""

from __future__ import annotations

import random
import re
import socket
import subprocess

import pytest
from meta_memcache import (
    CacheClient,
    Key,
    ServerAddress,
    SetMode,
    connection_pool_factory_builder,
)
from pymemcache.client.base import Client
from pymemcache.client.hash import HashClient
from pymemcache.serde import (
    FLAG_BYTES,
    FLAG_INTEGER,
    FLAG_PICKLE,
    FLAG_TEXT,
    pickle_serde,
)

from conftest import ENGINES, MODES

# Client timeouts: short, so that a proxy that does not answer fails a test in seconds.
CONNECT_TIMEOUT = 2
TIMEOUT = 3
ITEM_MAX = 1024 * 1024  # memcached's default item size limit (-I 1m)


def client(addr, **kwargs) -> Client:
    return Client(addr, connect_timeout=CONNECT_TIMEOUT, timeout=TIMEOUT, no_delay=True, **kwargs)


@pytest.fixture
def mc(target):
    c = client(target.addr)
    try:
        yield c
    finally:
        c.close()


def raw(addr, request: bytes) -> bytes:
    """Sends `request` on a new connection; the reply up to END or an error line."""
    with socket.create_connection(addr, timeout=TIMEOUT) as s:
        s.sendall(request)
        buf = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                return buf
            buf += chunk
            if buf.endswith(b"END\r\n"):
                return buf
            if buf.endswith(b"\r\n"):
                last = buf[:-2].rsplit(b"\r\n", 1)[-1]
                if re.match(rb"(ERROR|CLIENT_ERROR|SERVER_ERROR)\b", last):
                    return buf


def raw_line(addr, request: bytes) -> bytes:
    """Sends `request` on a new connection; the first line of the reply."""
    with socket.create_connection(addr, timeout=TIMEOUT) as s:
        s.sendall(request)
        buf = b""
        while b"\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
        return buf


def wire_flags(addr, key: str) -> int:
    """The flags memcached holds for `key`, from a plain `get`."""
    header = raw(addr, f"get {key}\r\n".encode()).split(b"\r\n", 1)[0]
    fields = header.split(b" ")
    assert fields[:2] == [b"VALUE", key.encode()], header
    return int(fields[2])


# ------------------------------------------------------------------------------------------
# pymemcache Client: one command at a time


def test_set_get_delete(mc, prefix):
    k = prefix + "k"
    assert mc.set(k, b"hello") is True  # noreply: pymemcache cannot know, says True
    assert mc.get(k) == b"hello"
    assert mc.set(k, b"world", noreply=False) is True
    assert mc.get(k) == b"world"
    assert mc.get(prefix + "missing") is None
    assert mc.get(prefix + "missing", default=b"d") == b"d"
    assert mc.delete(k, noreply=False) is True
    assert mc.delete(k, noreply=False) is False
    assert mc.get(k) is None
    mc.set(k, b"again")
    mc.delete(k)  # noreply
    assert mc.get(k) is None
    assert mc.set(k, b"", noreply=False) is True  # an empty value
    assert mc.get(k) == b""


def test_add_replace(mc, prefix):
    k = prefix + "k"
    assert mc.add(k, b"a1", noreply=False) is True
    assert mc.add(k, b"a2", noreply=False) is False
    assert mc.get(k) == b"a1"
    assert mc.replace(k, b"r1", noreply=False) is True
    assert mc.get(k) == b"r1"
    assert mc.replace(prefix + "none", b"x", noreply=False) is False
    assert mc.get(prefix + "none") is None
    mc.add(k, b"ignored")  # noreply, refused: only the data tells
    assert mc.get(k) == b"r1"


def test_append_prepend(mc, prefix):
    k = prefix + "k"
    assert mc.set(k, b"mid", noreply=False) is True
    assert mc.append(k, b">", noreply=False) is True
    assert mc.prepend(k, b"<", noreply=False) is True
    assert mc.get(k) == b"<mid>"
    assert mc.append(prefix + "none", b"x", noreply=False) is False
    assert mc.prepend(prefix + "none", b"x", noreply=False) is False
    assert mc.get(prefix + "none") is None
    mc.append(k, b"!")  # noreply
    assert mc.get(k) == b"<mid>!"


def test_incr_decr(mc, prefix):
    k = prefix + "n"
    assert mc.set(k, b"10", noreply=False) is True
    assert mc.incr(k, 5) == 15
    assert mc.decr(k, 3) == 12
    assert mc.decr(k, 100) == 0  # memcached stops at 0
    assert mc.incr(prefix + "none", 1) is None
    assert mc.decr(prefix + "none", 1) is None
    assert mc.set(k, str(2**64 - 1).encode(), noreply=False) is True
    assert mc.incr(k, 1) == 0  # and wraps at 2^64
    assert mc.incr(k, 7, noreply=True) is None
    # memcached pads a number that got shorter with spaces: compare numbers
    assert int(mc.get(k)) == 7
    assert mc.set(k, b"not a number", noreply=False) is True
    with pytest.raises(Exception, match="non-numeric"):
        mc.incr(k, 1)
    assert mc.get(k) == b"not a number"  # the connection is still in step


def test_gets_cas(mc, prefix):
    k = prefix + "k"
    assert mc.set(k, b"v1", noreply=False) is True
    value, token = mc.gets(k)
    assert value == b"v1" and token.isdigit(), (value, token)
    assert mc.cas(k, b"v2", token) is True
    assert mc.get(k) == b"v2"
    assert mc.cas(k, b"v3", token) is False  # a stale token: EXISTS
    assert mc.get(k) == b"v2"
    assert mc.cas(prefix + "none", b"x", token) is None  # NOT_FOUND
    assert mc.gets(prefix + "none") == (None, None)
    value, fresh = mc.gets(k)
    assert value == b"v2" and fresh != token
    assert mc.cas(k, b"v4", fresh) is True
    many = mc.gets_many([k, prefix + "none"])
    assert list(many) == [k] and many[k][0] == b"v4", many


def test_touch(mc, prefix):
    k = prefix + "k"
    assert mc.set(k, b"v", noreply=False) is True
    assert mc.touch(k, 100, noreply=False) is True
    assert mc.touch(prefix + "none", 100, noreply=False) is False
    assert mc.get(k) == b"v"
    # memcached: a negative expiry time expires the item at once
    assert mc.touch(k, -1, noreply=False) is True
    assert mc.get(k) is None


def test_gat_gats_raw(target, mc, prefix):
    """gat/gats (pymemcache has neither): the value, and the new expiry time is applied."""
    k = prefix + "k"
    assert mc.set(k, b"hello", noreply=False) is True
    assert raw(target.addr, f"gat 100 {k}\r\n".encode()) == f"VALUE {k} 0 5\r\nhello\r\nEND\r\n".encode()
    reply = raw(target.addr, f"gats 100 {k} {prefix}none\r\n".encode())
    assert re.fullmatch(rf"VALUE {re.escape(k)} 0 5 \d+\r\nhello\r\nEND\r\n".encode(), reply), reply
    assert raw(target.addr, f"gat 100 {prefix}none\r\n".encode()) == b"END\r\n"
    # gat with a negative time returns the value, then the item is gone
    assert raw(target.addr, f"gat -1 {k}\r\n".encode()) == f"VALUE {k} 0 5\r\nhello\r\nEND\r\n".encode()
    assert mc.get(k) is None


def test_set_many_get_many_delete_many(mc, prefix):
    values = {f"{prefix}{i}": f"value-{i}".encode() * (i % 7 + 1) for i in range(60)}
    assert mc.set_many(values, noreply=False) == []
    keys = list(values)
    assert mc.get_many(keys + [prefix + "none"]) == values
    assert mc.get_many(list(reversed(keys))) == values
    assert mc.get_many([keys[3], keys[3], keys[5]]) == {keys[3]: values[keys[3]], keys[5]: values[keys[5]]}
    assert mc.get_many([prefix + "none1", prefix + "none2"]) == {}
    assert mc.delete_many(keys[:10], noreply=False) is True
    assert mc.get_many(keys) == {k: values[k] for k in keys[10:]}


def test_serde_round_trip_and_flags(target, prefix):
    """pymemcache's pickle serde: types come back as stored, their flags are on the wire."""
    values = {
        "bytes": (b"\x00\r\nEND\r\nVALUE x 0 1\r\n\xff", FLAG_BYTES),
        "text": ("grüße\r\n", FLAG_TEXT),
        "int": (42, FLAG_INTEGER),
        "bigint": (2**70, FLAG_INTEGER),
        "float": (3.5, FLAG_PICKLE),
        "dict": ({"a": [1, 2, None], "b": (3, "x")}, FLAG_PICKLE),
    }
    c = client(target.addr, serde=pickle_serde)
    try:
        for name, (value, _) in values.items():
            assert c.set(prefix + name, value, noreply=False) is True
        assert c.get_many([prefix + n for n in values]) == {prefix + n: v for n, (v, _) in values.items()}
        for name, (value, flags) in values.items():
            assert c.get(prefix + name) == value
            assert wire_flags(target.addr, prefix + name) == flags, name
    finally:
        c.close()

    class MaxFlags:
        """Flags are 32 bits: the largest comes back unchanged."""

        def serialize(self, key, value):
            return value, 0xFFFFFFFF

        def deserialize(self, key, value, flags):
            return flags, value

    c = client(target.addr, serde=MaxFlags())
    try:
        assert c.set(prefix + "max", b"v", noreply=False) is True
        assert c.get(prefix + "max") == (0xFFFFFFFF, b"v")
        assert c.gets(prefix + "max")[0] == (0xFFFFFFFF, b"v")
    finally:
        c.close()


def test_stats_and_version(mc):
    stats = mc.stats()
    for name in (b"pid", b"uptime", b"version", b"curr_connections"):
        assert name in stats, sorted(stats)
    assert isinstance(stats[b"uptime"], int)
    assert stats[b"curr_connections"] >= 1
    assert re.fullmatch(rb"\d+\.\d+\.\d+\S*", mc.version()), mc.version()
    assert mc.get(b"stats:after") is None  # still in step after the multi-line reply


def test_oversize_set_with_default_noreply_keeps_later_replies_in_step(mc, prefix):
    """One value over memcached's 1 MiB limit, sent with pymemcache's default noreply: it is
    refused, silently (noreply), and the replies of later unrelated commands on the same
    connection are theirs, not shifted by an error line."""
    a, b, big = prefix + "a", prefix + "b", prefix + "big"
    mc.set(a, b"alpha")
    mc.set(b, b"beta")
    mc.set(big, b"x" * (ITEM_MAX + 1))  # noreply
    assert mc.get(a) == b"alpha"
    assert mc.get_many([b, a, big]) == {b: b"beta", a: b"alpha"}
    mc.set(big, b"y" * (2 * ITEM_MAX))  # noreply, twice the limit
    assert mc.set(prefix + "c", b"gamma", noreply=False) is True
    assert mc.get(prefix + "c") == b"gamma"
    assert mc.get(big) is None
    assert mc.delete(a, noreply=False) is True
    assert mc.get(b) == b"beta"


# ------------------------------------------------------------------------------------------
# Long get lines: 1,000 keys of 200 bytes in one `get` (a line over 200 KB)

LONG_KEYS = 1000
LONG_KEY_LEN = 200


def long_keys(prefix: str) -> dict[str, bytes]:
    keys = [f"{prefix}{i:04d}:".ljust(LONG_KEY_LEN, "k") for i in range(LONG_KEYS)]
    assert all(len(k) == LONG_KEY_LEN for k in keys)
    return {k: f"value-{i}".encode() for i, k in enumerate(keys)}


def test_get_many_1000_long_keys_on_a_fresh_connection(target, prefix):
    values = long_keys(prefix)
    writer = client(target.addr)
    try:
        assert writer.set_many(values, noreply=False) == []
    finally:
        writer.close()
    reader = client(target.addr)  # the long get line is the first thing this connection sends
    try:
        assert reader.get_many(list(values)) == values
        assert reader.get(prefix + "none") is None
    finally:
        reader.close()


@pytest.mark.parametrize("noreply", [False, True], ids=["replies", "noreply"])
def test_get_many_1000_long_keys_after_pipelined_set_many(target, prefix, noreply):
    values = long_keys(prefix)
    c = client(target.addr)
    try:
        assert c.set_many(values, noreply=noreply) == []  # all 1,000 sets in one write
        assert c.get_many(list(values)) == values
        assert c.get_many(list(reversed(values))) == values
    finally:
        c.close()


# ------------------------------------------------------------------------------------------
# pymemcache HashClient: the client spreads keys over several nodes


@pytest.fixture(params=["memcached", *ENGINES])
def hash_nodes(request, processes):
    """3 memcached; the nodes are the servers themselves or one memrelay in front of each."""
    servers = [processes.memcached() for _ in range(3)]
    if request.param == "memcached":
        return servers, servers
    return servers, [processes.memrelay(request.param, [s], []) for s in servers]


def where(servers, keys) -> list[dict]:
    """What each server holds of `keys`, asked directly."""
    found = []
    for server in servers:
        c = client(server.addr)
        try:
            found.append(c.get_many(keys))
        finally:
            c.close()
    return found


def test_hash_client_over_several_nodes(hash_nodes):
    servers, nodes = hash_nodes
    hc = HashClient([n.addr for n in nodes], connect_timeout=CONNECT_TIMEOUT, timeout=TIMEOUT)
    values = {f"hc:{i}": f"v{i}".encode() for i in range(300)}
    keys = list(values)
    assert hc.set_many(values, noreply=False) == []
    assert hc.get_many(keys) == values
    held = where(servers, keys)
    assert sorted(k for h in held for k in h) == sorted(keys), "each key on exactly one server"
    assert all(held), "keys on every server"
    assert hc.incr("hc:n", 1) is None
    assert hc.set("hc:n", b"1", noreply=False) is True
    assert hc.incr("hc:n", 41) == 42
    value, token = hc.gets("hc:0")
    assert hc.cas("hc:0", b"new", token) is True
    assert hc.get("hc:0") == b"new"
    assert hc.delete_many(keys[:100], noreply=False) is True
    assert hc.get_many(keys) == {k: values[k] for k in keys[100:]}
    hc.close()


def test_hash_client_over_relays_sharing_servers(processes):
    """Two memrelays (one per engine), ketama with two copies, in front of the same servers:
    keys written through either are readable through both, and held by two servers each."""
    servers = [processes.memcached() for _ in range(3)]
    relays = [processes.memrelay(e, servers, MODES["ketama-r2"]) for e in ENGINES]
    hc = HashClient([r.addr for r in relays], connect_timeout=CONNECT_TIMEOUT, timeout=TIMEOUT)
    values = {f"sh:{i}": f"v{i}".encode() for i in range(200)}
    assert hc.set_many(values, noreply=False) == []
    assert hc.get_many(list(values)) == values
    hc.close()
    for relay in relays:
        c = client(relay.addr)
        try:
            assert c.get_many(list(values)) == values, relay.name
        finally:
            c.close()
    held = where(servers, list(values))
    copies = {k: sum(k in h for h in held) for k in values}
    assert set(copies.values()) == {2}, copies


# ------------------------------------------------------------------------------------------
# meta-memcache: the meta protocol, compared with memcached driven the same way


def meta_scenario(addr, prefix: str) -> list:
    """Runs one sequence of meta-memcache calls; what each returned (cas tokens by type)."""
    pool = connection_pool_factory_builder(connection_timeout=CONNECT_TIMEOUT, recv_timeout=TIMEOUT)
    c = CacheClient.cache_client_from_servers([ServerAddress(*addr)], pool)
    k, obj, n, none = Key(prefix + "k"), Key(prefix + "obj"), Key(prefix + "n"), Key(prefix + "none")
    out = []

    def note(name, result):
        out.append((name, result))

    note("set", c.set(k, b"hello", ttl=100))
    note("get", c.get(k))
    note("get_missing", c.get(none))
    value, token = c.get_cas(k)
    note("get_cas", (value, type(token).__name__))
    note("set_with_cas", c.set(k, b"new", ttl=100, cas_token=token))
    note("set_with_stale_cas", c.set(k, b"newer", ttl=100, cas_token=token))
    note("after_cas", c.get(k))
    note("add_existing", c.set(k, b"x", ttl=100, set_mode=SetMode.ADD))
    note("add_new", c.set(Key(prefix + "added"), b"a", ttl=100, set_mode=SetMode.ADD))
    note("replace_missing", c.set(none, b"r", ttl=100, set_mode=SetMode.REPLACE))
    note("append", c.set(k, b"+", ttl=100, set_mode=SetMode.APPEND))
    note("appended", c.get(k))
    note("set_object", c.set(obj, {"a": [1, 2], "b": "ü"}, ttl=100))
    note("multi_get", {key.key: v for key, v in c.multi_get([k, obj, none]).items()})
    note("big", c.set(Key(prefix + "big"), b"z" * 200_000, ttl=100))
    note("big_back", c.get(Key(prefix + "big")) == b"z" * 200_000)
    note("delta_init", c.delta_initialize_and_get(n, 5, 10, 100))
    note("delta", c.delta_and_get(n, 5))
    note("delta_down", c.delta_and_get(n, -3))
    note("delta_missing", c.delta_and_get(none, 1))
    note("touch", c.touch(k, 100))
    note("touch_missing", c.touch(none, 100))
    _, token = c.get_cas(k)
    note("delete_stale_cas", c.delete(k, cas_token=token + 1000))
    note("delete", c.delete(k))
    note("delete_again", c.delete(k))
    note("get_deleted", c.get(k))
    note("set_cas_token", type(c.set_cas(Key(prefix + "sc"), b"v", ttl=100)).__name__)
    return out


def test_meta_client_matches_memcached(target, processes, prefix):
    assert raw_line(target.addr, b"mn\r\n") == b"MN\r\n", "the meta no-op"
    reference = meta_scenario(processes.memcached().addr, prefix)
    assert ("get", b"hello") in reference and ("set_with_stale_cas", False) in reference
    assert meta_scenario(target.addr, prefix) == reference


# ------------------------------------------------------------------------------------------
# libmemcached's memccp / memccat


def test_memccp_memccat_round_trip(target, tmp_path, prefix):
    data = random.Random(7).randbytes(300_000) + b"\r\nEND\r\nVALUE x 0 1\r\n" + bytes(range(256))
    name = re.sub(r"[^A-Za-z0-9_.-]", "_", prefix) + "blob.bin"  # memccp keys a file by its basename
    path = tmp_path / name
    path.write_bytes(data)
    servers = f"--servers={target.spec}"
    cp = subprocess.run(["memccp", servers, str(path)], capture_output=True, timeout=20)
    assert cp.returncode == 0, cp.stderr.decode(errors="replace")
    out = tmp_path / "out.bin"  # memccat adds a newline on stdout, not in a file
    cat = subprocess.run(["memccat", servers, f"--file={out}", name], capture_output=True, timeout=20)
    assert cat.returncode == 0, cat.stderr.decode(errors="replace")
    assert out.read_bytes() == data
    cat = subprocess.run(["memccat", servers, name], capture_output=True, timeout=20)
    assert cat.returncode == 0 and cat.stdout == data + b"\n"
    c = client(target.addr)
    try:
        assert c.get(name) == data
    finally:
        c.close()
