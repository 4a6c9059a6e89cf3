"""A link's counters and their times are read together (issue 33), and bytes per request come
only from an interval long enough to be right.

The link here is synthetic and exact: its counter is a known rate times the clock, so the bytes
over any interval are known without the code under test. The sampler's socket dump is made
slow (0.3 s, as on a machine with many sockets): the bytes the sampler reports over the interval
it reports must still be that rate. The check fails on a doctored document whose interval is
the network snapshots' (what the counters were paired with before).
"""

from __future__ import annotations

import math
import time

import pytest

from memrelay_lab.experiment import _cpu
from memrelay_lab.results._links import LINK_MIN_REQUESTS_PER_CLIENT, link_interval_problem, link_measures

RATE = 1_000_000.0  # bytes per second through the synthetic link, each way


def synthetic_link(interfaces):
    now = time.time()
    return {host: (int(RATE * now), int(RATE * now / 2)) for host in interfaces}


def slow_dump(pids):
    at = time.time()
    time.sleep(0.3)
    return at, {}


@pytest.fixture
def sampled(monkeypatch):
    monkeypatch.setattr(_cpu, "link_bytes", synthetic_link)
    monkeypatch.setattr(_cpu, "tcp_bytes", slow_dump)
    start = time.time() + 0.1
    sampler = _cpu.CpuSampler({}, start, start + 1.6, links={"m1": "veth-m1"})
    sampler.begin()
    document = sampler.finish()
    return start, document


def test_counters_and_their_times_are_read_together(sampled):
    start, document = sampled
    begin, end = document["links_interval_unix"]
    # The kept interval's ends, not the network snapshots inside it (the last reading may come
    # late by what the slow dump before it took: its time says when it was taken).
    assert abs(begin - start) < 0.05 and start + 1.6 - 0.01 <= end < start + 1.6 + 0.35
    counted = document["links"]["m1"]
    assert counted["to_host_bytes"] / (end - begin) == pytest.approx(RATE, rel=0.01)
    assert counted["from_host_bytes"] / (end - begin) == pytest.approx(RATE / 2, rel=0.01)
    # 1,000 requests per second: 1,000 bytes per request to the host, 500 from it.
    measures = link_measures(document, 1000.0, {"m1": 15.0}, population=2)
    assert measures["link:m1:to_bytes_per_request"] == pytest.approx(1000.0, rel=0.01)
    assert measures["link:m1:from_bytes_per_request"] == pytest.approx(500.0, rel=0.01)
    # Doctored: the same counters over the network snapshots' interval (half a second shorter,
    # one end moved by the slow dump) are off by far more than the 1% above.
    doctored = {**document, "links_interval_unix": document["network_interval_unix"]}
    off = link_measures(doctored, 1000.0, {"m1": 15.0}, population=2)["link:m1:to_bytes_per_request"]
    assert abs(off / 1000.0 - 1) > 0.2, off


def test_a_reading_taken_after_the_load_ended_counts_the_requests_of_its_interval(sampled):
    """The sampler woke late on a busy machine: its last reading came 0.8 s after the load
    ended. The bytes stopped with the load; counting requests as throughput times seconds would
    add 0.8 s of requests that never ran (the testbed's 1 KiB reads came out at 913 bytes per
    request beside a build). Counted from the clients' windows, they stop with the load too."""
    _, document = sampled
    begin, end = document["links_interval_unix"]
    late = {**document, "links_interval_unix": [begin, end + 0.8]}
    ran_until = end  # the load, 1,000 requests a second, ended where the bytes did
    counted = link_measures(late, 1000.0, {"m1": 15.0}, population=2,
                            requests_between=lambda a, b: 1000.0 * (min(b, ran_until) - a))
    assert counted["link:m1:to_bytes_per_request"] == pytest.approx(1000.0, rel=0.01)
    assumed = link_measures(late, 1000.0, {"m1": 15.0}, population=2)["link:m1:to_bytes_per_request"]
    assert assumed < 0.8 * 1000.0, assumed


def test_a_short_interval_gives_a_warning_not_a_number(sampled):
    _, document = sampled
    short = {**document, "links_interval_unix": [0.0, 0.75]}
    measures = link_measures(short, 1000.0, {"m1": 15.0}, population=2)
    assert math.isnan(measures["link:m1:to_bytes_per_request"]) and measures["link:too_short"] == 1
    assert measures["link:m1:rate_mbit"] == 15.0
    # Long enough in time but too few requests per client: requests under way at the ends matter.
    assert link_interval_problem(4.0, 40 * 32, 32) is not None
    assert link_interval_problem(4.0, LINK_MIN_REQUESTS_PER_CLIENT * 32, 32) is None
    assert link_interval_problem(0.75, 1e6, 1) is not None
