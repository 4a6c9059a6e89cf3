"""The measured environment: clock offsets put every host's times on the lab's clock, and the
report's overview shows hosts, links and offsets (or says that all roles shared one machine)."""

from __future__ import annotations

import json
import shutil

import pandas as pd
import pytest

from memrelay_lab import load
from memrelay_lab.report._machines_section import machines_overview

OFFSET_S = 1000.0


@pytest.fixture(scope="module")
def shifted(report_results, tmp_path_factory):
    """The shared experiment's folder with its middleware-0 moved to a host whose clock runs
    OFFSET_S ahead: its windows' times doctored by +OFFSET_S, as that host would have written them."""
    out = tmp_path_factory.mktemp("shifted") / "results"
    shutil.copytree(report_results, out)
    manifest = json.loads((out / "manifest.json").read_text())
    for record in manifest["runs"]:
        files = record["files"]["middlewares"][0]
        files["host"] = "ahead"
        path = out / files["windows"]
        windows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        path.write_text("".join(json.dumps({**w, "start_unix": w["start_unix"] + OFFSET_S}) + "\n" for w in windows))
    manifest["environment"] = {"single_machine": False, "links": [], "hosts": {
        "local": {"clock_offset_s": 0.0}, "ahead": {"clock_offset_s": OFFSET_S}}}
    (out / "manifest.json").write_text(json.dumps(manifest))
    return out


def middleware_rows(results):
    rows = results.runs[results.runs["source"] == "middleware-0"]
    return rows.sort_values("run_id").reset_index(drop=True)[["run_id", "throughput", "response_ms"]]


def test_the_clock_offset_puts_a_hosts_windows_back_on_the_lab_time_line(report_results, shifted):
    pd.testing.assert_frame_equal(middleware_rows(load(shifted)), middleware_rows(load(report_results)),
                                  rtol=1e-9)


def test_without_the_offset_the_shifted_windows_miss_the_kept_interval(report_results, shifted):
    """The check above can fail: the same doctored folder without the offset loses every window."""
    manifest = json.loads((shifted / "manifest.json").read_text())
    manifest["environment"]["hosts"]["ahead"]["clock_offset_s"] = 0.0
    (shifted / "manifest.json").write_text(json.dumps(manifest))
    try:
        rows = middleware_rows(load(shifted))
        assert not rows["throughput"].equals(middleware_rows(load(report_results))["throughput"])
    finally:
        manifest["environment"]["hosts"]["ahead"]["clock_offset_s"] = OFFSET_S
        (shifted / "manifest.json").write_text(json.dumps(manifest))


def test_the_overview_of_several_hosts_shows_hosts_links_and_offsets():
    manifest = {"environment": {"single_machine": False, "hosts": {
        "h1": {"address": "10.231.7.11", "roles": ["clients"], "cores": 2, "cpu_model": "Xeon",
               "clock_offset_s": 0.0012, "clock_rtt_s": 0.0004, "processes_visible_to_lab": True},
        "h2": {"address": "10.231.7.12", "roles": ["middlewares", "servers"], "cores": 2, "cpu_model": "Xeon",
               "clock_offset_s": -0.0005, "clock_rtt_s": 0.0002, "processes_visible_to_lab": True}},
        "links": [
            {"from": "h1", "to": "h2", "roles": "clients→middlewares", "rtt_min_ms": 0.5123, "rtt_median_ms": 0.61,
             "mbit_per_s": 94.27},
            {"from": "h2", "to": "h2", "roles": "middlewares→servers", "loopback": True}]}}
    text, tables = machines_overview(manifest)
    assert any("network namespaces or addresses of the lab's own machine" in t for t in text)
    assert not any("shared one machine" in t for t in text)
    hosts, links, bandwidth = (table.frame for table in tables)
    # seed 004's iperf3 table: the measured link in MB/s (no value size given: no values/s)
    assert bandwidth["MB/s"].tolist() == pytest.approx([94.27 / 8])
    assert hosts["clock offset (ms)"].tolist() == ["+1.200", "-0.500"]
    assert hosts["± (ms)"].tolist() == ["0.200", "0.100"]
    assert links.iloc[0]["round trip min (ms)"] == "0.512" and links.iloc[0]["bandwidth (Mbit/s)"] == "94.3"
    assert links.iloc[1]["round trip min (ms)"] == "loopback"


def test_a_single_machine_run_says_so():
    manifest = {"environment": {"single_machine": True, "links": [], "hosts": {
        "local": {"cores": 2, "cpu_model": "Xeon", "clock_offset_s": 0.0, "clock_rtt_s": 0.0}}}}
    text, tables = machines_overview(manifest)
    assert tables == [] and "All roles (servers, middlewares and clients) shared one machine, local (2 cores, Xeon)" \
        in text[0]
