"""Binary-protocol clients get an immediate error from memrelay, never a hang.

memrelay speaks memcached's text and meta protocols. A connection opening with the binary
protocol's magic byte (0x80) must get a binary error response and be closed, so that a binary
client fails at once instead of waiting for its own timeout. Shown with a raw binary request on
a socket and with real binary clients (memjs, pylibmc binary=True) whose own timeouts are set far
longer than the test's bound: a hang fails the test, an error passes it. memcached itself
answers the same clients successfully (it speaks the binary protocol), checked first so that a
client that cannot talk binary at all does not pass for the wrong reason.
"""

from __future__ import annotations

import socket
import struct
import subprocess

import pytest

pytestmark = pytest.mark.proxy25

from clients import BINARY_CLIENTS

CLIENT_TIMEOUT_S = 30  # the binary clients' own timeouts: a hang outlasts the test's bound
BOUND_S = 10  # how long a binary client may take to be told no (it should take milliseconds)
# A binary GET of key "foo": magic 0x80, opcode 0x00, key length 3, no extras, body length 3,
# opaque 0xdeadbeef.
GET_FOO = struct.pack(">BBHBBHIIQ", 0x80, 0x00, 3, 0, 0, 0, 3, 0xDEADBEEF, 0) + b"foo"
# A binary SET (opcode 0x01) of "k" = "v": 8 bytes of extras (flags, expiry).
SET_K = struct.pack(">BBHBBHIIQ", 0x80, 0x01, 1, 8, 0, 0, 8 + 1 + 1, 7, 0) + struct.pack(">II", 0, 0) + b"kv"


def read_all(sock: socket.socket) -> bytes:
    """Everything until the peer closes; socket.timeout if it does not within BOUND_S."""
    buf = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return buf
        buf += chunk


@pytest.mark.parametrize("request_bytes,opcode", [(GET_FOO, 0x00), (SET_K, 0x01)], ids=["get", "set"])
def test_raw_binary_request_gets_error_and_close(relay, request_bytes, opcode):
    with socket.create_connection(("127.0.0.1", relay.relay.port), timeout=BOUND_S) as s:
        s.sendall(request_bytes)
        try:
            reply = read_all(s)
        except socket.timeout:
            pytest.fail(f"memrelay neither answered nor closed within {BOUND_S} s (a hang)")
    assert len(reply) >= 24, f"no binary response header: {reply!r}"
    magic, op, _keylen, _extlen, _dtype, status, bodylen = struct.unpack(">BBHBBHI", reply[:12])
    assert magic == 0x81, f"not a binary response: {reply[:24].hex()}"
    assert op == opcode, "the response names the request's opcode"
    assert status != 0, "an error status, not success"
    assert len(reply) == 24 + bodylen, f"one response, then the connection closed: {reply!r}"
    # memrelay is still fine for text clients afterwards.
    with socket.create_connection(("127.0.0.1", relay.relay.port), timeout=BOUND_S) as s:
        s.sendall(b"version\r\n")
        assert s.recv(100).startswith(b"VERSION ")


def run_bounded(client, addr: str) -> dict:
    try:
        return client.run(addr, "probe", "bin:", timeout=BOUND_S, timeout_arg=CLIENT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{client.name} still waiting after {BOUND_S} s: memrelay left it hanging")


@pytest.mark.parametrize("name", sorted(BINARY_CLIENTS))
def test_binary_client_gets_immediate_error(name, relay, processes):
    client = BINARY_CLIENTS[name]
    missing = client.missing()
    if missing:
        pytest.fail(f"{name}: {missing} is not built: run scripts/install-deps.sh", pytrace=False)
    reference = run_bounded(client, f"127.0.0.1:{processes.memcached().port}")
    assert all(a.lower() == "returned true" for a in reference["answers"]), reference
    got = run_bounded(client, relay.spec)
    assert got["answers"] and not any(a.lower() == "returned true" for a in got["answers"]), got
