"""Per-server load and queue-length series, against hand-computed shares and rates."""

import pandas as pd
import pytest

from memrelay_lab.analysis import process_utilization, queue_length_series, server_demands, server_load


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


def test_queue_length_series_keeps_each_middleware():
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


def _processes():
    return pd.DataFrame({
        "run_id": ["r1", "r1", "r1", "r2", "r2", "r2"],
        "configuration": [0] * 6,
        "clients": [8] * 6,
        "process": ["server-0", "server-1", "middleware-0"] * 2,
        "role": ["memcached", "memcached", "memrelay"] * 2,
        "cpu_utilization": [0.2, 0.1, 0.9, 0.4, 0.1, 0.7],
        "received_bytes_per_s": [1e6, 2e6, 3e6, 3e6, 2e6, 1e6],
        "sent_bytes_per_s": [5e5] * 6,
    })


def test_process_utilization_means_over_repetitions():
    frame = process_utilization(_processes(), ["clients"])
    assert frame["process"].tolist() == ["middleware-0", "server-0", "server-1"]  # memrelay before memcached
    assert frame["cpu_utilization"].tolist() == pytest.approx([0.8, 0.3, 0.1])
    assert frame["received_bytes_per_s"].tolist() == pytest.approx([2e6, 2e6, 2e6])
    assert process_utilization(pd.DataFrame(), ["clients"]) is None


def test_server_demands_by_the_utilization_law():
    # Run r1: X = 1000/s, 2000 client requests; server 0 got 1500 requests at 0.2 cores:
    # V = 0.75, D = 0.2 / 1000 s = 200 µs, S = D / V = 266.7 µs. Run r2: X = 2000/s, server 0
    # 0.4 cores: D = 200 µs again. Server 1: V = 0.25, D = 100 µs (r1) and 50 µs (r2).
    servers = pd.DataFrame({
        "run_id": ["r1", "r1", "r2", "r2"], "configuration": [0] * 4, "clients": [8] * 4,
        "server": [0, 1, 0, 1], "middleware_requests": [1500, 500, 3000, 1000],
    })
    runs = pd.DataFrame({"run_id": ["r1", "r2", "r1"], "source": ["clients", "clients", "middleware"],
                         "throughput": [1000.0, 2000.0, 999.0], "count_total": [2000, 4000, 2000]})
    frame = server_demands(servers, _processes(), runs, ["clients"]).set_index("server")
    assert frame.loc[0, "visits"] == pytest.approx(0.75)
    assert frame.loc[0, "demand_us"] == pytest.approx(200.0)
    assert frame.loc[0, "service_us"] == pytest.approx(200.0 / 0.75)
    assert frame.loc[1, "demand_us"] == pytest.approx(75.0)
    assert frame.loc[0, "throughput_bound"] == pytest.approx(5000.0)  # 1 / 200 µs
