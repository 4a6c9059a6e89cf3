"""The bench's rows: a workload and the server layout a proxy must serve it with.

A row's `layout` says what the proxy must do with the requests, and so which peers can do it:

- `single`: one memcached behind the proxy (today's six rows and the connection-scaling row);
- `all3`: three memcached, every write to all three (memrelay's default distribution);
- `r2of3`: three memcached, every key on two of them (ketama, R=2): writes to both, reads
  balanced over both;
- `shard3`: three memcached, keys spread over them, multi-gets split by server;
- `tls1`: one memcached speaking TLS only (`memcached -Z`); the bench speaks TLS to the proxy
  and the proxy TLS to the server. Such a row names its plain `reference` row (same workload, no
  TLS), which runs with it, so that the summary shows what TLS costs per request.
"""

from __future__ import annotations

from dataclasses import dataclass

LAYOUTS = ("single", "all3", "r2of3", "shard3", "tls1")
# How many servers hold each key, per layout (what the work check expects of writes).
COPIES = {"single": 1, "all3": 3, "r2of3": 2, "shard3": 1, "tls1": 1}
SERVERS = {"single": 1, "all3": 3, "r2of3": 3, "shard3": 3, "tls1": 1}
TLS_LAYOUTS = ("tls1",)


@dataclass(frozen=True)
class Row:
    name: str
    ratio: str  # SETS:GETS in requests
    clients: int
    pipeline: int = 1
    layout: str = "single"
    multiget: int = 1  # keys per get
    rate: float | None = None  # open loop: requests per second in total
    reference: str | None = None  # TLS rows: the same workload without TLS
    data_size: int = 1024  # bytes per value
    keys: int = 10_000  # key ids 0..keys-1, filled on the servers before the run
    key_prefix: str = "memtier-"  # memrelay-bench's default; rows of other value sizes keep their own keys

    @property
    def servers(self) -> int:
        return SERVERS[self.layout]

    @property
    def tls(self) -> bool:
        return self.layout in TLS_LAYOUTS


ROWS = [
    Row("read 16", "0:1", 16),
    Row("read 64", "0:1", 64),
    Row("read 16x16 pipelined", "0:1", 16, 16),
    Row("write 16", "1:0", 16),
    Row("write 64", "1:0", 64),
    Row("write 16x16 pipelined", "1:0", 16, 16),
    Row("3 servers: write all 16", "1:0", 16, layout="all3"),
    Row("3 servers: R=2 write 16", "1:0", 16, layout="r2of3"),
    Row("3 servers: R=2 read 16", "0:1", 16, layout="r2of3"),
    Row("3 servers: 10-key mget 16", "0:1", 16, layout="shard3", multiget=10),
    # Connection scaling: 1,000 connections, 20 requests/s each (open loop), 1 write in 10.
    Row("1000 conns 20k/s", "1:9", 1000, rate=20_000),
    # TLS from the client to the proxy and from the proxy to memcached -Z.
    Row("TLS read 16", "0:1", 16, layout="tls1", reference="read 16"),
    Row("TLS write 16", "1:0", 16, layout="tls1", reference="write 16"),
]


def select(names: str | None) -> list[Row]:
    """The rows named in a comma-separated list (all without one); an unknown name is an error."""
    if not names:
        return ROWS
    wanted = [n.strip() for n in names.split(",")]
    known = {r.name: r for r in ROWS}
    unknown = [n for n in wanted if n not in known]
    if unknown:
        raise ValueError(f"unknown row(s) {unknown}; rows are: {', '.join(known)}")
    chosen = [known[n] for n in wanted]
    # A TLS row brings its plain reference along (before it), unless it is there already.
    with_references: list[Row] = []
    for row in chosen:
        if row.reference and known[row.reference] not in chosen and known[row.reference] not in with_references:
            with_references.append(known[row.reference])
        with_references.append(row)
    return with_references
