"""The shared-processor network (theory/_shared_cpu.py) against exact solutions: the
continuous-time Markov chain of the same model, itself checked against the closed-form
machine-repairman model; product-form cases against flat MVA."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from memrelay_lab.theory import Center, Stage, exact_throughput, mva, shared_cpu_network


def machine_repairman_throughput(clients: int, think: float, service: float) -> float:
    """N clients thinking for `think`, one exponential server of mean `service` (Kleinrock
    vol. 1 §3.10): P(0) = 1 / sum_k N!/(N-k)! (service/think)^k, X = (1 - P(0)) / service."""
    rho = service / think
    terms = [math.factorial(clients) / math.factorial(clients - k) * rho**k for k in range(clients + 1)]
    return (1 - 1 / sum(terms)) / service


def test_the_exact_chain_is_the_machine_repairman_model_on_one_core():
    stages = [Stage("think", 0.0, 50e-6), Stage("server", 20e-6, 0.0, threads=1)]
    for clients in (1, 3, 6):
        assert exact_throughput(stages, clients, cores=1) == pytest.approx(
            machine_repairman_throughput(clients, 50e-6, 20e-6), rel=1e-9
        )


def test_without_thread_limits_the_network_is_product_form_and_exact():
    stages = [Stage("bench", 10e-6, 5e-6), Stage("memrelay", 6e-6), Stage("memcached", 15e-6, 10e-6)]
    flat = mva([Center.multi_server("cpu", 31e-6, 2), Center.delay("d", 15e-6)], 6).throughput[-1]
    result = shared_cpu_network(stages, 6, cores=2)
    assert result.throughput == pytest.approx(flat, rel=1e-9)
    assert result.throughput == pytest.approx(exact_throughput(stages, 6, cores=2), rel=1e-6)


def random_case(rng: random.Random) -> tuple[list[Stage], int, int]:
    stages = [Stage("bench", rng.uniform(2, 20) * 1e-6, rng.choice([0.0, rng.uniform(1, 20) * 1e-6]))]
    if rng.random() < 0.5:
        stages.append(Stage("net", rng.uniform(1, 10) * 1e-6, threads=1))
    delay = rng.choice([0.0, rng.uniform(0, 100) * 1e-6])
    stages.append(Stage("workers", rng.uniform(1, 40) * 1e-6, delay, threads=rng.choice([1, 2, 3, 4, 8])))
    return stages, rng.randint(2, 7), 2


def test_the_approximation_stays_close_to_the_exact_chain_on_two_cores():
    rng = random.Random(3)
    errors = []
    for _ in range(80):
        stages, clients, cores = random_case(rng)
        exact = exact_throughput(stages, clients, cores)
        errors.append(shared_cpu_network(stages, clients, cores).throughput / exact - 1)
    errors = np.abs(errors)
    assert np.quantile(errors, 0.9) <= 0.05, sorted(errors)[-10:]
    assert errors.max() <= 0.18
    assert errors.mean() <= 0.02


def test_a_flat_network_misses_the_pool_that_holds_requests_while_they_wait_for_a_core():
    # One worker that holds each request through its processor time and a server's reply.
    stages = [Stage("bench", 10e-6), Stage("net", 4e-6, threads=1), Stage("workers", 30e-6, 20e-6, threads=1)]
    exact = exact_throughput(stages, 4, cores=2)
    flat = mva([Center.multi_server("cpu", 44e-6, 2), Center.delay("d", 20e-6)], 4).throughput[-1]
    assert flat > 2 * exact  # the flat network lets the worker serve two requests at once
    assert shared_cpu_network(stages, 4, cores=2).throughput == pytest.approx(exact, rel=0.02)


@pytest.mark.parametrize(
    "stages, bottleneck",
    [
        # One worker: the pool, whatever the cores do.
        ([Stage("bench", 10e-6), Stage("workers", 30e-6, 20e-6, threads=1)], "workers"),
        # A memcached slowed on purpose (a long delay while a worker waits): the pool.
        ([Stage("bench", 10e-6), Stage("workers", 5e-6, 500e-6, threads=4)], "workers"),
        # Threads enough and only processor time: the processors.
        ([Stage("bench", 10e-6), Stage("workers", 20e-6, 1e-6, threads=32)], "processors"),
    ],
)
def test_the_model_names_a_bottleneck_known_by_construction(stages, bottleneck):
    result = shared_cpu_network(stages, 16, cores=2)
    assert result.bottleneck == bottleneck
    assert 0 < result.cpu_utilization <= 1.0 + 1e-9


def test_bad_stages_are_refused():
    with pytest.raises(ValueError, match="needs a processor demand or a delay"):
        Stage("nothing", 0.0, 0.0)
    with pytest.raises(ValueError, match="threads must be at least 1"):
        Stage("none", 1e-6, threads=0)
    with pytest.raises(ValueError, match="unique"):
        shared_cpu_network([Stage("a", 1e-6), Stage("a", 1e-6)], 2, 2)
