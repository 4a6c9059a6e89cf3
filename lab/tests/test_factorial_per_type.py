"""Seed 000 §6.4: the 50-50 workload's write and read response times as their own 2^k r designs
(Tables 17 and 19), found by `factorial_results` in a results summary sliced by workload."""

from types import SimpleNamespace

import pandas as pd
import pytest

from memrelay_lab.analysis import factorial_results

# Rows in sign-table order (A = servers 2/3 fastest, B = middlewares 1/2, C = workers 8/32).
TABLE_17_WRITES = [(11.66, 11.67, 11.53), (12.31, 12.93, 12.72), (8.82, 8.73, 8.78), (9.28, 9.34, 9.35),
                   (8.1, 8.44, 8.06), (8.6, 8.65, 8.88), (7.28, 7.05, 7.21), (7.73, 7.58, 7.81)]
TABLE_19_READS = [(11.49, 11.49, 11.34), (12.02, 12.64, 12.43), (8.44, 8.35, 8.39), (8.7, 8.77, 8.79),
                  (7.75, 8.01, 7.69), (7.98, 8.03, 8.17), (6.6, 6.37, 6.68), (6.85, 6.52, 6.86)]
TABLE_17_Q = [9.27, 0.33, -1.02, -1.32, -0.06, -0.07, 0.52, 0.06]
TABLE_19_Q = [8.76, 0.22, -1.16, -1.47, -0.08, -0.1, 0.51, 0.06]


def _summary():
    runs, table = [], []
    for workload in ("50-50", "write-only", "read-only"):
        for i in range(8):
            configuration = len(table)
            corner = {"servers": (2, 3)[i & 1], "middlewares": (1, 2)[i >> 1 & 1], "workers": (8, 32)[i >> 2 & 1]}
            table.append({**corner, "workload": workload, "configuration": configuration, "throughput": 1.0,
                          "repetitions": 3})
            for r in range(3):
                writes = TABLE_17_WRITES[i][r] if workload != "read-only" else float("nan")
                reads = TABLE_19_READS[i][r] if workload != "write-only" else float("nan")
                runs.append({**corner, "workload": workload, "configuration": configuration,
                             "throughput": 1000.0 + i + r, "response_ms": 10.0 + i + r,
                             "response_set_ms": writes, "response_get_ms": reads})
    return SimpleNamespace(swept=["servers", "middlewares", "workers", "workload"], level=0.95,
                           table=pd.DataFrame(table), runs=pd.DataFrame(runs))


def test_seed_000_tables_17_and_19_reads_and_writes_of_the_50_50_workload():
    analyses = factorial_results(_summary())
    writes = analyses["write response time (ms), workload=50-50"]
    reads = analyses["read response time (ms), workload=50-50"]
    assert [writes.effects[e] for e in writes.effect_names] == pytest.approx(TABLE_17_Q, abs=0.006)
    assert [reads.effects[e] for e in reads.effect_names] == pytest.approx(TABLE_19_Q, abs=0.006)
    # Tables 18 and 20: worker threads (C) explain 54.6 % and 56.34 % of the variation
    assert writes.variation_percent[writes.effect_names[3]] == pytest.approx(54.6, abs=0.1)
    assert reads.variation_percent[reads.effect_names[3]] == pytest.approx(56.34, abs=0.1)
    # the single-type workloads have no per-type designs (their response time is the type's)
    assert [label for label in analyses if "read response" in label or "write response" in label] == [
        "write response time (ms), workload=50-50", "read response time (ms), workload=50-50"]
