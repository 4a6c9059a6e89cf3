"""Measured quantities are never configuration parameters (issue 33, `results._columns`).

A real run of three load generators (three client machines on loopback) at three populations:
the load generators' own measures (``loaders``, ``loaders_start_spread_s``,
``loaders_overlap``) differ from configuration to configuration, yet the three configurations
form one group, and ``model predict --calibrate`` on the lowest population predicts the other
two. With those measures taken for parameters (the rule before issue 33, doctored back in here)
every configuration is a group of its own and nothing can be held out.
"""

from __future__ import annotations

import json
import os

import pytest

from memrelay_lab import parse_experiment, run_experiment
from memrelay_lab.analysis import predict_configurations, predictions_frame
from memrelay_lab.cli import main
from memrelay_lab.experiment import BinaryNotFound, find_binaries
from memrelay_lab.results import configuration_columns, is_measure, load, summarize

LOADERS = ("loaders", "loaders_start_spread_s", "loaders_overlap")


def test_the_rule_takes_parameters_from_the_manifest_whatever_varies():
    manifest = {"configurations": [{"index": 0, "clients": 3, "workers": 2}, {"index": 1, "clients": 6, "workers": 2}]}
    columns = ["experiment", "run_id", "clients", "workers", "loaders_start_spread_s", "throughput", "new_measure"]
    assert configuration_columns(columns, manifest) == ["clients", "workers"]
    # Without a manifest: by name.
    assert configuration_columns(columns) == ["clients", "workers", "new_measure"]
    assert all(is_measure(c) for c in (*LOADERS, "cpu_net_us", "link:m1:rate_mbit", "mw_queue_ms", "cores"))
    assert not any(is_measure(c) for c in ("clients", "workers", "keys", "key_pattern", "write_fraction"))


SPEC = """\
name = "three-loaders"
servers = 1
client_machines = 3
instances_per_machine = 1
threads_per_instance = 1
clients_per_thread = [1, 2, 4]
workload = "read-only"
middlewares = 1
workers = 4
repetitions = 1
test_time = 2
warmup = 0
cooldown = 0
keys = 500
value_size = 100
"""


@pytest.fixture(scope="module")
def three_loaders(tmp_path_factory):
    try:
        binaries = find_binaries()
    except BinaryNotFound as missing:
        pytest.skip(f"needs the programs: {missing}")
    out = tmp_path_factory.mktemp("three-loaders") / "results"
    with open(os.devnull, "w") as quiet:
        summary = run_experiment(parse_experiment(SPEC, source="three-loaders.toml"), out, binaries=binaries,
                                 progress=quiet, handle_signals=False)
    assert summary.ok, summary.failures
    return out


def test_three_load_generators_group_and_predict(three_loaders, capsys):
    summary = summarize(load(three_loaders))
    assert not set(LOADERS) & set(summary.config_columns)
    table = summary.pooled_table()
    assert sorted(table["clients"]) == [3, 6, 12] and (table["loaders"] == 3).all()
    # The measures do differ between configurations: as parameters they would split them.
    assert table["loaders_start_spread_s"].nunique() == 3
    frame = predictions_frame(predict_configurations(table, summary.config_columns, calibrate={"clients": [3]}))
    assert list(frame.sort_values("clients")["calibration"]) == [True, False, False]
    assert main(["model", "predict", str(three_loaders), "--calibrate", "clients=3"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [c["calibration"] for c in document["configurations"]].count(False) == 2
    # Doctored: the old rule, the loaders' measures among the parameters.
    with pytest.raises(ValueError, match="no configuration of a group is chosen"):
        predict_configurations(table, [*summary.config_columns, *LOADERS], calibrate={"clients": [3]})
