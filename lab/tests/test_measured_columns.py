"""Measured quantities are never configuration parameters (issue 33, `results._columns`).

conftest's shared real run (`loaders_results`: six load generators on three client machines on
loopback) at three populations: the load generators' own measures (``loaders``,
``loaders_start_spread_s``, ``loaders_overlap``) differ from configuration to configuration,
yet the three configurations form one group, and ``model predict --calibrate`` on the lowest population predicts the other
two. With those measures taken for parameters (the rule before issue 33, doctored back in here)
every configuration is a group of its own and nothing can be held out.
"""

from __future__ import annotations

import json

import pytest

from memrelay_lab.analysis import predict_configurations, predictions_frame
from memrelay_lab.cli import main
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


@pytest.fixture(scope="module")
def three_loaders(loaders_results):
    """conftest's shared run: three client machines (six load generators) at three populations."""
    return loaders_results


def test_three_load_generators_group_and_predict(three_loaders, capsys):
    summary = summarize(load(three_loaders))
    assert not set(LOADERS) & set(summary.config_columns)
    table = summary.pooled_table()
    assert sorted(table["clients"]) == [6, 12, 24] and (table["loaders"] == 6).all()
    # The measures do differ between configurations: as parameters they would split them.
    assert table["loaders_start_spread_s"].nunique() == 3
    frame = predictions_frame(predict_configurations(table, summary.config_columns, calibrate={"clients": [6]}))
    assert list(frame.sort_values("clients")["calibration"]) == [True, False, False]
    assert main(["model", "predict", str(three_loaders), "--calibrate", "clients=6"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [c["calibration"] for c in document["configurations"]].count(False) == 2
    # Doctored: the old rule, the loaders' measures among the parameters.
    with pytest.raises(ValueError, match="no configuration of a group is chosen"):
        predict_configurations(table, [*summary.config_columns, *LOADERS], calibrate={"clients": [6]})
