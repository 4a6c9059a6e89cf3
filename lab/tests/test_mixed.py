"""Gets and sets apart (analysis/_mixed.py) on the shared real experiment (50-50 workload),
against what each memrelay-bench instance reported itself."""

from __future__ import annotations

import copy
import json

import pytest

from memrelay_lab.analysis import mixed_workload_table
from memrelay_lab.results import load, summarize


@pytest.fixture(scope="module")
def summary(report_results):
    return summarize(load(report_results))


def test_types_add_up_to_the_whole(summary):
    frame = mixed_workload_table(summary)
    table = summary.table.set_index("configuration")
    for _, row in frame.iterrows():
        total = table.loc[row["configuration"]]
        parts = row["throughput_get"] + row["throughput_set"] + total.get("throughput_multiget", 0.0)
        assert parts == pytest.approx(total["throughput"], rel=1e-9)


def test_merged_percentiles_lie_between_the_instances_own(summary, report_results):
    """A quantile of a mixture lies between the quantiles of its parts: each bench instance's own
    p50/p90 per type (computed by memrelay-bench in Rust) bound the lab's merged figure."""
    frame = mixed_workload_table(summary).set_index("configuration")
    records = {r["id"]: r for r in summary.results.manifest["runs"]}
    for configuration, row in frame.iterrows():
        for kind in ("get", "set"):
            for name in ("p50", "p90"):
                own = []
                for run_id in summary.run_ids(int(configuration)):
                    for client in records[run_id]["files"]["clients"]:
                        bench = json.loads((report_results / client["json"]).read_text())
                        own.append(bench[kind]["latency_us"][name] / 1000)
                merged = row[f"response_{kind}_{name}_ms"]
                # HdrHistogram's 3 significant digits on either side.
                assert min(own) * 0.995 <= merged <= max(own) * 1.005, (configuration, kind, name, own, merged)


def test_a_workload_without_sets_has_no_table(summary):
    reads_only = copy.copy(summary)
    reads_only.table = summary.table.assign(throughput_set=0.0)
    assert mixed_workload_table(reads_only) is None
