"""`memrelay-lab report` on a real quick experiment (the `report_results` fixture of conftest.py).

What the checks compare against: the programs' own outputs (bench JSON counts and
percentiles, memrelay's summary.json percentiles), scipy's t distribution, sums done here
from the per-run rows, and a real headless browser that opens report.html.
"""

from __future__ import annotations

import base64
import json
import math
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from memrelay_lab import (
    HdrHistogram,
    Histogram,
    factorial_factors,
    interactive_law_table,
    load,
    merged_client_hdr,
    summarize,
)
from memrelay_lab.report import _plots as plots

LAB = [sys.executable, "-m", "memrelay_lab.cli"]
FIGURES = {
    "throughput",
    "response_time",
    "throughput_get",
    "throughput_set",
    "time_means",
    "time_breakdown",
    "percentiles_clients",
    "percentiles_middleware",
    "histograms",
    "keys_per_second",
    "interactive_law",
    "factorial_variation",
    "mva",
    "predictions_curves",
    "mixed_workload",
    "time_histograms",
    "time_percentiles",
    "process_utilization",
    "queue_length",
    "extreme_residuals_throughput",
    "extreme_residuals_response_ms",
}
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def results(report_results):
    return report_results


@pytest.fixture(scope="module")
def report(results, tmp_path_factory):
    """The report written by the CLI, as a user runs it; (out dir, stdout, wall seconds)."""
    out = tmp_path_factory.mktemp("report") / "report"
    started = time.perf_counter()
    done = subprocess.run([*LAB, "report", str(results), "--out", str(out)], capture_output=True, text=True)
    wall = time.perf_counter() - started
    assert done.returncode == 0, done.stderr
    print(f"\nreport wall time: {wall:.1f} s")
    return out, done.stdout, wall


@pytest.fixture(scope="module")
def loaded(results):
    return load(results)


def test_cli_writes_html_markdown_figures_and_csv(report):
    out, stdout, _ = report
    assert f"report in {out / 'report.html'}" in stdout
    for name in FIGURES:
        png = (out / "figures" / f"{name}.png").read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n"), name
    assert {p.stem for p in (out / "figures").glob("*.png")} == FIGURES
    tables = {p.stem for p in (out / "tables").glob("*.csv")}
    assert {
        "summary",
        "runs",
        "percentiles",
        "interactive_law",
        "factorial_throughput_signs",
        "factorial_throughput_variation",
        "factorial_response_time_effects",
        "mva_demands",
        "mva_comparison",
        "mm_comparison",
        "mm1",
        "mmm",
        "mm_comparison_peak",
        "mm1_peak",
        "mmm_peak",
        "server_network",
        "response_time_statistics",
        "max_throughput_tables_3_to_5",
        "time_distributions_every_configuration",
    } <= tables
    for name in tables:
        assert not pd.read_csv(out / "tables" / f"{name}.csv").empty, name
    markdown = (out / "report.md").read_text()
    for reference in re.findall(r"\]\((figures/[^)]+)\)", markdown):
        assert (out / reference).is_file(), reference
    for reference in re.findall(r"`(tables/[^`]+\.csv)`", markdown):
        assert (out / reference).is_file(), reference
    for heading in ("Throughput and response time", "Interactive response-time law", "2^k r factorial design",
                    "Queueing models", "Percentiles and histograms", "Values read per second"):
        assert f"## {heading}" in markdown
    # A run on this machine alone says so in its overview.
    assert "All roles (servers, middlewares and clients) shared one machine" in markdown


def test_the_report_is_readable(report):
    """Narrow tables, units in the numbers, a warning beside every wide interval."""
    out, _, _ = report
    markdown = (out / "report.md").read_text()
    assert not re.search(r"\de\+\d", markdown)  # never 1.753e+04
    widths = [line.count(" | ") + 1 for line in markdown.splitlines() if line.startswith("| ")]
    assert max(widths) <= 12, max(widths)
    summary = pd.read_csv(out / "tables" / "summary.csv")
    rows = [line for line in markdown.splitlines() if line.startswith("| ") and " ± " in line]
    # The shared experiment has 2 repetitions per configuration: each of its throughput cells shows
    # "mean ± half width", marked when the half width is above 10 % of the mean (computed here).
    for _, row in summary.iterrows():
        mean, half = row["throughput"], row["throughput_half_width"]
        cell = f"{mean:,.0f} ± " + (f"{half:,.0f}" if half >= 100 else f"{half:,.1f}")  # rates: 0 decimals from 100
        expected = cell + (f" ⚠ ±{half / mean:.0%}" if half > 0.10 * mean else "")
        assert any(f"| {expected} |" in line for line in rows), expected
    assert "M/M/m model" in markdown and "| metric | clients=2, multiget=1 |" in markdown


def test_html_is_self_contained(report):
    out, _, _ = report
    page = (out / "report.html").read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//|file:)""", page, re.I)
    assert "<link" not in page and "@import" not in page and "url(" not in page
    images = re.findall(r'<img [^>]*src="data:image/png;base64,([^"]+)"', page)
    assert len(images) == len(FIGURES)
    inlined = {base64.b64decode(data) for data in images}
    assert inlined == {(out / "figures" / f"{name}.png").read_bytes() for name in FIGURES}


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail(
        "chromium is missing: the report test opens report.html in a headless browser; "
        "install it with `WITH_CHROMIUM=1 make deps` (Debian's chromium package)"
    )


def _images_loaded(page: Path, profile: Path) -> str:
    done = subprocess.run(
        [
            _chromium(),
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            "--virtual-time-budget=10000",
            "--dump-dom",
            page.resolve().as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = re.search(r'data-images-loaded="([^"]*)"', done.stdout)
    assert found, f"no DOM from chromium (status {done.returncode}): {done.stderr[-500:]}"
    return found.group(1)


def test_a_real_browser_loads_every_image(report, tmp_path):
    out, _, _ = report
    assert _images_loaded(out / "report.html", tmp_path / "profile") == f"{len(FIGURES)}/{len(FIGURES)}"
    # The check sees a broken image: the same page with one PNG's bytes damaged.
    broken = out / "broken.html"
    page = (out / "report.html").read_text()
    broken.write_text(page.replace("data:image/png;base64,iVBOR", "data:image/png;base64,AAAAA", 1))
    assert _images_loaded(broken, tmp_path / "profile2") == f"{len(FIGURES) - 1}/{len(FIGURES)}"


def test_means_and_confidence_intervals_over_repetitions(report, loaded):
    out, _, _ = report
    table = pd.read_csv(out / "tables" / "summary.csv")
    runs = loaded.runs
    clients = runs[runs["source"] == "clients"]
    middleware = runs[runs["source"] == "middleware"]
    assert len(table) == 4
    for _, row in table.iterrows():
        mine = clients[clients["configuration"] == row["configuration"]]
        values = mine["throughput"].to_numpy()
        assert len(values) == 2 == row["repetitions"]
        low, high = stats.t.interval(0.95, len(values) - 1, loc=values.mean(), scale=stats.sem(values))
        assert row["throughput"] == pytest.approx(values.mean())
        assert row["throughput_half_width"] == pytest.approx((high - low) / 2)
        mw = middleware[middleware["configuration"] == row["configuration"]]
        assert row["mw_response_ms"] == pytest.approx(mw["response_ms"].mean())
        assert row["response_ms_weighted"] == pytest.approx(np.average(mine["response_ms"], weights=mine["count"]))
        other = mw["response_ms"] - mw["queue_ms"] - mw["service_ms"]
        assert row["mw_other_ms"] == pytest.approx(other.clip(lower=0).mean())
        network = mine["response_ms"].to_numpy() - mw["response_ms"].to_numpy()
        assert row["network_ms"] == pytest.approx(network.mean())
    # Another level: narrower intervals at 90 %.
    narrower = summarize(loaded, 0.90).table
    assert (narrower["throughput_half_width"] < table["throughput_half_width"]).all()


def test_client_percentiles_come_from_the_merged_histograms(report, results, loaded):
    out, _, _ = report
    percentiles = pd.read_csv(out / "tables" / "percentiles.csv")
    manifest = loaded.manifest
    for configuration, group in percentiles[percentiles["side"] == "clients"].groupby("configuration"):
        records = [r for r in manifest["runs"] if r["configuration"] == configuration]
        benches = [json.loads((results / c["json"]).read_text()) for r in records for c in r["files"]["clients"]]
        # Every request of every repetition and bench instance is in the merged histogram.
        assert group["requests"].iloc[0] == sum(b["totals"]["count"] for b in benches)
        # A merged percentile lies between the instances' own (bench-computed) percentiles.
        for column, key in (("p50_ms", "p50"), ("p99_ms", "p99")):
            own = [b["totals"]["latency_us"][key] / 1e3 for b in benches]
            assert min(own) - 1e-9 <= group[column].iloc[0] <= max(own) + 1e-9
    # One bench instance alone: the decoded histogram gives exactly the bench's percentiles.
    bench = json.loads((results / manifest["runs"][0]["files"]["clients"][0]["json"]).read_text())
    single = HdrHistogram.decode(bench["histograms"]["totals"])
    for q, key in ((0.5, "p50"), (0.9, "p90"), (0.99, "p99"), (0.999, "p99_9")):
        assert single.value_at_quantile(q) == bench["totals"]["latency_us"][key]
    # Merging two runs is not averaging their percentiles: counts add up exactly.
    run_ids = [r["id"] for r in manifest["runs"] if r["configuration"] == 0]
    merged = merged_client_hdr(loaded, run_ids)
    parts = [merged_client_hdr(loaded, [run_id]) for run_id in run_ids]
    assert merged.total == sum(p.total for p in parts)


def test_middleware_percentiles_are_within_a_bucket_of_memrelays_own(results, loaded):
    record = loaded.manifest["runs"][0]
    summary = json.loads((results / record["files"]["middlewares"][0]["summary"]).read_text())
    used = [t for t in ("get", "multiget", "set") if summary["types"][t]["count"]]
    assert len(used) == 2
    for request_type in used:
        frame = loaded.histogram(record["id"], "middleware-0", request_type=request_type)
        histogram = Histogram.from_frame(frame)
        assert histogram.total == summary["types"][request_type]["count"]
        for q, key in ((50, "p50"), (90, "p90"), (99, "p99")):
            exact = summary["types"][request_type]["response_us"][key]
            assert abs(histogram.percentile(q) - exact) <= 100, (request_type, key)


def test_interactive_law_table(report, loaded):
    out, _, _ = report
    law = pd.read_csv(out / "tables" / "interactive_law.csv")
    runs = loaded.runs
    for _, row in law.iterrows():
        mine = runs[runs["configuration"] == row["configuration"]]
        clients, middleware = mine[mine["source"] == "clients"], mine[mine["source"] == "middleware"]
        n, x = clients["clients"].iloc[0], clients["throughput"].mean()
        # Response times over the requests the mean throughput counts: weighted by request count.
        r_clients = np.average(clients["response_ms"], weights=clients["count"])
        r = np.average(middleware["response_ms"], weights=middleware["count"])
        z = r_clients - r
        assert row["think_time"] == pytest.approx(z)
        assert row["predicted_response_time"] == pytest.approx(n / x * 1e3 - z)
        assert row["predicted_throughput"] == pytest.approx(n / ((r + z) / 1e3))
        # Closed loop without think time: the clients' own X and R obey N = X R closely.
        assert abs(row["throughput_deviation"]) < 0.25
    flagged = interactive_law_table(summarize(loaded), tolerance=0.0)
    assert not flagged["consistent"].any()
    given = interactive_law_table(summarize(loaded), think_time_ms=0.0)
    assert (given["measured_on"] == "clients").all() and (given["think_time"] == 0).all()


def test_factorial_tables_of_the_2k_r_design(report, loaded):
    out, _, _ = report
    plan, reason = factorial_factors(summarize(loaded))
    assert plan.factors == ["clients", "multiget"] and plan.slice_by == [] and reason == "2^2 2 design"
    effects = pd.read_csv(out / "tables" / "factorial_throughput_effects.csv").set_index("effect")
    runs = loaded.runs[loaded.runs["source"] == "clients"]
    means = runs.groupby(["clients", "multiget"])["throughput"].mean()
    # q_clients = (ybar(high clients) - ybar(low clients)) / 2, averaged over the multi-get levels.
    q_clients = (means.loc[8].mean() - means.loc[2].mean()) / 2
    assert effects.loc["clients", "q"] == pytest.approx(q_clients)
    assert effects.loc["I", "q"] == pytest.approx(runs["throughput"].mean())
    variation = pd.read_csv(out / "tables" / "factorial_throughput_variation.csv").set_index("component")
    shares = variation.drop(index=["SSY", "SS0", "SST"])["variation_percent"]
    assert shares.sum() == pytest.approx(100.0)


def test_plots_are_skipped_when_their_axis_has_one_value(loaded):
    summary = summarize(loaded)
    one_value = summary.table[summary.table["clients"] == 2]
    assert plots.throughput_plot(one_value, "clients", ["multiget"], 0.95) is None
    assert plots.time_breakdown_plot(one_value, "clients", ["multiget"], 0.95) is None
    assert plots.keys_per_second_plot(one_value, "clients", [], 0.95) is None
    assert plots.percentiles_plot(summary.percentiles[summary.percentiles["multiget"] == 1], "multiget", []) is None


def test_report_of_a_folder_that_is_not_one(tmp_path):
    done = subprocess.run([*LAB, "report", str(tmp_path)], capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.strip().count("\n") == 0 and "not a results folder" in done.stderr


def test_report_wall_time_is_reported(report):
    _, stdout, wall = report
    reported = float(re.search(r"tables \(CSV in .*\), ([0-9.]+) s", stdout).group(1))
    assert 0 < reported <= wall
    assert math.isfinite(wall)
