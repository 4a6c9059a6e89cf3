"""Per-server load and queue-length series, against hand-computed shares and rates."""

import pandas as pd
import pytest

from memrelay_lab.analysis._per_server_load import plot_queue_length, queue_length_series, server_load


def test_server_load_hand_case():
    servers = pd.DataFrame(
        {
            "run_id": ["r1", "r1"],
            "server": [0, 1],
            "middleware_requests": [300, 100],
            "cmd_get": [250, 50],
            "cmd_set": [50, 50],
            "bytes_read": [1000, 500],
            "bytes_written": [4000, 2000],
            "test_time": [10, 10],
        }
    )
    load = server_load(servers)
    assert load["request_share"].tolist() == pytest.approx([0.75, 0.25])
    assert load["command_share"].tolist() == pytest.approx([0.75, 0.25])
    assert load["bytes_read_per_s"].tolist() == pytest.approx([100.0, 50.0])
    assert load["bytes_written_per_s"].tolist() == pytest.approx([400.0, 200.0])


def test_queue_length_series_keeps_each_middleware(tmp_path):
    windows = pd.DataFrame(
        {
            "run_id": ["r1"] * 5,
            "source": ["clients", "middleware-0", "middleware-0", "middleware", "middleware-1"],
            "t_s": [0, 1, 0, 0, 0],
            "queue_length": [None, 2.0, 1.0, 1.5, 3.0],
        }
    )
    series = queue_length_series(windows)
    assert series["source"].tolist() == ["middleware-0", "middleware-0", "middleware-1"]
    assert series["queue_length"].tolist() == [1.0, 2.0, 3.0]
    assert plot_queue_length(series, tmp_path / "q.png").stat().st_size > 0
