"""What each client library does when a set is answered with each candidate reply for "too few
replicas succeeded" (SERVER_ERROR x, NOT_STORED, ERROR, CLIENT_ERROR x): the call's outcome and
whether the library reconnected (the fake server counts the connections it accepted).

`python replies.py` prints the markdown table kept in REPLIES.md; test_replies.py runs the same
probes and checks the table still holds.
"""

from __future__ import annotations

import sys
import time

from clients import CLIENTS
from fake_server import FakeServer

CANDIDATES = {
    "SERVER_ERROR": b"SERVER_ERROR too few replicas succeeded\r\n",
    "NOT_STORED": b"NOT_STORED\r\n",
    "ERROR": b"ERROR\r\n",
    "CLIENT_ERROR": b"CLIENT_ERROR too few replicas succeeded\r\n",
}
PROBE_TIMEOUT_S = 30


def probe(client, reply: bytes) -> dict:
    """Two sets against a server answering `reply`; the outcomes and the connections used."""
    server = FakeServer(reply)
    try:
        summary = client.run(f"127.0.0.1:{server.port}", "probe", "p:", timeout=PROBE_TIMEOUT_S)
        # Let a client that reconnects in the background (spymemcached) finish doing so.
        time.sleep(0.3)
        return {"answers": summary["answers"], "connections": server.connections,
                "requests": sum(1 for r in server.requests if r.split()[0].lower() == b"set")}
    finally:
        server.close()


def table() -> tuple[str, dict]:
    results = {}
    lines = ["| client | " + " | ".join(f"`{c}`" for c in CANDIDATES) + " |",
             "|---" * (len(CANDIDATES) + 1) + "|"]
    for name, client in CLIENTS.items():
        cells = []
        for cand, reply in CANDIDATES.items():
            r = probe(client, reply)
            results[(name, cand)] = r
            outcome = r["answers"][0] if len(set(r["answers"])) == 1 else " / ".join(r["answers"])
            cells.append(f"{outcome.replace('|', '/')}; {r['connections']} conn for 2 sets")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines), results


if __name__ == "__main__":
    text, _ = table()
    print(text)
    sys.exit(0)
