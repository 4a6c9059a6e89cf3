"""`memrelay-lab plan` on synthetic models whose answer is known: a bottleneck by construction.

Each synthetic results table is made by the model itself (`stages_of` + `shared_cpu_network`)
at two calibration populations with a known off-processor wait, so calibration recovers the
demands exactly and the plan's answer follows from the bottleneck's capacity by hand:
a twemproxy (one thread, D = 100 µs) carries at most 10,000/s, so 15,000/s needs 2 and 25,000/s
needs 3; the processors (C cores / total processor time) cannot be scaled on one machine; a
link of rate L carries 1 / (bytes x 8 / L) requests per second.
"""

from __future__ import annotations

import math

import pandas as pd
import pytest

from memrelay_lab.analysis import RoleHostCounts, candidate_demands, plan_capacity
from memrelay_lab.analysis._predict import stages_of
from memrelay_lab.cli._plan import derived_experiment
from memrelay_lab.experiment import parse_experiment, expand
from memrelay_lab.theory import shared_cpu_network

WAIT_S = 200e-6


def _row(cpt: int, **overrides) -> dict:
    row = dict(servers=1, middlewares=1, middleware="twemproxy", client_machines=1, instances_per_machine=1,
               threads_per_instance=2, clients_per_thread=cpt, pipeline=1, workers=0, engine="n/a",
               distribution="all", write_fraction=0.0, cores=16, cpu_bench_us=5.0, cpu_proxy_us=100.0,
               cpu_memcached_us=5.0, p99_ms=math.nan)
    row.update(overrides)
    row["instances"] = row["client_machines"] * row["instances_per_machine"]
    row["clients"] = row["instances"] * row["threads_per_instance"] * cpt
    demands = {k: v for k, v in row.items() if k.startswith("cpu_") or k.startswith("link ")}
    links = {k: v for k, v in row.items() if k.startswith("link:")}
    demands.update({f"link {k.split(':')[2].split('_')[0]} {k.split(':')[1]}": v * 8 / (row[f"link:{k.split(':')[1]}:rate_mbit"])
                    for k, v in links.items() if k.endswith("_bytes_per_request")})
    result = shared_cpu_network(stages_of(row, demands, WAIT_S), row["clients"], row["cores"])
    row["throughput"], row["response_ms"] = result.throughput, result.response_time * 1e3
    row["cpu_total_us"] = sum(v for k, v in row.items() if k.startswith("cpu_") and k.endswith("_us"))
    return row


def _table(*rows) -> pd.DataFrame:
    return pd.DataFrame(list(rows))


COLUMNS = ["clients", "middleware"]


def test_a_single_threaded_proxy_is_the_bottleneck_so_the_plan_adds_middlewares():
    table = _table(_row(1), _row(4))
    plan = plan_capacity(table, COLUMNS, 15_000)
    assert plan.chosen.parameters["middlewares"] == 2
    assert plan.chosen.throughput >= 15_000
    assert plan.chosen.bottleneck in ("twemproxy", "none") or plan.chosen.throughput < 20_000
    # The next smaller candidate fails because of the twemproxy, at its 1 / D = 10,000/s.
    assert plan.next_smaller is not None and "twemproxy" in plan.next_smaller.verdict
    assert plan.next_smaller.throughput == pytest.approx(10_000, rel=1e-3)
    assert plan_capacity(table, COLUMNS, 25_000).chosen.parameters["middlewares"] == 3


def test_the_processors_cannot_be_scaled_so_a_target_above_them_has_no_plan():
    # 2 cores, 110 µs of processor time per request: at most 18,182/s whatever the counts.
    table = _table(_row(1, cores=2, cpu_proxy_us=20.0, cpu_memcached_us=85.0),
                   _row(4, cores=2, cpu_proxy_us=20.0, cpu_memcached_us=85.0))
    plan = plan_capacity(table, COLUMNS, 25_000)
    assert plan.chosen is None
    assert all("processors" in c.verdict for c in plan.candidates)
    assert max(c.throughput for c in plan.candidates) == pytest.approx(2 / 110e-6, rel=1e-3)


def test_a_response_time_bound_that_the_population_needed_breaks_fails_the_candidate():
    table = _table(_row(1), _row(4))
    loose = plan_capacity(table, COLUMNS, 9_000)
    assert loose.chosen.parameters["middlewares"] == 1
    # Near its 10,000/s a single twemproxy needs many clients and queues them: with a tight bound
    # the plan takes two twemproxies, each farther from saturation (R can't go below the 0.31 ms of
    # demands and wait).
    tight = plan_capacity(table, COLUMNS, 9_000, response_bound_ms=loose.chosen.response_ms * 0.75)
    assert tight.chosen.parameters["middlewares"] == 2
    assert tight.chosen.response_ms <= loose.chosen.response_ms * 0.75
    assert "ms >" in tight.next_smaller.verdict or "caps it" in tight.next_smaller.verdict


def test_intervals_of_the_demands_give_the_plans_interval():
    rows = [_row(1), _row(4)]
    for row in rows:
        row["cpu_proxy_us_half_width"] = 10.0  # ±10% of the bottleneck's demand
        row["throughput_half_width"] = 0.0
    plan = plan_capacity(_table(*rows), COLUMNS, 15_000)
    chosen = plan.chosen
    assert chosen.throughput_low < chosen.throughput <= chosen.throughput_high
    assert plan.to_dict()["plan"]["throughput_interval"] == [chosen.throughput_low, chosen.throughput_high]


def test_scaling_rules():
    """How each count changes a demand (module docstring of analysis/_plan.py)."""
    base = pd.Series(dict(servers=2, middlewares=1, client_machines=1, write_fraction=0.25, distribution="all",
                          middleware="memrelay", link_rate_mbit=100.0,
                          **{"link:server1:to_bytes_per_request": 1.0, "link:mw1:to_bytes_per_request": 1.0,
                             "link:client1:to_bytes_per_request": 1.0}))
    demands = {"cpu_memcached_us": 10.0, "cpu_net_us": 3.0, "link to server1": 8.0, "link to mw1": 8.0,
               "link from client1": 8.0}
    same = candidate_demands(base, dict(servers=2, middlewares=1, client_machines=1), demands)
    assert same == demands
    # Replicated writes: 4 servers double what a write costs memcached (w S'/S + 1 - w = 1.25).
    more_servers = candidate_demands(base, dict(servers=4, middlewares=1, client_machines=1), demands)
    assert more_servers["cpu_memcached_us"] == pytest.approx(12.5)
    assert more_servers["cpu_net_us"] == 3.0
    # A server host's link: every write, half the reads (w + (1 - w) S/S') = 0.625.
    assert more_servers["link to server1"] == pytest.approx(8.0 * 0.625)
    # Two middlewares on two hosts: each middleware host's link carries half.
    two = candidate_demands(base, dict(servers=2, middlewares=2, client_machines=2), demands)
    assert two["link to mw1"] == pytest.approx(4.0) and two["link from client1"] == pytest.approx(4.0)
    # ... on one host (the roles name one): no relief.
    shared = candidate_demands(base, dict(servers=2, middlewares=2, client_machines=1), demands,
                               RoleHostCounts(middlewares=1))
    assert shared["link to mw1"] == pytest.approx(8.0)
    # A faster link: every link's demand times old / new rate.
    faster = candidate_demands(base, dict(servers=2, middlewares=1, client_machines=1, link_rate_mbit=200.0), demands)
    assert faster["link to server1"] == pytest.approx(4.0) and faster["cpu_net_us"] == 3.0
    # Hashed keys (ketama): memcached's demand per request does not grow with servers.
    hashed = candidate_demands(pd.Series({**base, "distribution": "ketama"}),
                               dict(servers=4, middlewares=1, client_machines=1), demands)
    assert hashed["cpu_memcached_us"] == 10.0


def test_a_link_bound_plan_raises_the_link_rate_or_spreads_the_load():
    # One client host whose link carries 1,250 bytes per request at 10 Mbit/s: 1,000/s at most.
    link = {"link:client1:from_bytes_per_request": 1250.0, "link:client1:to_bytes_per_request": 100.0,
            "link:client1:rate_mbit": 10.0}
    rows = [_row(1, **link), _row(4, **link)]
    plan = plan_capacity(_table(*rows), COLUMNS, 2_500)
    chosen = plan.chosen
    assert chosen is not None and chosen.throughput >= 2_500
    capacity = (chosen.parameters.get("link_rate_mbit", 10.0) * 1e6 / (1250 * 8)) * chosen.parameters["client_machines"]
    assert capacity >= 2_500
    assert "link" in plan.next_smaller.verdict


def test_the_verify_experiment_is_the_planned_configuration():
    text = """
name = "calib"
servers = 1
client_machines = 1
threads_per_instance = 2
clients_per_thread = [1, 4]
middleware = ["memrelay", "twemproxy"]
middlewares = 1
repetitions = 2
test_time = 4
warmup = 1
cooldown = 1
[profile.quick]
clients_per_thread = [1, 2]
"""
    plan = plan_capacity(_table(_row(1), _row(4)), COLUMNS, 15_000)
    derived = derived_experiment(plan, text, "quick")
    experiment = parse_experiment(derived, source="derived.toml")
    (config,) = expand(experiment)
    assert config.middleware == "twemproxy"
    assert config.middlewares == plan.chosen.parameters["middlewares"]
    assert config.client_machines == plan.chosen.parameters["client_machines"]
    assert config.clients_per_thread == plan.chosen.parameters["clients_per_thread"]
    assert experiment.settings["repetitions"] == 2 and experiment.settings["test_time"] == 4
