"""The experiment files of seeds 001 and 002 run the seeds' experiments as the seeds describe
them (servers, replication, clients, repetitions, thread counts), memrelay's shared pool sized
S x T to keep the seeds' gets in flight; and the report reads workers moving with the servers
as the seeds' fixed T."""

from pathlib import Path

import pandas as pd
import pytest

from memrelay_lab import expand, load_experiment
from memrelay_lab.results._summary import _swept

COPIES = {"none": "1", "full": "all"}
EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

# file: (seed's read threads per server T, or several for a sweep; servers; replication;
# clients in all; repetitions), from the seed's configuration table quoted in each header.
SEED_FILES = {
    "max-throughput.toml": ({8, 16, 24, 40}, {5}, {"none"}, None, 4),                 # 001 §1
    "effect-of-replication.toml": ({16}, {3, 5, 7}, {"none", "half", "full"}, {198}, 5),  # 001 §2
    "effect-of-writes.toml": ({16}, {3, 5, 7}, {"none", "full"}, {198}, 4),            # 001 §3
    "effect-of-writes-seed-002.toml": ({16}, {3, 5, 7}, {"full"}, {360}, 3),            # 002 §4-5
    "stability-trace.toml": ({16}, {3}, {"full"}, {192}, 1),                            # 001 appendix, 002 §1
}


@pytest.mark.parametrize("name", list(SEED_FILES))
def test_seed_files_keep_the_seeds_gets_in_flight(name):
    threads, servers, replication, clients, repetitions = SEED_FILES[name]
    experiment = load_experiment(EXPERIMENTS / name)
    configurations = expand(experiment)
    assert {c.workers % c.servers for c in configurations} == {0}, "workers = S x T"
    assert {c.workers // c.servers for c in configurations} == threads
    assert {c.servers for c in configurations} == servers
    # the expansion writes "none" as 1 copy and "full" as all servers
    assert {c.replication for c in configurations} == {COPIES.get(r, r) for r in replication}
    if clients is not None:
        assert {c.clients for c in configurations} == clients
    assert experiment.settings["repetitions"] == repetitions
    header = (EXPERIMENTS / name).read_text().split("\nname = ")[0]
    assert "Seed 00" in header and "S x T" in header


def test_seed_002_file_holds_table_5_and_the_2_2_3_design():
    configurations = expand(load_experiment(EXPERIMENTS / "effect-of-writes-seed-002.toml"))
    assert sorted((c.servers, c.workload) for c in configurations) == sorted(
        (s, w) for s in (3, 5, 7) for w in ("1:99", "5:95", "10:90"))
    quick = expand(load_experiment(EXPERIMENTS / "effect-of-writes-seed-002.toml", profile="quick"))
    assert sorted((c.servers, c.workload) for c in quick) == sorted(
        (s, w) for s in (3, 7) for w in ("1:99", "10:90"))


def test_workers_moving_with_the_servers_are_not_a_parameter_of_their_own():
    runs = pd.DataFrame({"configuration": [0, 1, 2, 3], "servers": [3, 3, 7, 7], "workers": [48, 48, 112, 112],
                         "workload": ["1:99", "10:90"] * 2})
    assert _swept(runs) == [p for p in _swept(runs) if p != "workers"] and "servers" in _swept(runs)
    # The check can fail: a pool that does not follow S x T is a parameter.
    doctored = runs.assign(workers=[48, 48, 64, 64])
    assert "workers" in _swept(doctored)


def test_seed_003_one_thread_run_and_seed_004_auxiliary_run():
    # Seed 003 §2.1, Figures 11-12: one machine, one instance, one thread, VC 1 to 8, read-only,
    # one server, no middleware.
    one = expand(load_experiment(EXPERIMENTS / "baseline-one-thread.toml"))
    assert [c.clients for c in one] == list(range(1, 9))
    assert {(c.servers, c.middlewares, c.workload) for c in one} == {(1, 0, "read-only")}
    # Seed 004 §4.2's auxiliary figure: write-only, two middlewares of 64 workers, one server
    # (its §3.2 baseline) against three (§4.1 full system).
    auxiliary = expand(load_experiment(EXPERIMENTS / "auxiliary-64-workers.toml"))
    assert {(c.middlewares, c.workers, c.workload) for c in auxiliary} == {(2, 64, "write-only")}
    assert {c.servers for c in auxiliary} == {1, 3}
