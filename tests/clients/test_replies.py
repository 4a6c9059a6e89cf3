"""Keeps REPLIES.md true: how each client library takes a set answered `NOT_STORED` (the reply
every one of them handles as an ordinary answer) and `SERVER_ERROR ...` (the reply memrelay
gave before write policies, which makes five of the six reconnect or disable the server).

A reply is harmless to a client when, over two sets, the library kept its one connection, sent
the second set (did not mark the server dead) and answered both alike. The full table of four
candidate replies: `python tests/clients/replies.py` (a fake server: no real one answers a set
this way).
"""

from __future__ import annotations

import pytest

from clients import CLIENTS
from replies import CANDIDATES, probe

# What REPLIES.md says, per client: is `SERVER_ERROR` harmless to it? (NOT_STORED is to all.)
SERVER_ERROR_HARMLESS = {
    "gomemcache": False,  # closes its connection
    "spymemcached": False,  # reconnects, dropping the in-flight operation
    "xmemcached": True,  # an exception, the connection kept
    "node-memcached": False,  # marks the server dead: the second set is never sent
    "pymemcache": False,  # closes its connection
    "pylibmc": False,  # disables the server until its retry timeout
}


def harmless(result: dict) -> bool:
    answers = result["answers"]
    return result["connections"] == 1 and result["requests"] == 2 and answers[0] == answers[1]


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_not_stored_is_an_ordinary_answer(name):
    client = CLIENTS[name]
    if client.missing():
        pytest.fail(f"{name}: {client.missing()} is not built: run scripts/install-deps.sh", pytrace=False)
    result = probe(client, CANDIDATES["NOT_STORED"])
    assert harmless(result), result
    assert not any("true" in a.lower() for a in result["answers"]), "a refused write must not read as stored"


@pytest.mark.parametrize("name", sorted(CLIENTS))
def test_server_error_as_recorded(name):
    client = CLIENTS[name]
    if client.missing():
        pytest.fail(f"{name}: {client.missing()} is not built: run scripts/install-deps.sh", pytrace=False)
    result = probe(client, CANDIDATES["SERVER_ERROR"])
    assert harmless(result) == SERVER_ERROR_HARMLESS[name], result
