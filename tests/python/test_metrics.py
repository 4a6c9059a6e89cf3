"""memrelay's Prometheus endpoint (`--metrics-listen`), scraped after real traffic and parsed
with the official Python client's OpenMetrics parser: the counters equal what the memcached
servers themselves counted, and every histogram's count equals the requests it describes."""

from __future__ import annotations

import time
import urllib.request

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families
from pymemcache.client.base import Client

from conftest import ENGINES, HOST, free_port, memrelay_binary

WINDOW_S = 0.2


def server_stats(proc) -> dict[str, int]:
    client = Client(proc.addr, connect_timeout=5, timeout=5)
    try:
        return {k.decode(): int(v) for k, v in client.stats().items() if str(v).isdigit()}
    finally:
        client.close()


def scrape(port: int) -> dict[str, dict[tuple, float]]:
    """Metric samples by sample name, each keyed by its sorted labels."""
    with urllib.request.urlopen(f"http://{HOST}:{port}/metrics", timeout=5) as reply:
        assert reply.headers["Content-Type"].startswith("application/openmetrics-text")
        text = reply.read().decode()
    samples: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):  # raises on malformed exposition
        for sample in family.samples:
            samples.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return samples


@pytest.mark.parametrize("engine", ENGINES)
def test_metrics_agree_with_the_servers_own_counters(processes, engine):
    servers = [processes.memcached() for _ in range(3)]
    metrics_port = {}

    def args(port):
        metrics_port["port"] = free_port()
        server_args = [a for s in servers for a in ("--server", f"{HOST}:{s.port}")]
        return [
            str(memrelay_binary()), "--engine", engine, "--listen", f"{HOST}:{port}", *server_args,
            "--stats-window", str(WINDOW_S), "--metrics-listen", f"{HOST}:{metrics_port['port']}",
        ]

    relay = processes.start(f"memrelay-{engine}", args)
    before = [server_stats(s) for s in servers]
    client = Client(relay.addr, connect_timeout=5, timeout=5, default_noreply=False)
    for i in range(120):
        assert client.set(f"m{i}", b"value")
    for i in range(200):
        client.get(f"m{i}")  # 120 hits, 80 misses
    for i in range(30):
        client.get_many([f"m{i}", f"m{i + 1}", f"none{i}"])  # 2 hits and a miss each
    client.close()
    after = [server_stats(s) for s in servers]
    delta = lambda name: sum(a.get(name, 0) - b.get(name, 0) for a, b in zip(after, before))  # noqa: E731

    # The totals lag by at most one window; wait for it.
    time.sleep(3 * WINDOW_S)
    m = scrape(metrics_port["port"])
    requests = m["memrelay_requests_total"]
    count = lambda kind: sum(v for labels, v in requests.items() if ("type", kind) in labels)  # noqa: E731
    assert count("set") == 120 and count("get") == 200 and count("multiget") == 30
    assert requests[(("result", "error"), ("type", "get"))] == 0
    hits = sum(m["memrelay_hits_total"].values())
    misses = sum(m["memrelay_misses_total"].values())
    assert hits == delta("get_hits"), "hits as the servers counted them"
    assert misses == delta("get_misses"), "misses as the servers counted them"
    assert (hits, misses) == (120 + 60, 80 + 30)
    # Per server: requests sent, as the servers counted them. A multi-get of 3 keys is one
    # request but 3 of memcached's cmd_get, so 2 per multi-get come off the servers' count.
    sent = {server.port: m["memrelay_server_requests_total"][(("server", f"{HOST}:{server.port}"),)] for server in servers}
    assert sum(sent.values()) == delta("cmd_set") + delta("cmd_get") - 2 * 30
    assert delta("cmd_set") == 3 * 120, "every set reached every server"
    for server in servers:
        labels = (("server", f"{HOST}:{server.port}"),)
        assert m["memrelay_server_up"][labels] == 1.0
        # Nothing was missed (write policy `all`): no server under repair.
        assert m["memrelay_server_repairing"][labels] == 0.0
        assert m["memrelay_server_repair_queued_total"][labels] == 0
        assert m["memrelay_server_latency_seconds_count"][labels] == sent[server.port]
        inf = tuple(sorted(labels + (("le", "+Inf"),)))
        assert m["memrelay_server_latency_seconds_bucket"][inf] == sent[server.port]
    # The default pool (the only one here) is the sum of its servers, as they counted them.
    pool = (("pool", "default"),)
    assert m["memrelay_pool_requests_total"][pool] == sum(sent.values())
    assert m["memrelay_pool_latency_seconds_count"][pool] == sum(sent.values())
    assert m["memrelay_pool_servers_up"][pool] == 3.0
    # Histogram counts equal the requests they describe.
    for kind in ("get", "multiget", "set"):
        assert m["memrelay_response_seconds_count"][(("type", kind),)] == count(kind)
    assert m["memrelay_config_generation"][()] == 1
    assert any(labels == (("role", "main"),) for labels in m["memrelay_cpu_seconds_total"])


def test_only_metrics_is_served(processes):
    servers = [processes.memcached()]
    holder = {}

    def args(port):
        holder["port"] = free_port()
        return [str(memrelay_binary()), "--listen", f"{HOST}:{port}", "--server", f"{HOST}:{servers[0].port}",
                "--metrics-listen", f"{HOST}:{holder['port']}"]

    processes.start("memrelay", args)
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(f"http://{HOST}:{holder['port']}/other", timeout=5)
    assert caught.value.code == 404
