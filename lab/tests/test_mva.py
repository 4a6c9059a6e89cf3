"""MVA against hand-computed networks, an independent product-form (convolution)
solution, and the operational laws."""

import json
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memrelay_lab import Center, CenterKind, asymptotic_bounds, bottleneck, mva


def test_two_queues_with_think_time_match_hand_computation():
    # Z = 2, queue "cpu" D = 1, queue "disk" D = 2 (Jain ch. 34 recursion, by hand):
    # n=1: R_cpu = 1, R_disk = 2, R = 3, X = 1/(2+3) = 1/5; Q_cpu = 1/5, Q_disk = 2/5
    # n=2: R_cpu = 1(1 + 1/5) = 6/5, R_disk = 2(1 + 2/5) = 14/5, R = 4, X = 2/(2+4) = 1/3
    #      Q_cpu = 2/5, Q_disk = 14/15
    # n=3: R_cpu = 1(1 + 2/5) = 7/5, R_disk = 2(1 + 14/15) = 58/15, R = 79/15,
    #      X = 3/(2 + 79/15) = 45/109; Q_cpu = 63/109, Q_disk = 174/109
    result = mva([Center.queue("cpu", 1.0), Center.queue("disk", 2.0)], population=3, think_time=2.0)
    assert result.throughput == pytest.approx([1 / 5, 1 / 3, 45 / 109])
    assert result.response_time == pytest.approx([3.0, 4.0, 79 / 15])
    assert result.residence_time[:, 0] == pytest.approx([1.0, 6 / 5, 7 / 5])
    assert result.residence_time[:, 1] == pytest.approx([2.0, 14 / 5, 58 / 15])
    assert result.queue_length[2] == pytest.approx([63 / 109, 174 / 109])
    assert result.utilization[2] == pytest.approx([45 / 109, 90 / 109])


def test_two_server_center_matches_hand_computation_and_product_form():
    # Z = 1, one center with m = 2 servers and D = 2 (rate min(j, 2)/2), Box 36.1 by hand:
    # n=1: R = 1 * 2/1 * P(0|0) = 2, X = 1/3; P(1|1) = X*2/1*P(0|0) = 2/3, P(0|1) = 1/3
    # n=2: R = 1*2*P(0|1) + 2*(2/2)*P(1|1) = 2/3 + 4/3 = 2, X = 2/3
    #      P(1|2) = X*2*P(0|1) = 4/9, P(2|2) = X*1*P(1|1) = 4/9, P(0|2) = 1/9
    # n=3: R = 1*2*(1/9) + 2*1*(4/9) + 3*1*(4/9) = 22/9, X = 3/(1 + 22/9) = 27/31
    # Product form check for n=3: P(j) ~ Z^(3-j)/(3-j)! * D^j / (alpha(1)...alpha(j))
    #      = 1/6, 2/2, 4/2, 8/4 -> P = (1, 6, 12, 12)/31, so P(0|3) = 1/31.
    result = mva([Center.multi_server("workers", 2.0, servers=2)], population=3, think_time=1.0)
    assert result.throughput == pytest.approx([1 / 3, 2 / 3, 27 / 31])
    assert result.response_time == pytest.approx([2.0, 2.0, 22 / 9])
    probs = result.marginal_probabilities["workers"]
    assert probs[1, :2] == pytest.approx([1 / 3, 2 / 3])
    assert probs[2, :3] == pytest.approx([1 / 9, 4 / 9, 4 / 9])
    assert probs[3, :4] == pytest.approx(np.array([1, 6, 12, 12]) / 31)
    assert result.utilization[:, 0] == pytest.approx(result.throughput * 2.0 / 2)


def _product_form(centers, population, think_time):
    """X(N) and each load-dependent center's P(j | N) from the product-form solution.

    Buzen's convolution: f_i(n) = D^n (queue), D^n / n! (delay), D^n / prod alpha(j)
    (load dependent); think time is a delay station. G = f_Z * f_1 * ... * f_K and
    X(N) = G(N-1) / G(N); P_i(j|N) = f_i(j) G_{-i}(N-j) / G(N). Everything in log space.
    """

    def log_f(center):
        logs = np.zeros(population + 1)
        for n in range(1, population + 1):
            if center is None:  # the think station
                step = math.log(think_time) - math.log(n) if think_time > 0 else -math.inf
            elif center.kind is CenterKind.DELAY:
                step = math.log(center.demand) - math.log(n)
            elif center.kind is CenterKind.QUEUE:
                step = math.log(center.demand)
            elif center.kind is CenterKind.MULTI:
                step = math.log(center.demand) - math.log(min(n, center.servers))
            else:
                step = math.log(center.demand) - math.log(center.rate_multiplier(n))
            logs[n] = logs[n - 1] + step
        return logs

    def convolve(stations):
        g = log_f(None)
        for center in stations:
            f = log_f(center)
            g = np.array([np.logaddexp.reduce([g[j] + f[n - j] for j in range(n + 1)]) for n in range(population + 1)])
        return g

    log_g = convolve(centers)
    throughput = math.exp(log_g[population - 1] - log_g[population])
    marginals = {}
    for i, center in enumerate(centers):
        if center.kind in (CenterKind.MULTI, CenterKind.LOAD_DEPENDENT):
            rest = convolve([c for k, c in enumerate(centers) if k != i])
            f = log_f(center)
            log_p = [f[j] + rest[population - j] - log_g[population] for j in range(population + 1)]
            marginals[center.name] = np.exp(log_p)
    return throughput, marginals


@pytest.mark.parametrize(
    ("servers", "worker_demand", "think_time", "population"),
    [(8, 1.6, 0.0, 64), (8, 1.6, 2.0, 100), (32, 1.7, 2.0, 128), (64, 2.6, 0.0, 128), (64, 2.6, 2.0, 96)],
)
def test_middleware_network_matches_product_form_even_when_workers_saturate(
    servers, worker_demand, think_time, population
):
    # Seed 000 Figure 28's shape (times in ms): net thread queue, worker pool, memcached
    # and network as delays. Jain's P(0|n) = 1 - sum loses all digits here (m = 64 was
    # 60 % off); the result must still be the exact product-form one.
    centers = [
        Center.queue("net", 0.044),
        Center.multi_server("workers", worker_demand, servers),
        Center.delay("memcached", 2.0),
        Center.delay("network", 0.5),
    ]
    result = mva(centers, population, think_time)
    throughput, marginals = _product_form(centers, population, think_time)
    assert result.throughput[-1] == pytest.approx(throughput, rel=1e-9)
    probs = result.marginal_probabilities["workers"][population, : population + 1]
    assert probs == pytest.approx(marginals["workers"], rel=1e-6, abs=1e-12)


def test_a_network_of_many_thread_pools_is_solved_exactly():
    # A three-tier testbed design (seed 000 section 4.1) gives the model a load-dependent
    # center per stage: 14 here. Solving each complement network by MVA took 2^14 networks
    # (a `model predict` ran for over 40 minutes); the convolution of the others' factors is
    # linear in them, and still the exact product-form result.
    centers = [Center.multi_server(f"pool{i}", 0.2 + 0.15 * i, 2 + i % 5) for i in range(14)]
    centers += [Center.queue("net", 0.3), Center.delay("wire", 1.0)]
    population = 48
    result = mva(centers, population, 0.5)
    throughput, marginals = _product_form(centers, population, 0.5)
    assert result.throughput[-1] == pytest.approx(throughput, rel=1e-9)
    for name in ("pool0", "pool13"):
        probs = result.marginal_probabilities[name][population, : population + 1]
        assert probs == pytest.approx(marginals[name], rel=1e-6, abs=1e-12)


demands = st.floats(min_value=0.01, max_value=10.0)


@st.composite
def networks(draw):
    """Random closed networks: 1-4 centers of every kind, N up to 40, Z >= 0."""
    centers = []
    for index in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(st.sampled_from(["queue", "delay", "multi", "load_dependent"]))
        demand = draw(demands)
        if kind == "queue":
            centers.append(Center.queue(f"c{index}", demand))
        elif kind == "delay":
            centers.append(Center.delay(f"c{index}", demand))
        elif kind == "multi":
            centers.append(Center.multi_server(f"c{index}", demand, draw(st.integers(min_value=1, max_value=64))))
        else:
            # A disk whose rate grows with the queue, e.g. thanks to request reordering.
            speedup = draw(st.floats(min_value=0.0, max_value=1.0))
            centers.append(Center.load_dependent(f"c{index}", demand, lambda j, s=speedup: 1.0 + s * (1 - 1 / j)))
    think_time = draw(st.sampled_from([0.0, 0.5, 5.0]))
    if think_time == 0 and all(c.kind is CenterKind.DELAY for c in centers):
        think_time = 1.0
    return centers, draw(st.integers(min_value=1, max_value=40)), think_time


@settings(max_examples=40, deadline=None)
@given(networks())
def test_random_networks_match_product_form(network):
    centers, population, think_time = network
    result = mva(centers, population, think_time)
    throughput, marginals = _product_form(centers, population, think_time)
    assert result.throughput[-1] == pytest.approx(throughput, rel=1e-8)
    for name, expected in marginals.items():
        assert result.marginal_probabilities[name][population, : population + 1] == pytest.approx(
            expected, rel=1e-6, abs=1e-12
        )


@settings(max_examples=60, deadline=None)
@given(networks())
def test_operational_laws_hold(network):
    centers, population, think_time = network
    result = mva(centers, population, think_time)
    x = result.throughput
    n = result.populations
    # Little's law per center and for the whole system: Q_i = X R_i, N = X (R + Z).
    assert result.queue_length == pytest.approx(x[:, None] * result.residence_time)
    assert x * (result.response_time + think_time) == pytest.approx(n)
    assert result.queue_length.sum(axis=1) == pytest.approx(n - x * think_time)
    # Utilizations are fractions (per server for multi centers); delay centers have none.
    for i, center in enumerate(centers):
        if center.kind is CenterKind.DELAY:
            assert np.all(np.isnan(result.utilization[:, i]))
        else:
            assert np.all(result.utilization[:, i] <= 1 + 1e-9)
            assert np.all(result.utilization[:, i] >= 0)
    for probs in result.marginal_probabilities.values():
        for pop in range(1, population + 1):
            assert probs[pop, : pop + 1].sum() == pytest.approx(1.0)
    assert np.all(np.diff(x) >= -1e-12 * x[1:])
    bounds = asymptotic_bounds(centers, think_time, population)
    for pop, throughput, response in zip(n, x, result.response_time):
        assert throughput <= bounds.throughput_bound(pop) * (1 + 1e-9)
        assert response >= bounds.response_time_bound(pop) * (1 - 1e-9)


@settings(max_examples=40, deadline=None)
@given(demands, demands, st.floats(min_value=0.0, max_value=5.0), st.integers(min_value=1, max_value=50))
def test_one_server_load_dependent_center_equals_fixed_rate_queue(disk, cpu, think_time, population):
    fixed = mva([Center.queue("cpu", cpu), Center.queue("disk", disk)], population, think_time)
    for variant in (Center.multi_server("disk", disk, 1), Center.load_dependent("disk", disk, lambda j: 1.0)):
        dependent = mva([Center.queue("cpu", cpu), variant], population, think_time)
        assert dependent.throughput == pytest.approx(fixed.throughput, rel=1e-9)
        assert dependent.residence_time == pytest.approx(fixed.residence_time, rel=1e-9)
        assert dependent.utilization[:, 1] == pytest.approx(fixed.utilization[:, 1], rel=1e-9)


def test_general_load_dependent_center_with_min_j_m_equals_multi_server():
    centers = [Center.queue("net", 0.05), Center.delay("network", 0.5)]
    multi = mva([*centers, Center.multi_server("workers", 1.6, 8)], 40, 1.0)
    general = mva([*centers, Center.load_dependent("workers", 1.6, lambda j: min(j, 8))], 40, 1.0)
    assert general.throughput == pytest.approx(multi.throughput, rel=1e-12)
    assert general.marginal_probabilities["workers"] == pytest.approx(
        multi.marginal_probabilities["workers"], rel=1e-9, abs=1e-300
    )


def test_bottleneck_and_asymptotic_bounds_by_hand():
    # D = 1 + 2 + 4 + 0.5 = 7.5; per server: cpu 1, disk 2, workers 4/8 = 0.5; Z = 2.5
    # D_max = 2 (disk), N* = (7.5 + 2.5) / 2 = 5, X <= min(N/10, 1/2), R >= max(7.5, 2N - 2.5)
    centers = [
        Center.queue("cpu", 1.0),
        Center.queue("disk", 2.0),
        Center.multi_server("workers", 4.0, 8),
        Center.delay("network", 0.5),
    ]
    bounds = asymptotic_bounds(centers, think_time=2.5)
    assert bottleneck(centers) == "disk" == bounds.bottleneck
    assert bounds.total_demand == 7.5
    assert bounds.bottleneck_demand == 2.0
    assert bounds.knee_population == 5.0
    assert bounds.throughput_bound(3) == pytest.approx(0.3)
    assert bounds.throughput_bound(20) == pytest.approx(0.5)
    assert bounds.response_time_bound(3) == 7.5
    assert bounds.response_time_bound(20) == 37.5
    assert bottleneck([Center.delay("network", 1.0)]) is None


def test_frames_and_json():
    centers = [Center.queue("net", 0.05), Center.multi_server("workers", 1.6, 8), Center.delay("memcached", 2.0)]
    result = mva(centers, 5, 1.0)
    frame = result.to_frame()
    assert len(frame) == 15
    assert list(frame.columns) == [
        "population", "center", "kind", "residence_time", "queue_length", "utilization", "throughput", "response_time",
    ]  # fmt: skip
    last = frame[frame["population"] == 5].set_index("center")
    assert last.loc["workers", "queue_length"] == pytest.approx(result.queue_length[4, 1])
    assert list(result.system_frame()["population"]) == [1, 2, 3, 4, 5]
    record = json.loads(json.dumps(result.to_dict()))
    assert record["results"][4]["throughput"] == pytest.approx(result.throughput[4])
    assert record["results"][0]["centers"]["memcached"]["utilization"] is None
    assert len(record["marginal_probabilities"]["workers"]) == 6


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Center("x", "bogus", 1.0), "unknown kind"),
        (lambda: Center.queue("x", -1.0), "demand"),
        (lambda: Center.multi_server("x", 1.0, 0), "servers"),
        (lambda: Center("x", "queue", 1.0, servers=4), "only multi"),
        (lambda: Center("x", "load_dependent", 1.0), "rate_multiplier"),
        (lambda: mva([Center.queue("x", 1.0)], 0), "population"),
        (lambda: mva([Center.queue("x", 1.0), Center.queue("x", 2.0)], 3), "unique"),
        (lambda: mva([Center.delay("x", 0.0)], 3, 0.0), "unbounded"),
        (lambda: mva([], 3), "at least one"),
    ],
)
def test_bad_networks_are_rejected(make, message):
    with pytest.raises(ValueError, match=message):
        make()
