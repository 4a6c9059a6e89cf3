"""The maximum-throughput configuration and the smallest reaching it (analysis/_max_throughput.py),
on a hand-made table whose answer is worked out by hand."""

from __future__ import annotations

import pandas as pd

from memrelay_lab.analysis import max_throughput


def table() -> pd.DataFrame:
    rows = [  # workers, clients, X, half width
        (8, 10, 30_000, 1_000),
        (8, 40, 35_000, 1_000),
        (16, 30, 41_000, 1_500),
        (24, 40, 42_000, 2_000),
        (24, 10, 37_000, 1_000),
        (40, 40, 41_500, 500),
    ]
    return pd.DataFrame(
        [{"configuration": i, "middlewares": 1, "workers": w, "clients": c, "throughput": x,
          "throughput_half_width": h, "response_ms": c / x * 1000, "response_ms_half_width": 0.01,
          "mw_throughput": x * 0.99, "mw_queue_ms": 0.2, "miss_rate": 0.0}
         for i, (w, c, x, h) in enumerate(rows)]
    )


def test_the_smallest_configuration_within_the_best_ones_interval():
    found = max_throughput(table())
    # Best: 42,000 ± 2,000, so anything whose interval reaches 40,000 is not significantly lower:
    # 16 workers at 30 clients (41,000 + 1,500) and 40 workers at 40 clients (41,500 + 500).
    assert (found.best["workers"], found.best["clients"]) == (24, 40)
    assert list(zip(found.candidates["workers"], found.candidates["clients"])) == [(16, 30), (24, 40), (40, 40)]
    # Fewest workers first (the middlewares are all one): 16 workers, 30 clients.
    assert (found.smallest["workers"], found.smallest["clients"]) == (16, 30)
    assert found.resources == ("workers", "clients")


def test_the_summary_is_the_seeds_table_for_the_chosen_configuration():
    found = max_throughput(table())
    summary = found.summary().set_index("measure")
    assert summary.loc["throughput (requests/s)", "clients"] == 41_000
    assert summary.loc["throughput (requests/s)", "middleware"] == 41_000 * 0.99
    assert summary.loc["throughput (requests/s)", "clients_half_width"] == 1_500
    assert summary.loc["time in queue (ms)", "middleware"] == 0.2
    assert "queue length" not in summary.index  # not measured in this table


def test_one_configuration_has_nothing_to_choose_from():
    assert max_throughput(table().head(1)) is None
