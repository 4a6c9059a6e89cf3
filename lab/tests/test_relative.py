"""Relative differences against a base level (seed 001 §2, Tables 7 and 9), from throughputs made
so that the seed's percentages come out: x = 1000 at 3 servers without replication."""

import pandas as pd
import pytest

from memrelay_lab.analysis import relative_differences

# Table 7 (get throughput, none to half / none to full per server count) and Table 9 (3 to 5 /
# 3 to 7 per replication): consistent values built from the no-replication column of Table 9.
X_NONE = {3: 1000.0, 5: 1000.0 * (1 - 0.098), 7: 1000.0 * (1 - 0.194)}
TABLE_7 = {3: (-3.8, -6.5), 5: (-4.2, -7.4), 7: (-5.4, -9.5)}


def _table():
    rows = []
    for s, x in X_NONE.items():
        half, full = TABLE_7[s]
        for replication, value in (("none", x), ("half", x * (1 + half / 100)), ("full", x * (1 + full / 100))):
            rows.append({"servers": s, "replication": replication, "throughput_get": value})
    return pd.DataFrame(rows)


def test_seed_001_table_7_replication_against_none():
    frame = relative_differences(_table(), "replication", ["servers"])
    assert list(frame.columns) == ["measure", "fixed", "none to half", "none to full"]
    assert frame["fixed"].tolist() == ["servers=3", "servers=5", "servers=7"]
    assert frame[["none to half", "none to full"]].to_numpy().ravel().tolist() == pytest.approx(
        [v for s in (3, 5, 7) for v in TABLE_7[s]])


def test_seed_001_table_9_servers_against_three():
    frame = relative_differences(_table(), "servers", ["replication"]).set_index("fixed")
    assert frame.loc["replication=none", "3 to 5"] == pytest.approx(-9.8)
    assert frame.loc["replication=none", "3 to 7"] == pytest.approx(-19.4)
    # half at 7 servers over half at 3: (1 - 0.194)(1 - 0.054) / (1 - 0.038) - 1
    assert frame.loc["replication=half", "3 to 7"] == pytest.approx(100 * ((0.806 * 0.946) / 0.962 - 1))
