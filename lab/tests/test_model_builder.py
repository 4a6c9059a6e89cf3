"""The model builder: demands from measurements, MVA network, M/M/1 and M/M/m tables.

Numbers are checked against hand computations on a small fixture table, against an
independent product-form solution (normalizing constants by enumerating the states),
against Little's law on the outputs, and, on the real quick experiment, against the
middleware's own per-request log (requests.csv) and the rows of `load()`.
"""

from __future__ import annotations

import itertools
import json
import re
import math
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from memrelay_lab import load, measured_demands, mm_tables, models_from_summary, network_model, summarize
from memrelay_lab.analysis import NetworkModelError, build_centers

LAB = [sys.executable, "-m", "memrelay_lab.cli"]

# One configuration, per-request times in ms: R_mw = 0.05 (net) + 0.08 (queue) + 0.02
# (worker's own) + 0.15 (servers) = 0.30; the clients see 0.50, so the network is 0.20.
FIXTURE = dict(
    servers=1,
    middlewares=2,
    workers=2,
    clients=4,
    throughput=9000.0,
    response_ms=0.50,
    mw_throughput=9000.0,
    mw_response_ms=0.30,
    mw_queue_ms=0.08,
    mw_service_ms=0.15,
    mw_queue_length=0.3,
    mw_net_ms=0.05,
    mw_worker_ms=0.02,
)
COLUMNS = ["servers", "middlewares", "workers", "clients"]


def fixture_table(**changes) -> pd.DataFrame:
    return pd.DataFrame([{**FIXTURE, **changes}])


def test_demands_by_hand():
    demands = measured_demands(fixture_table().iloc[0])
    assert demands.net_thread == pytest.approx(0.05e-3)
    assert demands.workers_own == pytest.approx(0.02e-3)
    assert demands.servers == pytest.approx(0.15e-3)
    assert demands.network == pytest.approx(0.20e-3)
    assert (demands.workers, demands.population) == (2, 2)  # 4 clients over 2 middlewares
    # Without the per-request split, all of R - T_queue - T_service goes to the net thread.
    unsplit = measured_demands(fixture_table(mw_net_ms=math.nan, mw_worker_ms=math.nan).iloc[0])
    assert unsplit.net_thread == pytest.approx(0.07e-3) and unsplit.workers_own == 0.0
    nested = {c.name: (c.kind.value, c.demand, c.servers) for c in build_centers(demands)}
    assert nested == {
        "net-thread": ("queue", pytest.approx(0.05e-3), 1),
        "workers": ("multi", pytest.approx(0.17e-3), 2),
        "network": ("delay", pytest.approx(0.20e-3), 1),
    }
    seed = {c.name: c.demand for c in build_centers(demands, "seed")}
    assert seed == {"net-thread": pytest.approx(0.05e-3), "workers": pytest.approx(0.02e-3),
                    "servers": pytest.approx(0.15e-3), "network": pytest.approx(0.20e-3)}


def test_mva_at_two_clients_per_middleware_by_hand():
    model = network_model(fixture_table(), config_columns=COLUMNS)
    row = model.comparison.iloc[0]
    # n = 1: R = 0.05 + 0.17 + 0.20 ms; n = 2: the net thread holds the other job with
    # probability X(1) D_net, the two workers never queue (2 jobs, 2 workers).
    x1 = 1 / 0.42e-3
    r_net = 0.05 * (1 + x1 * 0.05e-3)
    x2 = 2 / ((r_net + 0.17 + 0.20) * 1e-3)
    assert row["throughput_predicted"] == pytest.approx(x2)
    assert row["system_throughput_predicted"] == pytest.approx(2 * x2)
    assert row["net_thread_response_ms_predicted"] == pytest.approx(r_net)
    assert row["queue_wait_ms_predicted"] == pytest.approx(0.0, abs=1e-12)
    assert row["servers_response_ms_predicted"] == pytest.approx(0.15)
    assert row["response_ms_predicted"] == pytest.approx(r_net + 0.37)
    assert row["net_thread_utilization_predicted"] == pytest.approx(x2 * 0.05e-3)
    assert row["workers_utilization_predicted"] == pytest.approx(x2 * 0.17e-3 / 2)
    # Measured side, straight from the table.
    assert row["throughput_measured"] == 4500.0 and row["queue_wait_ms_measured"] == 0.08
    assert row["network_response_ms_measured"] == pytest.approx(0.20)
    assert row["response_ms_measured"] == 0.50 and row["queue_length_measured"] == 0.3


def product_form_throughput(demands: dict[str, float], kinds: dict[str, tuple[str, int]], n: int) -> float:
    """X(n) = G(n-1) / G(n), G by enumerating every placement of n jobs (BCMP product form)."""

    def factor(name: str, jobs: int) -> float:
        kind, servers = kinds[name]
        d = demands[name]
        if kind == "queue":
            return d**jobs
        if kind == "delay":
            return d**jobs / math.factorial(jobs)
        rate = math.prod(min(j, servers) for j in range(1, jobs + 1))
        return d**jobs / rate

    def g(total: int) -> float:
        names = list(demands)
        value = 0.0
        for split in itertools.product(range(total + 1), repeat=len(names)):
            if sum(split) == total:
                value += math.prod(factor(name, jobs) for name, jobs in zip(names, split))
        return value

    return g(n - 1) / g(n)


@pytest.mark.parametrize("variant", ["nested", "seed"])
def test_mva_matches_the_product_form_with_queueing_at_the_workers(variant):
    # 12 clients over 2 middlewares: 6 jobs for 2 workers, so the pool queues.
    table = fixture_table(clients=12)
    model = network_model(table, variant=variant, config_columns=COLUMNS)
    centers = build_centers(measured_demands(table.iloc[0]), variant)
    demands = {c.name: c.demand for c in centers}
    kinds = {c.name: (c.kind.value, c.servers) for c in centers}
    expected = product_form_throughput(demands, kinds, 6)
    assert model.comparison.iloc[0]["throughput_predicted"] == pytest.approx(expected, rel=1e-9)


def test_seed_variant_over_predicts_when_workers_wait_for_the_servers():
    table = fixture_table(clients=12)
    nested = network_model(table, config_columns=COLUMNS).comparison.iloc[0]
    seed = network_model(table, variant="seed", config_columns=COLUMNS).comparison.iloc[0]
    assert seed["throughput_predicted"] > nested["throughput_predicted"]
    assert nested["bottleneck"] == "workers"  # 2 workers x 0.17 ms against a 0.05 ms net thread


def test_lowest_demands_predict_the_other_populations():
    table = pd.concat([fixture_table(), fixture_table(clients=12, mw_service_ms=0.40, mw_response_ms=0.55)])
    each = network_model(table, config_columns=COLUMNS)
    lowest = network_model(table, demands="lowest", config_columns=COLUMNS)
    assert list(lowest.demands["servers_ms"]) == pytest.approx([0.15, 0.15])
    assert list(each.demands["servers_ms"]) == pytest.approx([0.15, 0.40])
    assert list(lowest.demands["population"]) == [2, 6]


def test_evented_and_baseline_configurations_are_not_modelled():
    table = pd.concat([fixture_table(engine="evented"), fixture_table(middlewares=0, engine=None)])
    with pytest.raises(NetworkModelError):
        network_model(table)
    both = pd.concat([table, fixture_table(engine="pool")])
    assert len(network_model(both, config_columns=COLUMNS).comparison) == 1


def test_mm1_and_mmm_by_hand():
    tables = mm_tables(fixture_table(), config_columns=COLUMNS)
    row = tables.comparison.iloc[0]
    lam = 9000.0 / 2  # per middleware
    s = (0.30 - 0.08) * 1e-3  # everything outside the request queue
    m = 2
    rho = lam * s / m
    assert row["arrival_rate"] == lam
    assert row["service_rate_per_worker"] == pytest.approx(1 / s)
    assert row["traffic_intensity"] == pytest.approx(rho)
    assert row["response_ms_mm1"] == pytest.approx((s / m) / (1 - rho) * 1e3)
    assert row["waiting_time_ms_mm1"] == pytest.approx(rho * (s / m) / (1 - rho) * 1e3)
    # M/M/2 by hand: p0 = 1 / (1 + 2 rho + (2 rho)^2 / (2 (1 - rho))), Erlang C = p0 (2 rho)^2 / (2 (1 - rho)).
    p0 = 1 / (1 + 2 * rho + (2 * rho) ** 2 / (2 * (1 - rho)))
    erlang_c = p0 * (2 * rho) ** 2 / (2 * (1 - rho))
    assert row["response_ms_mmm"] == pytest.approx(s * (1 + erlang_c / (m * (1 - rho))) * 1e3)
    assert row["queue_length_mmm"] == pytest.approx(rho * erlang_c / (1 - rho))
    assert row["jobs_in_system_measured"] == pytest.approx(lam * 0.30e-3)  # Little's law
    wide = tables.wide("mmm")
    assert wide.loc["Number of servers m"].iloc[0] == 2
    # Seed 000's rule with its inputs: λ and μ are totals over both middlewares (the peak 12,000
    # requests/s of the group), μ / m = 6,000 per worker; rho = 1 at the peak (one mean, no
    # highest repetition given).
    peak = mm_tables(pd.concat([fixture_table(), fixture_table(clients=8, mw_throughput=12000.0)]),
                     service_rate="peak", config_columns=COLUMNS).comparison
    assert list(peak["arrival_rate"]) == [9000.0, 12000.0]
    assert list(peak["service_rate_per_worker"]) == pytest.approx([6000.0, 6000.0])
    assert list(peak["stable"]) == [True, False]
    assert math.isnan(peak["response_ms_mmm"].iloc[1])


# ---------------------------------------------------------------- on the real experiment


@pytest.fixture(scope="module")
def results(report_results):
    return report_results


def test_littles_law_holds_on_the_model_outputs(results):
    network, _ = models_from_summary(summarize(load(results)))
    summary = summarize(load(results))
    for _, row in network.comparison.iterrows():
        n = row["population"]
        x = row["throughput_predicted"]
        r = row["response_ms_predicted"] * 1e-3
        assert n == pytest.approx(x * r, rel=1e-9)  # Z = 0: N = X R
        parts = (row["net_thread_response_ms_predicted"] + row["queue_wait_ms_predicted"]
                 + row["workers_own_ms_predicted"] + row["servers_response_ms_predicted"]
                 + row["network_response_ms_predicted"])
        assert parts == pytest.approx(row["response_ms_predicted"], rel=1e-9)
        assert 0 <= row["workers_utilization_predicted"] <= 1 and 0 <= row["net_thread_utilization_predicted"] <= 1
        assert row["bottleneck"] in ("net-thread", "workers")
    assert len(network.comparison) == len(summary.table) == 4


def test_demands_agree_with_the_raw_measurements(results):
    loaded = load(results)
    network, _ = models_from_summary(summarize(load(results)))
    runs = loaded.runs
    for _, demand in network.demands.iterrows():
        mine = runs[(runs["clients"] == demand["clients"]) & (runs["multiget"] == demand["multiget"])]
        clients, middleware = mine[mine["source"] == "clients"], mine[mine["source"] == "middleware"]
        # Times over the pooled requests of the repetitions: weighted by request count.
        weights = middleware["count"].to_numpy()
        assert demand["servers_ms"] == pytest.approx(np.average(middleware["service_ms"], weights=weights))
        network_delay = np.average(clients["response_ms"], weights=clients["count"]) - np.average(
            middleware["response_ms"], weights=weights
        )
        assert demand["network_ms"] == pytest.approx(max(network_delay, 0.0))
        assert demand["population"] == demand["clients"] / 2  # two middlewares
        # The split comes from requests.csv: per request, net + worker's own time is
        # response - queue - service, which the log also records (each time truncated to
        # whole microseconds on its own, so the two agree within a couple of µs).
        residuals = []
        for run_id in middleware["run_id"]:
            record = next(r for r in loaded.manifest["runs"] if r["id"] == run_id)
            benches = [json.loads((results / c["json"]).read_text()) for c in record["files"]["clients"]]
            start = min(bench["start_unix_s"] for bench in benches)
            per_run = []
            for files in record["files"]["middlewares"]:
                summary_path = results / files["summary"]
                log = pd.read_csv(summary_path.parent / "requests.csv")
                started = json.loads(summary_path.read_text())["started_unix"]
                t = log["arrival_us"] / 1e6 + started - start
                log = log[(t >= 0) & (t <= 2)]
                per_run.append(log["response_us"] - log["queue_us"] - log["service_us"])
            residuals.append(pd.concat(per_run).mean() / 1e3)
        residual = np.average(residuals, weights=weights)
        assert demand["net_thread_ms"] + demand["workers_own_ms"] == pytest.approx(residual, abs=2e-3)


def test_cli_model_build(results):
    done = subprocess.run([*LAB, "model", "build", str(results)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    configurations = document["network"]["configurations"]
    assert len(configurations) == 4
    for configuration in configurations:
        assert set(configuration["demands_ms"]) == {
            "net_thread_ms", "workers_own_ms", "servers_ms", "network_ms", "workers_demand_ms"
        }
        assert configuration["bottleneck"] in ("net-thread", "workers")
        assert configuration["predicted"]["throughput"] > 0 and configuration["measured"]["throughput"] > 0
    assert document["mm"]["service_rate"] == "service-time" and len(document["mm"]["comparison"]) == 4
    table = subprocess.run([*LAB, "model", "build", str(results), "--variant", "seed", "--format", "table"],
                           capture_output=True, text=True)
    assert table.returncode == 0, table.stderr
    assert ": bottleneck " in table.stdout and "M/M/1 and M/M/m" in table.stdout
    assert "clients=2, multiget=1, middlewares=2, workers=4" in table.stdout  # headers name their parameters
    assert max(len(line) for line in table.stdout.splitlines()) <= 100
    assert not re.search(r"\de[+]", table.stdout)  # no 1.753e+04
