"""Every host shaped (issue 34): a request crosses several shaped links in series, and the models
make them one queue, the busiest link's (analysis/_links.py), instead of a queue each.

The "measurements" are worked out by hand, not by the models: a read through the middleware
crosses the client's link, the middleware's and the server's, each a tbf at 8 Mbit/s. Bytes per
request (headers and acknowledgements in, as the testbed's veth counters count them): the
middleware's link 1,250 in and 1,240 out, the client's 1,130 in, the server's 1,130 out; 110 the
other way. Demands bytes x 8 / rate: 1.25 ms, 1.13 ms, 1.13 ms. A tbf passes packets at once
while its bucket holds tokens and at its rate when it does not, so the links only cap the rate:
with R0 the response time away from the links, N clients complete

    X(N) = min(N / R0, 8e6 / 8 / 1,250) = min(N / R0, 800/s),

exact for constant times (a closed loop through a constant delay and constant-rate servers in
series runs at its slowest server's rate or at N / R0, Friedman's reduction of tandem queues).
A queue per link (the models before issue 34) sums the links' times into every cycle: by hand
below, at most 427/s at 2 clients, where the testbed with every host shaped ran at the link's
rate.
"""

from __future__ import annotations

import pandas as pd
import pytest
from test_model_builder import FIXTURE

from memrelay_lab import measured_demands, network_model
from memrelay_lab.analysis import (
    RoleHostCounts,
    build_centers,
    named_bottlenecks,
    plan_capacity,
    predict_configurations,
    predictions_frame,
)
from memrelay_lab.analysis._predict import _measured_demands, stages_of
from memrelay_lab.theory import Center, mva

RATE_MBIT = 8.0
BYTES = {  # (host, direction) -> bytes per request
    ("client1", "to"): 1130.0, ("client1", "from"): 110.0,
    ("mw1", "to"): 1250.0, ("mw1", "from"): 1240.0,
    ("server1", "to"): 110.0, ("server1", "from"): 1130.0,
}
D_MW, D_CLIENT, D_SERVER = 1.25e-3, 1.13e-3, 1.13e-3  # seconds: bytes x 8 / 8e6
BOUND = 800.0  # requests/s: 1 / 1.25 ms
# Processor time per request (µs) as a testbed run measures it, on 2 cores: 87 µs, far from a bound.
CPU = dict(cores=2, engine="pool", instances=1, pipeline=1, cpu_bench_us=40.0, cpu_net_us=15.0, cpu_other_us=2.0,
           cpu_worker_us=20.0, cpu_memcached_us=10.0, cpu_loop_us=0.0, cpu_total_us=87.0)
COLUMNS = ["clients", "workers", "middlewares", "engine"]


def links(share: dict[str, float] | None = None) -> dict:
    share = share or {}
    columns = {f"link:{host}:{direction}_bytes_per_request": value * share.get(host, 1.0)
               for (host, direction), value in BYTES.items()}
    columns.update({f"link:{host}:rate_mbit": RATE_MBIT for host, _ in BYTES})
    return columns


def every_host_shaped(populations, r0_ms: float) -> pd.DataFrame:
    """Rows as a run would summarize them: X(N) by the module docstring's formula, R = N / X;
    the middleware sees half of R0 at the servers; what waits for the saturated link (N / X - R0)
    shows half in the middleware's response time, half outside it."""
    rows = []
    for clients in populations:
        x = min(clients / (r0_ms / 1000), BOUND)
        response = clients / x * 1000
        waiting = response - r0_ms
        rows.append({**FIXTURE, **CPU, "middlewares": 1, "workers": 8, "clients": clients, "threads_per_instance": 1,
                     "throughput": x, "mw_throughput": x, "response_ms": response, "mw_service_ms": r0_ms / 2,
                     "mw_queue_ms": 0.01, "mw_net_ms": 0.03, "mw_worker_ms": 0.01,
                     "mw_response_ms": r0_ms / 2 + 0.05 + waiting / 2, **links()})
    return pd.DataFrame(rows)


def test_the_path_is_one_queue_the_busiest_links():
    row = every_host_shaped([2], 0.5).iloc[0]
    demands = measured_demands(row)
    # Every host's busier direction is known to the model (tables, utilizations) ...
    assert dict(demands.links) == {"link to client1": pytest.approx(D_CLIENT), "link to mw1": pytest.approx(D_MW),
                                   "link from server1": pytest.approx(D_SERVER)}
    # ... but one queue stands for them all in the MVA network ...
    queues = [(c.name, c.demand) for c in build_centers(demands) if c.name.startswith("link ")]
    assert queues == [("link to mw1", pytest.approx(D_MW))]
    # ... and one stage, one thread, in the shared-processor model.
    stages = [s for s in stages_of(row, _measured_demands(row), 0.0) if s.name.startswith("link ")]
    assert [(s.name, s.delay, s.threads) for s in stages] == [("link to mw1", pytest.approx(D_MW), 1)]


def serialised_throughput_at_two_by_hand() -> float:
    """The old model's most at 2 clients: a queue per link and nothing else (every other demand
    and delay only lowers it). Exact MVA by hand: R(1) = sum D; Q_k(1) = D_k / R(1);
    R(2) = sum D_k (1 + Q_k(1)); X(2) = 2 / R(2)."""
    demands = (D_CLIENT, D_MW, D_SERVER)
    r1 = sum(demands)
    r2 = sum(d * (1 + d / r1) for d in demands)
    return 2 / r2


def test_saturated_from_the_lowest_population_both_models_predict_the_link():
    # The testbed's case: R0 = 0.5 ms, so even 2 clients would run at 4,000/s; the link holds 800.
    table = every_host_shaped([2, 8, 32], 0.5)
    assert list(table["throughput"]) == [BOUND] * 3
    mva_rows = network_model(table, config_columns=["clients"], demands="lowest").comparison.set_index("clients")
    shared = predictions_frame(predict_configurations(table, COLUMNS, calibrate={"clients": [2]})).set_index("clients")
    for clients in (2, 8, 32):
        for model, frame in (("MVA", mva_rows), ("shared-processor", shared)):
            predicted = frame.loc[clients, "throughput_predicted"]
            assert predicted <= BOUND * (1 + 1e-6), (model, clients, predicted)
            assert abs(predicted / BOUND - 1) <= 0.10, (model, clients, predicted)
            assert frame.loc[clients, "bottleneck"] == "link to mw1", (model, clients)
    assert set(named_bottlenecks(table, COLUMNS, ["clients"]).values()) == {"link to mw1"}
    # The check can fail: a queue per link gives 2 clients at most 427/s, 47% below the link's rate.
    serialised = serialised_throughput_at_two_by_hand()
    assert serialised == pytest.approx(427.1, abs=0.1)
    assert serialised < 0.9 * BOUND
    # (the MVA solver agrees with the hand computation)
    three = [Center.queue(name, d) for name, d in (("c", D_CLIENT), ("m", D_MW), ("s", D_SERVER))]
    assert float(mva(three, 2, 0.0).throughput[-1]) == pytest.approx(serialised, rel=1e-9)


def test_below_the_links_rate_the_response_time_holds_no_sum_of_link_times():
    # R0 = 2 ms: 1 client runs at 500/s, the link 62% busy; from 4 clients on the link holds 800/s.
    # (At 2 clients, the knee, a single exponential queue is some 10% below the sharp min(); see
    # analysis/_links.py.)
    table = every_host_shaped([1, 4, 8, 32], 2.0)
    assert list(table["throughput"]) == [500.0, BOUND, BOUND, BOUND]
    mva_rows = network_model(table, config_columns=["clients"], demands="lowest").comparison.set_index("clients")
    shared = predictions_frame(predict_configurations(table, COLUMNS, calibrate={"clients": [1]})).set_index("clients")
    for model, frame in (("MVA", mva_rows), ("shared-processor", shared)):
        # Reproduced where it was calibrated: 2 ms, not the 3.51 ms the links' times add up to.
        assert frame.loc[1, "throughput_predicted"] == pytest.approx(500.0, rel=1e-3), model
        assert frame.loc[1, "response_ms_predicted"] == pytest.approx(2.0, rel=1e-3), model
        for clients in (4, 8, 32):
            predicted = frame.loc[clients, "throughput_predicted"]
            assert abs(predicted / BOUND - 1) <= 0.10, (model, clients, predicted)
            assert frame.loc[clients, "bottleneck"] == "link to mw1", (model, clients)
    # The check can fail: a queue per link cannot give 1 client less than the links' sum.
    assert (D_CLIENT + D_MW + D_SERVER) * 1000 > 1.10 * 2.0


def test_a_plan_with_every_host_shaped_scales_every_role_its_link_caps():
    # Rates by hand: one client host's link carries 1 / 1.13 ms = 885/s, a middleware host's 800/s,
    # a server host's 885/s (reads go to one server: each of S carries 1/S of them). 1,200/s needs
    # two of each; 2,300/s three of each (3 x 800 = 2,400). The calibration: 1 of each at 2 and 8
    # clients, both at the middleware link's 800/s (R0 = 0.5 ms).
    rows = []
    for cpt in (1, 4):
        rows.append({**every_host_shaped([2 * cpt], 0.5).iloc[0].to_dict(), "servers": 1, "client_machines": 1,
                     "instances_per_machine": 1, "threads_per_instance": 2, "clients_per_thread": cpt,
                     "middleware": "memrelay", "distribution": "all", "write_fraction": 0.0})
    table = pd.DataFrame(rows)
    testbed = RoleHostCounts(servers=3, middlewares=4, clients=4, links_fixed=True)
    for target, count in ((1200, 2), (2300, 3)):
        plan = plan_capacity(table, ["clients", "middleware"], target, response_bound_ms=4.0, hosts=testbed)
        chosen = plan.chosen.parameters
        assert (chosen["servers"], chosen["middlewares"], chosen["client_machines"]) == (count, count, count), chosen
        assert plan.chosen.throughput >= target
        assert "link" in plan.next_smaller.verdict, plan.next_smaller.verdict
        # What the planned configuration runs at, by the module docstring's formula with k hosts of
        # each role: min(N / R0, k / D) for the busiest role's link.
        truth = min(chosen["clients"] / 0.5e-3, count / D_MW, count / D_CLIENT, count / D_SERVER)
        assert abs(plan.chosen.throughput / truth - 1) <= 0.10, (plan.chosen.throughput, truth)
        assert abs(plan.chosen.response_ms / (chosen["clients"] / truth * 1000) - 1) <= 0.10
