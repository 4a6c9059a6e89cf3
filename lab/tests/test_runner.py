"""End to end: real memcached, memrelay and memrelay-bench processes on loopback.

The numbers checked come from the raw outputs of the programs (bench JSON, middleware
summary.json and windows.jsonl, memcached's own `stats` counters), never from the lab's
arithmetic alone. Needs the binaries (`make build`); skipped when they are missing.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memrelay_lab import load, parse_experiment, run_experiment
from memrelay_lab.experiment import Binaries, BinaryNotFound, ResultsExist, find_binaries
from memrelay_lab.results import parse_stats

try:
    BINARIES = find_binaries()
except BinaryNotFound as missing:
    pytest.skip(f"needs the programs: {missing}", allow_module_level=True)

LAB = [sys.executable, "-m", "memrelay_lab.cli"]

QUICK = """\
name = "e2e"
servers = 2
client_machines = 1
instances_per_machine = 1
threads_per_instance = 2
clients_per_thread = [1, 4]
workload = "1:4"
middlewares = 1
workers = 4
repetitions = 2
test_time = 3
warmup = 0.5
cooldown = 0.5
keys = 2000
value_size = 200
"""


def read(path):
    return json.loads(Path(path).read_text())


def run_quietly(text, out, **kwargs):
    """run_experiment without installing signal handlers (pytest owns them) and without noise."""
    return run_experiment(parse_experiment(text, source="test.toml"), out, handle_signals=False,
                          progress=open(os.devnull, "w"), **kwargs)


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory):
    out = tmp_path_factory.mktemp("results") / "e2e"
    summary = run_quietly(QUICK, out)
    return out, summary


def test_every_run_completes_and_the_manifest_describes_it(quick_results):
    out, summary = quick_results
    assert (summary.total, summary.completed, summary.failed) == (4, 4, 0)
    manifest = read(out / "manifest.json")
    assert manifest["status"] == "completed"
    assert manifest["summary"]["completed"] == 4
    assert [r["id"] for r in manifest["runs"]] == ["c000-r1", "c001-r1", "c000-r2", "c001-r2"]
    assert manifest["versions"]["memcached"].startswith("memcached")
    assert manifest["versions"]["memrelay"].startswith("memrelay")
    assert manifest["machine"]["cores"] >= 1 and manifest["machine"]["kernel"]
    assert manifest["git"]["commit"] is None or len(manifest["git"]["commit"]) == 40
    assert manifest["ended_unix"] > manifest["started_unix"]
    assert (out / "experiment.toml").read_text() == QUICK
    for record in manifest["runs"]:
        files = record["files"]
        for group in ("clients", "middlewares", "servers", "populate"):
            for entry in files[group]:
                for key, value in entry.items():
                    if key in ("json", "log", "summary", "windows", "stats_before", "stats_after"):
                        assert (out / value).is_file(), value
        assert {p["name"] for p in record["processes"]} >= {"server-0", "server-1", "middleware-0", "client-0-0"}


def test_both_sides_count_the_same_requests(quick_results):
    out, _ = quick_results
    for record in read(out / "manifest.json")["runs"]:
        benches = [read(out / c["json"]) for c in record["files"]["clients"]]
        summary = read(out / record["files"]["middlewares"][0]["summary"])
        windows = [json.loads(line) for line in (out / record["files"]["middlewares"][0]["windows"]).open()]
        bench_count = sum(b["totals"]["count"] for b in benches)
        # Populate went straight to the servers (distribution "all"): the middleware saw the load only.
        assert summary["totals"]["count"] == bench_count
        assert sum(w["count"] for w in windows) == bench_count
        assert sum(b["set"]["count"] for b in benches) == summary["types"]["set"]["count"]
        assert sum(b["get"]["count"] for b in benches) == summary["types"]["get"]["count"]
        assert sum(b["totals"]["errors"] for b in benches) == 0 and summary["totals"]["errors"] == 0
        # memcached's own counters over the load phase: gets go to one server, sets to both.
        gets, sets = summary["types"]["get"]["count"], summary["types"]["set"]["count"]
        deltas = []
        for j, server in enumerate(record["files"]["servers"]):
            before = parse_stats((out / server["stats_before"]).read_text())
            after = parse_stats((out / server["stats_after"]).read_text())
            delta = {k: int(after[k]) - int(before[k]) for k in ("cmd_get", "cmd_set", "get_misses")}
            deltas.append(delta)
            assert delta["cmd_set"] == sets
            assert delta["get_misses"] == 0  # populated before the reads
            assert delta["cmd_get"] + delta["cmd_set"] == summary["servers"][j]["requests"]
        assert sum(d["cmd_get"] for d in deltas) == gets
        populate = [read(out / p["json"]) for p in record["files"]["populate"]]
        assert [p["populate"]["totals"]["count"] for p in populate] == [2000, 2000]


def test_load_gives_tidy_frames_that_agree_with_the_raw_files(quick_results):
    out, _ = quick_results
    results = load(out)
    runs = results.runs
    assert len(runs) == 4 * 3
    assert set(runs.source) == {"clients", "middleware-0", "middleware"}
    for column in ("servers", "middlewares", "workers", "clients", "clients_per_thread", "ratio", "multiget",
                   "sharded", "engine", "distribution", "replication", "repetition", "run_id", "throughput",
                   "response_ms", "queue_ms", "service_ms", "queue_length", "response_p99_ms", "hits", "misses",
                   "keys_per_request", "errors"):
        assert column in runs.columns, column
    table = runs.groupby(["clients", "source"]).throughput.mean()
    assert len(table) == 2 * 3
    assert set(runs.clients) == {2, 8}

    manifest = read(out / "manifest.json")
    for record in manifest["runs"]:
        rows = runs[runs.run_id == record["id"]].set_index("source")
        benches = [read(out / c["json"]) for c in record["files"]["clients"]]
        summary = read(out / record["files"]["middlewares"][0]["summary"])
        # Untrimmed totals are exactly the programs' totals.
        assert rows.loc["clients", "count_total"] == sum(b["totals"]["count"] for b in benches)
        assert rows.loc["middleware-0", "count_total"] == summary["totals"]["count"]
        assert rows.loc["middleware", "count_total"] == summary["totals"]["count"]
        # Trimmed: the bench's kept intervals, re-added here from the raw series.
        kept = [i for i in benches[0]["intervals"] if i["second"] >= 0.5 and i["second"] + i["duration_s"] <= 2.5
                and i["duration_s"] == 1.0]
        assert rows.loc["clients", "count"] == sum(i["totals"]["count"] for i in kept)
        assert rows.loc["clients", "throughput"] == pytest.approx(sum(i["totals"]["count"] for i in kept) / len(kept))
        assert rows.loc["clients", "kept_s"] == len(kept)
        # The middleware keeps whole windows inside the trimmed interval: at most what it saw.
        assert rows.loc["middleware-0", "count"] <= summary["totals"]["count"]
        assert rows.loc["middleware-0", "kept_s"] >= 1  # a 2 s kept interval always holds a whole window
        assert rows.loc["middleware", "throughput"] == pytest.approx(rows.loc["middleware-0", "throughput"])
        assert rows.loc["middleware-0", "miss_rate"] == 0 and rows.loc["clients", "miss_rate"] == 0
        assert rows.loc["clients", "keys_per_request"] == 1
        # One bench: the merged histogram gives exactly the percentiles the bench itself reported.
        latency = benches[0]["totals"]["latency_us"]
        assert rows.loc["clients", "response_p50_ms"] == pytest.approx(latency["p50"] / 1000)
        assert rows.loc["clients", "response_p99_ms"] == pytest.approx(latency["p99"] / 1000)
        # Middleware percentiles come from its 100 µs buckets: within one bucket of its own p50.
        middleware_p50 = rows.loc["middleware-0", "response_p50_ms"] * 1000
        own = [summary["types"][t]["response_us"]["p50"] for t in ("get", "set")]
        assert min(own) - 100 <= middleware_p50 <= max(own) + 100

    windows = results.windows
    client_windows = windows[(windows.source == "clients") & (windows.run_id == "c000-r1")]
    bench = read(out / "runs/c000-r1/client-0-0.json")
    assert client_windows["count"].sum() == bench["totals"]["count"]
    assert set(windows.source) == {"clients", "middleware-0", "middleware"}

    servers = results.servers
    assert len(servers) == 4 * 2
    assert (servers.cmd_get + servers.cmd_set == servers.middleware_requests).all()

    assert list(results.status.status) == ["completed"] * 4
    histogram = results.histogram("c000-r1", "clients")
    assert histogram["count"].sum() == bench["totals"]["count"]
    assert histogram["count"].sum() == results.histogram("c000-r1", "middleware")["count"].sum()


def test_resume_skips_completed_runs(quick_results, tmp_path):
    out = tmp_path / "again"
    shutil.copytree(quick_results[0], out)
    # Without --resume an existing results folder is refused (nothing is started).
    with pytest.raises(ResultsExist, match="--resume"):
        run_quietly(QUICK, out)
    # Pretend the last run failed: resuming runs only that one.
    manifest = read(out / "manifest.json")
    manifest["runs"][3]["status"] = "failed"
    (out / "manifest.json").write_text(json.dumps(manifest))
    kept = out / "runs/c000-r1/client-0-0.json"
    before = kept.stat().st_mtime_ns
    started = time.monotonic()
    summary = run_quietly(QUICK, out, resume=True)
    assert (summary.total, summary.completed, summary.skipped, summary.failed) == (4, 4, 3, 0)
    assert kept.stat().st_mtime_ns == before
    manifest = read(out / "manifest.json")
    assert [r["status"] for r in manifest["runs"]] == ["completed"] * 4
    assert [bool(r.get("skipped_on_resume")) for r in manifest["runs"]] == [True, True, True, False]
    assert time.monotonic() - started < 3 + 15
    # Everything resumed: nothing at all runs.
    summary = run_quietly(QUICK, out, resume=True)
    assert (summary.skipped, summary.completed) == (4, 4)


BASELINE_KETAMA = """\
name = "mixed"
combinations = [
  { middlewares = 0, servers = 2, instances_per_machine = 2 },
  { middlewares = 1, servers = 3, distribution = "ketama", replication = 2 },
]
clients_per_thread = 2
workload = "1:3"
repetitions = 1
test_time = 1.5
keys = 500
value_size = 100
"""


def test_baseline_and_ketama_runs(tmp_path):
    out = tmp_path / "mixed"
    summary = run_quietly(BASELINE_KETAMA, out)
    assert (summary.completed, summary.failed) == (2, 0)
    manifest = read(out / "manifest.json")
    baseline, ketama = manifest["runs"]

    # Baseline: each instance talks to its own server; memcached counted exactly the bench's requests.
    for index, client in enumerate(baseline["files"]["clients"]):
        bench = read(out / client["json"])
        server = baseline["files"]["servers"][index]
        before = parse_stats((out / server["stats_before"]).read_text())
        after = parse_stats((out / server["stats_after"]).read_text())
        served = sum(int(after[k]) - int(before[k]) for k in ("cmd_get", "cmd_set"))
        assert served == bench["totals"]["count"]
        assert bench["misses"] == 0 if "misses" in bench else bench["totals"]["misses"] == 0
    assert not baseline["files"]["middlewares"]

    # Ketama: populate went through the middleware, so it counted the populate sets too.
    bench = read(out / ketama["files"]["clients"][0]["json"])
    populate = read(out / ketama["files"]["populate"][0]["json"])
    summary_json = read(out / ketama["files"]["middlewares"][0]["summary"])
    assert ketama["files"]["populate"][0]["target"] == "middleware-0"
    assert summary_json["totals"]["count"] == bench["totals"]["count"] + populate["populate"]["totals"]["count"]
    assert populate["populate"]["totals"]["count"] == 500
    assert bench["totals"]["misses"] == 0
    # Two copies of each of the 500 keys over three servers.
    items = sum(int(parse_stats((out / s["stats_after"]).read_text())["curr_items"])
                for s in ketama["files"]["servers"])
    assert items == 2 * 500

    runs = load(out).runs
    assert list(runs[runs.middlewares == 0].source) == ["clients"]
    # Keys that mean nothing without a middleware are filled, so groupby keeps the baseline rows.
    baseline_row = runs[runs.middlewares == 0].iloc[0]
    assert (baseline_row.workers, baseline_row.engine, baseline_row.replicas) == (0, "n/a", 0)
    assert len(runs.groupby(["middlewares", "workers", "replication"]).throughput.mean()) == 2
    assert set(runs[runs.middlewares == 1].source) == {"clients", "middleware-0", "middleware"}
    assert runs[runs.middlewares == 1].replicas.iloc[0] == 2


def test_a_failing_run_is_recorded_and_the_experiment_goes_on(tmp_path):
    broken = tmp_path / "memrelay"
    broken.write_text("#!/bin/sh\necho 'cannot start: simulated failure' >&2\nexit 3\n")
    broken.chmod(0o755)
    binaries = Binaries(BINARIES.memcached, str(broken), BINARIES.bench)
    text = QUICK.replace("clients_per_thread = [1, 4]", "clients_per_thread = 1").replace(
        "middlewares = 1", "middlewares = [0, 1]").replace("repetitions = 2", "repetitions = 1")
    out = tmp_path / "failing"
    summary = run_quietly(text, out, binaries=binaries)
    assert (summary.total, summary.completed, summary.failed) == (2, 1, 1)
    manifest = read(out / "manifest.json")
    failed = next(r for r in manifest["runs"] if r["status"] == "failed")
    assert "middleware-0 exited with status 3" in failed["reason"]
    assert "simulated failure" in failed["reason"]
    assert (out / failed["files"]["middlewares"][0]["log"]).read_text().strip() == "cannot start: simulated failure"
    assert "1 failed" in summary.describe()
    # Its servers were stopped too.
    for process in failed["processes"]:
        assert not _alive(process["pid"])


def test_missing_binary_is_a_one_line_error(tmp_path):
    env = {**os.environ, "PATH": "/nonexistent", "MEMRELAY_BIN_DIR": str(tmp_path)}
    spec = tmp_path / "x.toml"
    spec.write_text(QUICK)
    done = subprocess.run(LAB + ["run", str(spec), "--out", str(tmp_path / "out")], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "not found" in lines[0] and "make" in lines[0]


def test_bad_file_is_refused_before_anything_starts(tmp_path):
    spec = tmp_path / "x.toml"
    spec.write_text(QUICK.replace("workers = 4", "workers = [4, 4]"))
    done = subprocess.run(LAB + ["run", str(spec), "--out", str(tmp_path / "out")], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert done.stderr.strip() == (f"memrelay-lab: error: {spec}:9: workers: a value is listed twice: [4, 4]")
    assert not (tmp_path / "out").exists()


LONG = QUICK.replace("test_time = 3", "test_time = 30").replace("repetitions = 2", "repetitions = 1")


def test_ctrl_c_stops_everything_promptly(tmp_path):
    spec = tmp_path / "long.toml"
    spec.write_text(LONG)
    out = tmp_path / "long"
    lab = subprocess.Popen(LAB + ["run", str(spec), "--out", str(out)], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        bench_log = out / "runs" / "c000-r1" / "client-0-0.log"
        while not bench_log.exists():  # the load is running
            assert lab.poll() is None, lab.communicate()
            assert time.monotonic() < deadline, "the run never started its load generator"
            time.sleep(0.05)
        time.sleep(0.5)
        ours = _process_groups_of(lab.pid)
        assert len(ours) >= 4  # two servers, a middleware, a bench
        sent = time.monotonic()
        lab.send_signal(signal.SIGINT)
        _, stderr = lab.communicate(timeout=20)
        elapsed = time.monotonic() - sent
    finally:
        if lab.poll() is None:
            lab.kill()
    assert lab.returncode == 130, stderr
    assert elapsed < 8, f"took {elapsed:.1f} s to stop"
    assert "interrupted" in stderr
    for pgid in ours:
        assert not _group_alive(pgid), f"process group {pgid} survived"
    manifest = read(out / "manifest.json")
    assert manifest["status"] == "interrupted"
    assert manifest["runs"][0]["status"] == "interrupted"
    pids = {p["pid"] for p in manifest["runs"][0]["processes"]}
    assert set(ours) <= pids  # (the manifest also lists the populate processes, already done)
    assert not any(_alive(pid) for pid in pids)


def _process_groups_of(parent: int) -> list[int]:
    """Children of ``parent`` that lead their own process group (what LocalHost starts)."""
    groups = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ppid, pgid = int(fields[1]), int(fields[2])
        if ppid == parent and pgid == int(entry.name):
            groups.append(pgid)
    return groups


def _group_alive(pgid: int) -> bool:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":
                return True
    return False


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"
