"""Expansion: the cross product, named combinations, baselines, run order, and placement of the
load generators over middlewares and servers (seed 000 §2.2, §3.2, §4)."""

import itertools

from memrelay_lab import expand, parse_experiment, placement, plan

BASE = """\
servers = [2, 3]
client_machines = 3
instances_per_machine = 2
clients_per_thread = [1, 8, 32]
workload = ["write-only", "read-only", "50-50"]
middlewares = [1, 2]
workers = [8, 32]
repetitions = 3
test_time = 70
warmup = 5
cooldown = 5
"""


def test_cross_product_has_every_combination_once():
    configs = expand(parse_experiment(BASE))
    assert len(configs) == 2 * 3 * 3 * 2 * 2
    seen = {(c.servers, c.clients_per_thread, c.workload, c.middlewares, c.workers) for c in configs}
    expected = set(itertools.product([2, 3], [1, 8, 32], ["write-only", "read-only", "50-50"], [1, 2], [8, 32]))
    assert seen == expected
    assert [c.index for c in configs] == list(range(len(configs)))
    # Virtual clients per thread varies fastest.
    assert [c.clients_per_thread for c in configs[:3]] == [1, 8, 32]


def test_derived_columns():
    config = expand(parse_experiment(BASE))[0]
    assert config.clients == 3 * 2 * 1 * config.clients_per_thread  # NumClients = NumMemtier x CT x VC
    assert (config.sets, config.gets, config.ratio) == (1, 0, "1:0")
    assert config.write_fraction == 1.0
    assert config.replication == "all" and config.replicas == config.servers
    assert config.populate is False  # write-only: nothing to read
    read_only = next(c for c in expand(parse_experiment(BASE)) if c.workload == "read-only")
    assert read_only.populate is True


def test_runs_are_repetition_major():
    runs = plan(parse_experiment(BASE))
    n = len(expand(parse_experiment(BASE)))
    assert len(runs) == 3 * n
    assert [r.repetition for r in runs[: n + 1]] == [1] * n + [2]
    assert runs[0].id == "c000-r1" and runs[n].id == "c000-r2"
    assert len({r.id for r in runs}) == len(runs)


def test_baselines_drop_middleware_keys_and_duplicates():
    experiment = parse_experiment(BASE.replace("middlewares = [1, 2]", "middlewares = [0, 1]"))
    configs = expand(experiment)
    baselines = [c for c in configs if c.middlewares == 0]
    # workers [8, 32] mean nothing without a middleware: one baseline per (servers, VC, workload).
    assert len(baselines) == 2 * 3 * 3
    assert all(c.workers is None and c.engine is None and c.replication is None for c in baselines)
    assert len([c for c in configs if c.middlewares == 1]) == 2 * 3 * 3 * 2


def test_named_combinations_replace_the_cross_product():
    # A 2^(3-1) fractional design (I = ABC): four of the eight corners.
    text = BASE.replace("servers = [2, 3]", "servers = 2") + """
combinations = [
  { servers = 2, middlewares = 1, workers = 32 },
  { servers = 3, middlewares = 1, workers = 8 },
  { servers = 2, middlewares = 2, workers = 8 },
  { servers = 3, middlewares = 2, workers = 32 },
]
"""
    configs = expand(parse_experiment(text))
    corners = [(c.servers, c.middlewares, c.workers) for c in configs]
    assert sorted(set(corners)) == sorted([(2, 1, 32), (3, 1, 8), (2, 2, 8), (3, 2, 32)])
    # The keys the blocks do not set are still crossed (3 VCs x 3 workloads per corner).
    assert len(configs) == 4 * 3 * 3
    assert [c.block for c in configs[:1]] == [0] and configs[-1].block == 3


def test_combinations_may_hold_lists_and_leave_required_keys_to_blocks():
    text = """\
combinations = [
  { servers = 1, client_machines = 3, instances_per_machine = 1, threads_per_instance = 2 },
  { servers = 2, client_machines = 1, instances_per_machine = 2, clients_per_thread = [1, 2] },
]
clients_per_thread = [4, 8, 16]
workload = ["write-only", "read-only"]
middlewares = 0
test_time = 10
"""
    configs = expand(parse_experiment(text))
    first = [c for c in configs if c.block == 0]
    second = [c for c in configs if c.block == 1]
    assert len(first) == 3 * 2 and {c.clients_per_thread for c in first} == {4, 8, 16}
    assert len(second) == 2 * 2 and {c.clients_per_thread for c in second} == {1, 2}
    assert {c.clients for c in first} == {3 * 2 * vc for vc in (4, 8, 16)}


def test_ketama_replication_labels_resolve_per_server_count():
    text = BASE.replace("workers = [8, 32]", 'workers = 16\ndistribution = "ketama"\nreplication = ["none", "half", '
                        '"full"]').replace("servers = [2, 3]", "servers = [3, 5, 7]")
    configs = expand(parse_experiment(text))
    replicas = {(c.servers, c.replication): c.replicas for c in configs}
    # Seed 001 §2: half of 3, 5, 7 servers is 2, 3, 4 copies; full is all of them.
    assert replicas[(3, "1")] == 1 and replicas[(3, "half")] == 2 and replicas[(5, "half")] == 3
    assert replicas[(7, "half")] == 4 and replicas[(7, "all")] == 7


def config_with(**values):
    lines = {"servers": 1, "clients_per_thread": 1, "middlewares": 1, "test_time": 10, **values}
    return expand(parse_experiment("\n".join(f"{k} = {v}" for k, v in lines.items())))[0]


def test_placement_two_middlewares_one_instance_each_per_machine():
    # Seed 000 §4: 3 machines x 2 instances, 2 middlewares: each machine runs one instance per middleware.
    config = config_with(servers=3, client_machines=3, instances_per_machine=2, middlewares=2)
    instances = placement(config)
    assert len(instances) == 6
    for machine in range(3):
        mine = [i for i in instances if i.machine == machine]
        assert sorted(i.targets[0] for i in mine) == [0, 1]
        assert all(i.target_kind == "middleware" for i in mine)


def test_placement_spreads_single_instances_over_middlewares():
    config = config_with(client_machines=4, instances_per_machine=1, middlewares=2)
    assert [i.targets for i in placement(config)] == [(0,), (1,), (0,), (1,)]


def test_placement_without_middleware():
    # Seed 000 §2.2: one machine, two instances, two servers: one server each.
    config = config_with(servers=2, client_machines=1, instances_per_machine=2, middlewares=0)
    assert [(i.target_kind, i.targets) for i in placement(config)] == [("server", (0,)), ("server", (1,))]
    # Seed 000 §2.1: three machines, one server: all on it.
    config = config_with(servers=1, client_machines=3, middlewares=0)
    assert [i.targets for i in placement(config)] == [(0,), (0,), (0,)]
    # Fewer instances than servers: every server gets connections.
    config = config_with(servers=3, client_machines=1, instances_per_machine=2, middlewares=0)
    assert [i.targets for i in placement(config)] == [(0, 2), (1,)]


def test_protocol_is_a_factor_and_reaches_the_bench_command_line(tmp_path):
    from memrelay_lab.experiment._processes import bench_command

    configs = expand(parse_experiment(BASE + 'protocol = ["text", "meta"]\n'))
    assert {c.protocol for c in configs} == {"text", "meta"}
    assert len(configs) == 2 * len(expand(parse_experiment(BASE)))
    for config in configs:
        argv = bench_command("memrelay-bench", config, ["127.0.0.1:1"], 1, tmp_path / "out.json")
        assert argv[argv.index("--protocol") + 1] == config.protocol
    meta = next(c for c in configs if c.protocol == "meta")
    assert "meta" in meta.label()
    # The default is the text protocol.
    assert {c.protocol for c in expand(parse_experiment(BASE))} == {"text"}
