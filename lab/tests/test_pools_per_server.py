"""Seed 002 §3's network (a GET M/M/m and a SET M/M/1 centre per server, one response queue):
its centres from the seed's Table 1 and Table 3 inputs, and a small case solved by hand.

Table 4 (the seed's results) is not a target: it breaks Little's law inside itself (GET at
3 servers: X_i E[r] = 2,496.89/s x 1.106 ms = 2.76 jobs against E[n] = 6.46; the response
queue: 162.26/s x 3.944 ms = 0.64 against 359.6), so no solution of any network gives it."""

import pytest

from memrelay_lab.analysis import pools_per_server_centers, pools_per_server_network
from memrelay_lab.theory import CenterKind


def test_centres_from_seed_002_tables_1_and_3():
    # 3 servers, 10 % writes, full replication: E[s]_get = 3.141 ms over 16 read threads,
    # E[s]_set = 8.882 ms over 3.76 sets in service (Table 1); V_get = 0.297, V_set = 0.04 (Table 3).
    centers = pools_per_server_centers(3, 16, 0.297, 0.04, 3.141 / 16, 8.882 / 3.76, 0.1)
    assert [c.name for c in centers] == ["GET queue 1", "SET queue 1", "GET queue 2", "SET queue 2",
                                         "GET queue 3", "SET queue 3", "response queue"]
    gets = [c for c in centers if c.name.startswith("GET")]
    assert all(c.kind is CenterKind.MULTI and c.servers == 16 for c in gets)
    assert gets[0].demand == pytest.approx(0.297 * 3.141 / 16)
    sets = [c for c in centers if c.name.startswith("SET")]
    assert all(c.kind is CenterKind.QUEUE for c in sets)
    assert sets[0].demand == pytest.approx(0.04 * 8.882 / 3.76)
    # Every request visits the response queue once: V = 1 in Table 3.
    assert centers[-1].kind is CenterKind.QUEUE and centers[-1].demand == 0.1


def test_one_server_two_clients_by_hand():
    # One server, m = 2 read threads, D_get = 1, D_set = 1, D_resp = 1, Z = 0.
    # n = 1: R = 3, X = 1/3, Q_set = Q_resp = 1/3, P_get(1|1) = 1/3, P_get(0|1) = 2/3.
    # n = 2: R_get = 1 (two threads, no wait), R_set = R_resp = 1 (1 + 1/3) = 4/3,
    #        R = 11/3, X = 6/11.
    result = pools_per_server_network(1, 2, 2, 0.0, get_visits=1.0, set_visits=1.0, get_service=1.0,
                                      set_service=1.0, response_service=1.0)
    assert result.throughput == pytest.approx([1 / 3, 6 / 11])
    assert result.residence_time[-1] == pytest.approx([1.0, 4 / 3, 4 / 3])


def test_bad_sizes_are_rejected():
    with pytest.raises(ValueError):
        pools_per_server_centers(0, 16, 0.3, 0.04, 0.2, 2.4, 0.1)
