"""Links in the network model (no root needed): a host link with a known rate and measured
bytes per request is a queue per direction whose demand is bytes x 8 / rate, computed here by
hand; without a rate it is no centre; a link slow enough becomes the bottleneck, and MVA's
throughput tends to 1 / D_link (the asymptotic bound, worked out by hand)."""

from __future__ import annotations

import math

import pytest
from test_model_builder import FIXTURE, fixture_table

from memrelay_lab import measured_demands, network_model
from memrelay_lab.analysis import build_centers


def test_a_link_direction_is_a_queue_with_bytes_over_rate():
    # 1,250 bytes per request at 10 Mbit/s: 1,250 x 8 / 10^7 = 1 ms; 100 bytes: 0.08 ms. Two
    # middlewares share the link: per request of one middleware's network, twice that.
    row = fixture_table(**{"link:s1:from_bytes_per_request": 1250.0, "link:s1:to_bytes_per_request": 100.0,
                           "link:s1:rate_mbit": 10.0}).iloc[0]
    demands = measured_demands(row)
    assert dict(demands.links) == {"link from s1": pytest.approx(2 * 1e-3), "link to s1": pytest.approx(2 * 0.08e-3)}
    centers = {c.name: (c.kind.value, c.demand) for c in build_centers(demands)}
    assert centers["link from s1"] == ("queue", pytest.approx(2e-3))
    assert "link from s1" in {c.name for c in build_centers(demands, "seed")}


def test_bytes_without_a_rate_make_no_centre():
    row = fixture_table(**{"link:c1:from_bytes_per_request": 1250.0, "link:c1:rate_mbit": math.nan}).iloc[0]
    assert measured_demands(row).links == ()
    assert measured_demands(fixture_table().iloc[0]).links == ()


def test_a_slow_link_is_the_bottleneck_and_bounds_the_throughput():
    # One middleware, 64 clients, 1 ms per request on the link: everything else in FIXTURE is
    # well under 1 ms per request (workers 0.17 ms over 2 servers), so X -> 1 / 1 ms = 1,000/s.
    table = fixture_table(middlewares=1, clients=64, **{"link:s1:from_bytes_per_request": 1250.0,
                                                        "link:s1:rate_mbit": 10.0})
    row = network_model(table, config_columns=["clients"], demands="lowest").comparison.iloc[0]
    assert row["bottleneck"] == "link from s1" and row["asymptotic_bottleneck"] == "link from s1"
    assert row["throughput_predicted"] == pytest.approx(1000.0, rel=1e-3)
    assert row["bottleneck_utilization_predicted"] == pytest.approx(1.0, rel=1e-3)
    assert row["link from s1_ms"] == pytest.approx(1.0)
    # With each configuration's own times (which already hold the links' waits) the link is no
    # centre of the solved network, but still the bottleneck: its X D is past 1.
    each = network_model(table, config_columns=["clients"]).comparison.iloc[0]
    assert each["bottleneck"] == "link from s1" and each["asymptotic_bottleneck"] == "link from s1"
    assert each["bottleneck_utilization_predicted"] == pytest.approx(each["throughput_predicted"] * 1e-3)
    # A fast link leaves the bottleneck where it was.
    fast = fixture_table(middlewares=1, clients=64, **{"link:s1:from_bytes_per_request": 1250.0,
                                                       "link:s1:rate_mbit": 1000.0})
    assert network_model(fast, config_columns=["clients"], demands="lowest").comparison.iloc[0]["bottleneck"] != \
        "link from s1"
    assert FIXTURE["workers"] == 2  # the hand bound above relies on it
