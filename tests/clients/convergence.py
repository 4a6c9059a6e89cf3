"""Did every replica converge, with no acknowledged write lost? (tests/clients)

A client's `load` summary lists, per key, every write it attempted in order (`attempted`: a
value, or "" for a delete) and the index of the last one the server acknowledged (`acked`). A
replica's copy of a key is acceptable when it is the acknowledged write or a later attempted one
(a write that failed for the client may still have reached some replicas, and repair may finish
it); an absent key is acceptable when that write is a delete. Every replica must also hold the
same copy as the others.
"""

from __future__ import annotations


def problems(attempted: dict[str, list[str]], acked: dict[str, int],
             replicas: list[dict[str, str]]) -> list[str]:
    """What is wrong, one line per key (empty: converged and nothing acknowledged lost).

    `replicas` holds, per server, the values it has for the keys (absent keys left out).
    """
    found = []
    for key, writes in sorted(attempted.items()):
        copies = [r.get(key, "") for r in replicas]
        if len(set(copies)) > 1:
            found.append(f"{key}: replicas differ: {copies}")
            continue
        if key not in acked:
            if copies[0] not in writes and copies[0] != "":
                found.append(f"{key}: holds {copies[0]!r}, never written")
            continue
        allowed = set(writes[acked[key]:])
        if copies[0] not in allowed:
            want = writes[acked[key]] or "(deleted)"
            found.append(f"{key}: acknowledged {want!r} lost, replicas hold {copies[0] or '(nothing)'!r}")
    return found
